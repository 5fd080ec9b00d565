package thresholds_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
	"github.com/otelcol-gpu/otelcol-gpu/rules"
)

const root = "../.."

// shared are the thresholds an alert fires on and dashboards colour at, with the panels
// (by title) that colour at them.
var shared = []struct {
	alert  string
	value  float64
	panels []string
}{
	{"GPUTemperatureHigh", thresholds.TemperatureHighCelsius, []string{"GPUs now"}},
	{"GPUPowerNearLimit", thresholds.PowerNearLimitRatio, []string{"Power as share of the enforced limit"}},
	{"GPUUtilizationSaturated", thresholds.UtilizationSaturatedRatio, []string{"Average utilization", "GPUs now", "Mean pod GPU utilization", "Pods on GPUs now", "Who owns each instance"}},
	{"GPULowUtilizationHighPower", thresholds.UtilizationLowRatio, []string{"Average utilization", "GPUs now", "Mean pod GPU utilization"}},
	{"GPUMemoryHigh", thresholds.MemoryHighRatio, []string{"Framebuffer in use", "GPUs now", "Framebuffer used", "MIG framebuffer in use", "Who owns each instance", "Framebuffer used share per instance"}},
	{"GPUAttributionStale", thresholds.AttributionStaleSeconds, []string{"Pod attribution age"}},
}

// alone are thresholds only an alert uses.
var alone = []struct {
	alert string
	value float64
}{
	{"GPUPowerCapping", thresholds.PowerCappedShare},
	{"GPULowUtilizationHighPower", thresholds.PowerWhileIdleRatio},
	{"GPUMemoryExhaustionPredicted", thresholds.MemoryGrowthMinShare},
	{"GPUCorrectableECCErrorsRising", thresholds.CorrectedECCErrors6h},
	{"GPUWorkloadUtilizationDeviation", thresholds.BaselineMinHours},
	{"GPUIdleCostHigh", thresholds.IdleCostPerDay},
}

// TestAlertsDashboardsAndRunbookAgree: each threshold is a number in its alert's
// expression (as the generated rule file has it), a step of the threshold scale of every
// panel that shows it (as the committed dashboards have it), and in the alert's runbook
// section.
func TestAlertsDashboardsAndRunbookAgree(t *testing.T) {
	alerts := alertExprs(t)
	steps := panelSteps(t)
	runbook := runbookSections(t)
	check := func(alert string, value float64) {
		expr, ok := alerts[alert]
		require.True(t, ok, "no alert %s", alert)
		assert.Contains(t, numbers(t, expr), value, "%s does not compare with %v: %s", alert, value, expr)
		assert.Contains(t, runbook[alert], strconv.FormatFloat(value, 'f', -1, 64), "runbook section %s does not quote %v", alert, value)
	}
	for _, s := range shared {
		check(s.alert, s.value)
		for _, p := range s.panels {
			require.Contains(t, steps, p, "no panel %q", p)
			assert.Contains(t, steps[p], s.value, "panel %q does not colour at %s's threshold %v", p, s.alert, s.value)
		}
	}
	for _, a := range alone {
		check(a.alert, a.value)
	}
}

// TestXIDClasses: the XID alerts select the fatal codes, and the runbook lists both
// classes where those alerts are explained.
func TestXIDClasses(t *testing.T) {
	alerts := alertExprs(t)
	runbook := runbookSections(t)
	var fatal []string
	for _, c := range thresholds.XIDs(thresholds.XIDFatal) {
		fatal = append(fatal, strconv.FormatUint(c, 10))
		assert.Equal(t, thresholds.XIDFatal, thresholds.ClassOfXID(c))
		assert.Contains(t, runbook["GPUXidErrorFatal"], "| "+strconv.FormatUint(c, 10)+" |")
	}
	for _, c := range thresholds.XIDs(thresholds.XIDSevere) {
		assert.Equal(t, thresholds.XIDSevere, thresholds.ClassOfXID(c))
		assert.Contains(t, runbook["GPUXidError"], "| "+strconv.FormatUint(c, 10)+" |")
	}
	for _, c := range []uint64{0, 13, 31, 43} {
		assert.Equal(t, thresholds.XIDInformational, thresholds.ClassOfXID(c))
	}
	sels, err := promql.Selectors(alerts["GPUXidErrorFatal"])
	require.NoError(t, err)
	assert.Equal(t, `nvidia_gpu_xid=~"`+strings.Join(fatal, "|")+`"`, sels[0].Matchers[0].String())
}

// TestIdleUtilizationIsGPUEnrichDefault: the funnel's active tier and gpu_enrich's
// idle-while-allocated use the same idle threshold (the processor's default, read from its
// source so that this package does not import the collector).
func TestIdleUtilizationIsGPUEnrichDefault(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "processor", "gpuenrichprocessor", "factory.go"))
	require.NoError(t, err)
	m := regexp.MustCompile(`Idle:\s*IdleConfig\{Threshold:\s*([0-9.]+)`).FindSubmatch(raw)
	require.NotNil(t, m, "no idle threshold default in gpu_enrich's factory.go")
	def, err := strconv.ParseFloat(string(m[1]), 64)
	require.NoError(t, err)
	assert.Equal(t, def, thresholds.IdleUtilizationRatio)
	var active string
	for _, r := range rules.All() {
		if r.Record == "namespace_workload_pod_gpu:gpus_active:share" {
			active = r.Expr
		}
	}
	assert.Contains(t, numbers(t, active), thresholds.IdleUtilizationRatio)
}

func TestRunbookURL(t *testing.T) {
	assert.Equal(t, thresholds.RunbookURL+"#gputemperaturehigh", thresholds.Runbook("GPUTemperatureHigh"))
}

// alertExprs: alert name to expression (the committed rule files are these; the rules'
// tests check it).
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range rules.All() {
		if r.Alert != "" {
			out[r.Alert] = r.Expr
		}
	}
	return out
}

// numbers returns every number literal of a PromQL expression.
func numbers(t *testing.T, expr string) []float64 {
	t.Helper()
	e, err := promql.Parse(expr)
	require.NoError(t, err)
	var out []float64
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if l, ok := n.(*parser.NumberLiteral); ok {
			out = append(out, l.Val)
		}
		return nil
	})
	return out
}

// panelSteps reads the committed dashboards: panel title to every threshold step value of
// the panel (its defaults and its field overrides).
func panelSteps(t *testing.T) map[string][]float64 {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "dashboards", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	type thresholdsJSON struct {
		Steps []struct {
			Value *float64 `json:"value"`
		} `json:"steps"`
	}
	type panel struct {
		Title       string `json:"title"`
		FieldConfig struct {
			Defaults struct {
				Thresholds thresholdsJSON `json:"thresholds"`
			} `json:"defaults"`
			Overrides []struct {
				Properties []struct {
					ID    string          `json:"id"`
					Value json.RawMessage `json:"value"`
				} `json:"properties"`
			} `json:"overrides"`
		} `json:"fieldConfig"`
		Panels []panel `json:"panels"`
	}
	out := map[string][]float64{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			scales := []thresholdsJSON{p.FieldConfig.Defaults.Thresholds}
			for _, o := range p.FieldConfig.Overrides {
				for _, prop := range o.Properties {
					if prop.ID == "thresholds" {
						var th thresholdsJSON
						require.NoError(t, json.Unmarshal(prop.Value, &th))
						scales = append(scales, th)
					}
				}
			}
			for _, s := range scales {
				for _, st := range s.Steps {
					if st.Value != nil && !slices.Contains(out[p.Title], *st.Value) {
						out[p.Title] = append(out[p.Title], *st.Value)
					}
				}
			}
			walk(p.Panels)
		}
	}
	for _, path := range paths {
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var d struct {
			Panels []panel `json:"panels"`
		}
		require.NoError(t, json.Unmarshal(raw, &d), path)
		walk(d.Panels)
	}
	return out
}

// runbookSections reads rules/runbook.md: alert name to its section's text.
func runbookSections(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "rules", "runbook.md"))
	require.NoError(t, err)
	out := map[string]string{}
	parts := regexp.MustCompile(`(?m)^## (\w+)$`).Split(string(raw), -1)
	names := regexp.MustCompile(`(?m)^## (\w+)$`).FindAllStringSubmatch(string(raw), -1)
	for i, n := range names {
		out[n[1]] = parts[i+1]
	}
	return out
}
