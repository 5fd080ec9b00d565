package gpureceiver

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The series budget (issue 15): what one GPU costs in a time-series database, by default
// and with the full overlay, counted on the simulated systems and written to
// docs/metrics-budget.md, so that the document cannot drift from the code.

const (
	budgetDoc = "../../docs/metrics-budget.md"
	// seriesBudget is the most series an H100 with 18 NVLinks (no MIG, no processes) may
	// cost by default: issue 15's 40, and the encoder's utilization, which NVML answers
	// (0 %) on GPUs without NVENC as nvidia-smi and dcgm-exporter show it (issue 40).
	seriesBudget = 41
	// callBudget is the most NVML calls one GPU may cost per scrape by default (MIG
	// instances excepted: each costs its own): issue 15's 12, and the encoder's samples.
	callBudget = 13
)

// resourceKind tells the receiver's resources apart.
func resourceKind(a pcommon.Map) string {
	_, gpu := a.Get("hw.id")
	_, mig := a.Get("nvidia.mig.uuid")
	_, proc := a.Get("process.pid")
	switch {
	case proc:
		return "process"
	case mig:
		return "mig"
	case gpu:
		return "gpu"
	}
	return "host"
}

// budgetRun is what one simulated system costs with one configuration.
type budgetRun struct {
	model   string
	gpus    int
	migGPUs int
	// series of one GPU (the first non-MIG one, or a MIG-enabled one), of one MIG instance,
	// of one process, and of the node's own resource, by metric.
	gpu, migGPU, mig, process, host map[string]int
	// calls is NVML calls per GPU per scrape, averaged over two minutes of scrapes.
	calls float64
}

func measureBudget(t *testing.T, cfg *Config, system, scenario string) budgetRun {
	t.Helper()
	clock := newFakeClock()
	sim := newSim(t, system, scenario, clock)
	s := startedScraper(t, cfg, sim, clock)
	// Two scrapes prime the interval state (GPM sample pairs, the MIG mode, what a GPU
	// does not support).
	for range 2 {
		clock.Step(10 * time.Second)
		_, err := s.scrape(context.Background())
		require.NoError(t, err)
	}
	before := sim.TotalCalls() - sim.Calls()["EventSetWait"]
	const scrapes = 12 // two minutes: what is read once a minute counts too
	var md pmetric.Metrics
	for range scrapes {
		clock.Step(10 * time.Second)
		var err error
		md, err = s.scrape(context.Background())
		require.NoError(t, err)
	}
	calls := sim.TotalCalls() - sim.Calls()["EventSetWait"] - before

	run := budgetRun{gpus: len(s.devices), calls: float64(calls) / scrapes / float64(len(s.devices))}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		a := rm.Resource().Attributes()
		by := pdatawalk.SeriesPerMetric(rm)
		switch resourceKind(a) {
		case "host":
			run.host = by
		case "process":
			if run.process == nil {
				run.process = by
			}
		case "mig":
			if run.mig == nil {
				run.mig = by
			}
		case "gpu":
			if model, ok := a.Get("hw.model"); ok {
				run.model = model.Str()
			}
			if _, mig := by["hw.gpu.utilization"]; !mig && strings.Contains(scenario, "mig") {
				run.migGPUs++
				if run.migGPU == nil {
					run.migGPU = by
				}
			} else if run.gpu == nil {
				run.gpu = by
			}
		}
	}
	return run
}

var budgetSystems = []struct{ system, name string }{
	{"dgxa100", "DGX A100"}, {"dgxh100", "DGX H100"}, {"dgxh200", "DGX H200"}, {"dgxb200", "DGX B200"},
}

// TestMetricsBudget measures series and NVML calls per GPU on every simulated system, by
// default and with the full overlay, holds the H100 to the budget, and checks (or, with
// -update, writes) docs/metrics-budget.md.
func TestMetricsBudget(t *testing.T) {
	configs := []struct {
		name string
		cfg  *Config
	}{{"default", testConfig()}, {"full", fullTestConfig(t)}}
	runs := map[string]map[string]budgetRun{} // system/scenario → config → run
	for _, sys := range budgetSystems {
		for _, scenario := range []string{"steady-training", "mig"} {
			key := sys.system + "/" + scenario
			runs[key] = map[string]budgetRun{}
			for _, c := range configs {
				runs[key][c.name] = measureBudget(t, c.cfg, sys.system, scenario)
			}
		}
	}

	h100 := runs["dgxh100/steady-training"]["default"]
	assert.LessOrEqual(t, pdatawalk.Total(h100.gpu), seriesBudget, "series per H100 by default: %v", h100.gpu)
	for _, sys := range budgetSystems {
		run := runs[sys.system+"/steady-training"]["default"]
		assert.LessOrEqual(t, run.calls, float64(callBudget), "NVML calls per %s per scrape", sys.name)
	}

	doc := budgetDocument(runs)
	if *update {
		require.NoError(t, os.WriteFile(budgetDoc, []byte(doc), 0o644))
	}
	want, err := os.ReadFile(budgetDoc)
	require.NoError(t, err)
	assert.Equal(t, string(want), doc, "docs/metrics-budget.md is stale: run go test ./receiver/gpureceiver -run TestMetricsBudget -update")
}

func budgetDocument(runs map[string]map[string]budgetRun) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("# Metrics budget: series and NVML calls per GPU")
	p("")
	p("What one GPU costs, by default and with the full overlay")
	p("(`deploy/config-overlays/full.yaml`), counted on the simulated DGX systems (eight GPUs")
	p("each, all busy training). A series is one metric with one set of attribute values on one")
	p("resource: one Prometheus series once the shipped configs promote the resource")
	p("attributes to labels. NVML calls are averaged over two minutes of 10 s scrapes, so what is")
	p("read once a minute counts too. Generated by `TestMetricsBudget`")
	p("(`receiver/gpureceiver/budget_test.go`), which also holds an H100 to %d series and every", seriesBudget)
	p("GPU to %d NVML calls per scrape by default; `go test ./receiver/gpureceiver -run", callBudget)
	p("TestMetricsBudget -update` rewrites this file. What the whole agent writes per GPU —")
	p("these plus gpu_enrich's derived signals, with the eight clock-event reasons folded into")
	p("three throttle flags — is in [metrics-budget-agent.md](metrics-budget-agent.md).")
	p("")
	p("## Per GPU")
	p("")
	p("| system | GPU | series per GPU, default | full | NVML calls per GPU per scrape, default | full |")
	p("|---|---|---|---|---|---|")
	for _, sys := range budgetSystems {
		d, f := runs[sys.system+"/steady-training"]["default"], runs[sys.system+"/steady-training"]["full"]
		p("| %s | %s | %d | %d | %.1f | %.1f |", sys.name, d.model, pdatawalk.Total(d.gpu), pdatawalk.Total(f.gpu), d.calls, f.calls)
	}
	p("")
	p("Besides its GPUs, a node has %d series of its own (%s).", pdatawalk.Total(runs["dgxh100/steady-training"]["default"].host),
		strings.Join(sortedKeys(runs["dgxh100/steady-training"]["default"].host), ", "))
	p("")
	p("## Processes and MIG")
	p("")
	p("Per-process and MIG series are on by default: they are what attributes a GPU to pods.")
	p("Each GPU process and each MIG instance is a resource of its own; the simulated `mig`")
	p("scenario runs GPU 0 with four instances, GPU 1 with seven and the other six GPUs whole.")
	p("")
	p("| system | series per process, default | full | per MIG-enabled GPU, default | full | per MIG instance, default | full | NVML calls per GPU per scrape in the `mig` scenario, default | full |")
	p("|---|---|---|---|---|---|---|---|---|")
	for _, sys := range budgetSystems {
		s := runs[sys.system+"/steady-training"]
		m := runs[sys.system+"/mig"]
		p("| %s | %d | %d | %d | %d | %d | %d | %.1f | %.1f |", sys.name, pdatawalk.Total(s["default"].process), pdatawalk.Total(s["full"].process),
			pdatawalk.Total(m["default"].migGPU), pdatawalk.Total(m["full"].migGPU), pdatawalk.Total(m["default"].mig), pdatawalk.Total(m["full"].mig),
			m["default"].calls, m["full"].calls)
	}
	p("")
	p("A MIG instance costs NVML calls of its own every scrape: its framebuffer, and on GPUs")
	p("with GPM a sample and a metrics read; its identity is read once a minute.")
	p("")
	p("## Series per metric, DGX H100")
	p("")
	p("| metric | default | full |")
	p("|---|---|---|")
	d, f := runs["dgxh100/steady-training"]["default"].gpu, runs["dgxh100/steady-training"]["full"].gpu
	names := sortedKeys(f)
	for _, n := range sortedKeys(d) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		p("| `%s` | %s | %d |", n, dash(d[n]), f[n])
	}
	p("| **total** | **%d** | **%d** |", pdatawalk.Total(d), pdatawalk.Total(f))
	return b.String()
}

func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func dash(n int) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprint(n)
}
