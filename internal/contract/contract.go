// Package contract derives, from the metadata.yaml files of the receiver and the
// processor (the metric contract), the names the metrics have once they land in Prometheus
// through prometheus_remote_write with its default translation. Rules and dashboards are
// checked against it, so that a renamed metric breaks the build instead of a dashboard.
package contract // import "github.com/otelcol-gpu/otelcol-gpu/internal/contract"

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/prometheus/otlptranslator"
	"go.yaml.in/yaml/v3"
)

// Sources are the metadata.yaml files that make up the contract, relative to the
// repository root.
var Sources = []string{
	"receiver/gpureceiver/metadata.yaml",
	"processor/gpuenrichprocessor/metadata.yaml",
}

type metadata struct {
	Metrics map[string]struct {
		Unit  string    `yaml:"unit"`
		Gauge *struct{} `yaml:"gauge"`
		Sum   *struct {
			Monotonic bool `yaml:"monotonic"`
		} `yaml:"sum"`
	} `yaml:"metrics"`
}

// PrometheusNames returns the Prometheus name of every metric of the contract, mapped to
// its OpenTelemetry name. root is the repository root.
func PrometheusNames(root string) (map[string]string, error) {
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
