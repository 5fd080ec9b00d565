//go:build e2e

package testbed

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// fakeCAdvisor serves the one cAdvisor series the workloads dashboard puts next to GPU
// utilization (a data-loader starving the GPU shows as CPU-bound containers).
func fakeCAdvisor(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE container_cpu_usage_seconds_total counter")
		for i := 1; i < 8; i++ {
			fmt.Fprintf(w, "container_cpu_usage_seconds_total{namespace=\"ml\",pod=\"train-%d\",container=\"pytorch\"} %d\n", i, time.Now().Unix()%100000*int64(i))
		}
		fmt.Fprintln(w, `container_cpu_usage_seconds_total{namespace="serving",pod="infer-a",container="server"} 1234`)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// Dashboards need situations a simulated machine does not have; each is named here with
// why, and nothing else may come back empty.
var emptyBecause = map[string]string{
	"nvidia_gpu_fan_speed_ratio":              "the simulated boards are fanless SXM modules",
	"nvidia_gpu_memory_retired_pages_total":   "Ampere and newer remap rows instead of retiring pages",
	"nvidia_gpu_memory_retired_pages_pending": "Ampere and newer remap rows instead of retiring pages",
}

// migNode: a kubelet that offers GPU 1's seven 1g MIG slices and has handed two to a
// notebook.
func migNode(t *testing.T) agentNode {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	sim, err := gpusim.New(gpusim.Options{System: "dgxh100", Scenario: "mig", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	slices := sim.MIGDevices()[1]
	pods := []fakekubelet.Pod{{Namespace: "notebooks", Name: "jupyter-alice", Containers: []fakekubelet.Container{
		{Name: "notebook", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIDs: slices[:2]}}},
	}}}
	socket := filepath.Join(dir, "kubelet.sock")
	startFakeKubelet(t, socket, pods, []fakekubelet.Devices{{ResourceName: "nvidia.com/mig-1g.10gb", DeviceIDs: slices}})
	return agentNode{kubeletSocket: socket}
}

// TestEveryDashboardQueryReturnsData feeds a real Prometheus from agents running the
// scenarios the dashboards are about, then runs every panel and variable query of every
// dashboard (variables set to All) and expects data back.
func TestEveryDashboardQueryReturnsData(t *testing.T) {
	am := prom.StartAlertmanager(t)
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%s]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["%s"]
scrape_configs:
  - job_name: cadvisor
    static_configs:
      - targets: ["%s"]
`, strings.Join(fastRules(t), ", "), am.Addr, fakeCAdvisor(t))
	p := prom.Start(t, cfg)
	// The memory-leak scenario grows the framebuffer 1.5 % every 5 s and the leak rule wants
	// 5 % (min_growth) over the window: 15 s holds three steps (4.5 %), so the leak panels
	// showed data only when scrape jitter stretched a window over a fourth step. 20 s holds four.
	windows := []string{"processors::gpu_enrich::idle::window=5s", "processors::gpu_enrich::leak::window=20s"}

	shared := fakeNode(t, simulatedUUIDs(t, "dgxh200"))
	shared.sets = windows
	startAgentOn(t, p, "dash-shared", "dgxh200", "shared-gpu", shared)
	idle := allocatedNode(t, "dgxa100")
	idle.sets = windows
	startAgentOn(t, p, "dash-idle", "dgxa100", "idle", idle)
	leak := allocatedNode(t, "dgxb200")
	leak.sets = windows
	startAgentOn(t, p, "dash-leak", "dgxb200", "memory-leak", leak)
	mig := migNode(t)
	mig.sets = windows
	startAgentOn(t, p, "dash-mig", "dgxh100", "mig", mig)
	startAgentOn(t, p, "dash-ecc", "dgxh100", "ecc-degrading", agentNode{sets: windows})
	startAgentOn(t, p, "dash-late-driver", "dgxh100", "steady-training", agentNode{sets: append([]string{
		"receivers::gpu::simulated::nvml_missing_for=3s",
		"receivers::gpu::nvml::init_retry::initial_interval=1s",
	}, windows...)})
	startAgentOn(t, p, "dash-xid", "dgxh100", "xid-storm", agentNode{sets: windows})
	// A bare-metal Slurm node (no Kubernetes) for the workloads dashboard's Slurm row.
	slurm := slurmNode(t)
	slurm.sets = windows
	startAgentOn(t, p, "dash-slurm", "dgxh100", "steady-training", slurm)
	// Panels that say they need the full overlay (static limits, time held down per cause,
	// the other GPM activities, …) get their data from agents with it: a throttled node,
	// and a MIG node for the MIG instances. Every other panel and variable must answer
	// from the agents with the default set alone.
	full := []string{"../deploy/config-overlays/full.yaml"}
	startAgentOn(t, p, "dash-hot", "dgxh100", "thermal-throttle", agentNode{sets: windows, overlays: full})
	startAgentOn(t, p, "dash-full", "dgxh100", "mig", agentNode{sets: windows, overlays: full})
	withoutFull := labels.MustNewMatcher(labels.MatchNotRegexp, "host_name", "dash-hot|dash-full")

	time.Sleep(30 * time.Second) // windows fill, rates have two points, alerts fire
	for _, d := range dashboards.All() {
		if d.UID == costDashboardUID {
			continue // it reads the cost rules, which need prices: TestCostDashboardQueriesReturnData
		}
		t.Run(d.File, func(t *testing.T) {
			panels, err := d.Panels()
			if err != nil {
				t.Fatal(err)
			}
			queries, err := d.Queries() // the panels' queries, then the variables'
			if err != nil {
				t.Fatal(err)
			}
			needsFull := map[int]bool{}
			n := 0
			for _, p := range panels {
				for range p.Queries {
					needsFull[n] = p.NeedsFullOverlay()
					n++
				}
			}
			for i, q := range queries {
				expr := promql.OnAll(q)
				if !needsFull[i] {
					expr = withMatcher(t, expr, withoutFull)
				}
				prom.Eventually(t, 60*time.Second, expr, func() error {
					s, err := p.Query(expr)
					if err != nil {
						return err
					}
					if len(s) > 0 {
						return nil
					}
					names, _ := promql.MetricNames(q)
					sort.Strings(names)
					for _, n := range names {
						if why, ok := emptyBecause[n]; ok {
							t.Logf("empty, as expected (%s): %s", why, expr)
							return nil
						}
					}
					return fmt.Errorf("no data")
				})
			}
		})
	}
}

// withMatcher adds a label matcher to every selector of a query.
func withMatcher(t *testing.T, query string, m *labels.Matcher) string {
	t.Helper()
	expr, err := parser.NewParser(parser.Options{}).ParseExpr(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	parser.Inspect(expr, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			vs.LabelMatchers = append(vs.LabelMatchers, m)
		}
		return nil
	})
	return expr.String()
}
