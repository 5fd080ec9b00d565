// Package contract derives, from the metadata.yaml files of the receiver and the
// processor (the metric contract), the names the metrics have once they land in Prometheus
// through remote-write with its default translation (contrib's prometheus_remote_write, as
// configs/agent.yaml runs it). Rules and dashboards are
// checked against it, so that a renamed metric breaks the build instead of a dashboard.
package contract // import "github.com/otelcol-gpu/otelcol-gpu/internal/contract"

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/otlptranslator"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
)

// Sources are the metadata.yaml files that make up the contract, relative to the
// repository root.
var Sources = []string{
	"receiver/gpureceiver/metadata.yaml",
	"processor/gpuenrichprocessor/metadata.yaml",
}

type metadata struct {
	Metrics map[string]struct {
		Enabled bool      `yaml:"enabled"`
		Unit    string    `yaml:"unit"`
		Gauge   *struct{} `yaml:"gauge"`
		Sum     *struct {
			Monotonic bool `yaml:"monotonic"`
		} `yaml:"sum"`
	} `yaml:"metrics"`
}

// PrometheusNames returns the Prometheus name of every metric of the contract, mapped to
// its OpenTelemetry name. root is the repository root.
func PrometheusNames(root string) (map[string]string, error) {
	return names(root, func(bool) bool { return true })
}

// Default is what the agent writes without the full overlay
// (deploy/config-overlays/full.yaml), which turns on what is off by default.
type Default struct {
	disabled map[string]string // Prometheus name to OpenTelemetry name: enabled: false
}

// DefaultSet reads the default set from the contract's metadata.yaml files. root is the
// repository root.
func DefaultSet(root string) (Default, error) {
	disabled, err := names(root, func(enabled bool) bool { return !enabled })
	return Default{disabled: disabled}, err
}

// Besides the metrics metadata.yaml disables, the full overlay turns on series that
// configuration holds back: the receiver's profiling.activities beyond these, and the
// clock-event reasons gpu_enrich folds into nvidia.gpu.throttled unless
// throttle.keep_clock_events.
var (
	defaultActivities = []string{"sm_active", "tensor_active", "dram_active"}
	foldedByEnrich    = "nvidia_gpu_clock_event_active"
	profilingActivity = "nvidia_gpu_profiling_activity_ratio"
)

// Lacks says why the default set has nothing a selector selects, or "" when it has.
func (d Default) Lacks(s promql.Selector) string {
	if otel, ok := d.disabled[s.Metric]; ok {
		return otel + " is disabled by default"
	}
	if s.Metric == foldedByEnrich {
		return "gpu_enrich folds the clock-event reasons into nvidia.gpu.throttled unless throttle.keep_clock_events"
	}
	if s.Metric == profilingActivity {
		for _, m := range s.Matchers {
			if m.Name == "nvidia_gpu_profiling_metric" && !slices.ContainsFunc(defaultActivities, m.Matches) {
				return fmt.Sprintf("the receiver's default profiling.activities (%s) have no %s", strings.Join(defaultActivities, ", "), m)
			}
		}
	}
	return ""
}

// names returns the Prometheus names of the metrics whose enabled flag keep accepts.
func names(root string, keep func(enabled bool) bool) (map[string]string, error) {
	namer := otlptranslator.NewMetricNamer("", otlptranslator.UnderscoreEscapingWithSuffixes)
	out := map[string]string{}
	for _, src := range Sources {
		raw, err := os.ReadFile(filepath.Join(root, src))
		if err != nil {
			return nil, err
		}
		var md metadata
		if err := yaml.Unmarshal(raw, &md); err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		for name, m := range md.Metrics {
			if !keep(m.Enabled) {
				continue
			}
			typ := otlptranslator.MetricType(otlptranslator.MetricTypeGauge)
			if m.Sum != nil {
				typ = otlptranslator.MetricTypeNonMonotonicCounter
				if m.Sum.Monotonic {
					typ = otlptranslator.MetricTypeMonotonicCounter
				}
			}
			prom, err := namer.Build(otlptranslator.Metric{Name: name, Unit: m.Unit, Type: typ})
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", src, name, err)
			}
			out[prom] = name
		}
	}
	return out, nil
}
