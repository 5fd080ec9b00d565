//go:build e2e

package testbed

import (
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/internal/pricing"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
	"github.com/otelcol-gpu/otelcol-gpu/rules"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

const costDashboardUID = "gpu-cost"

// costPeriodGroup is the recording group that sums the hourly costs over a day and 30
// days: sum_over_time(…:sum1h[23h59m59s:1h]), evaluated every 2 minutes.
const costPeriodGroup = "gpu-cost-period.rules"

// hourStep is a subquery over hourly steps, [<range>:1h].
var hourStep = regexp.MustCompile(`\[(\w+):1h\]`)

// costRuleFiles writes the rule files the cost dashboard reads: the committed
// rules/gpu-recording.yaml, and gpu-prices.yaml for prices as rules/gen -prices writes it
// (the committed one, with no price set, when prices is nil). One change to the recording rules, in the day and 30-day
// cost group only: an hour becomes a second there. Its subqueries step an hour at a time,
// on the hour (Prometheus aligns a subquery's steps to multiples of the step), so they would
// return nothing until the testbed has run across a full hour; [23h59m59s:1h] becomes
// [23s999ms:1s] (the same 24 steps), and the group runs at the global evaluation interval
// instead of every 2 minutes. The GPU-hours rules ([59m59s:1m]) are loaded as they are:
// they answer from the first whole minute on.
func costRuleFiles(t *testing.T, prices *pricing.Prices) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(proc.RepoRoot(), "rules", "gpu-recording.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The group's text: from its name to the next group's (the file is generated: groups
	// are items of the top-level list, two spaces in).
	text := string(raw)
	from := strings.Index(text, "\n  - name: "+costPeriodGroup+"\n")
	if from < 0 {
		t.Fatalf("no group %s in rules/gpu-recording.yaml", costPeriodGroup)
	}
	to := len(text)
	if next := strings.Index(text[from+1:], "\n  - name: "); next >= 0 {
		to = from + 1 + next
	}
	group := strings.Replace(text[from:to], "\n    interval: 2m\n", "\n", 1)
	n := 0
	group = hourStep.ReplaceAllStringFunc(group, func(m string) string {
		d, err := model.ParseDuration(hourStep.FindStringSubmatch(m)[1])
		if err != nil {
			t.Fatalf("%s: %v", m, err)
		}
		n++
		return "[" + (d / 3600).String() + ":1s]"
	})
	if n == 0 || strings.Contains(group, "interval:") {
		t.Fatalf("group %s of rules/gpu-recording.yaml changed (no [...:1h] subquery, or another interval): this test with it", costPeriodGroup)
	}
	recording := []byte(text[:from] + group + text[to:])
	// Still a rule file.
	var check struct {
		Groups []struct {
			Name string `yaml:"name"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(recording, &check); err != nil || len(check.Groups) == 0 {
		t.Fatalf("rewritten rules/gpu-recording.yaml: %v", err)
	}
	priceRules, err := os.ReadFile(filepath.Join(proc.RepoRoot(), "rules", "gpu-prices.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if prices != nil {
		// What `go run ./rules/gen -prices <file>` writes for these prices.
		files, err := rules.RenderPrices(*prices, "the testbed's prices (TestCostDashboardQueriesReturnData)")
		if err != nil {
			t.Fatal(err)
		}
		priceRules = files["gpu-prices.yaml"]
	}
	dir := t.TempDir()
	var out []string
	for name, content := range map[string][]byte{"gpu-recording.yaml": recording, "gpu-prices.yaml": priceRules} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, path)
	}
	return out
}

// startCostPrometheus starts a Prometheus that evaluates the rules every second.
func startCostPrometheus(t *testing.T, ruleFiles []string) *prom.Server {
	t.Helper()
	return prom.Start(t, fmt.Sprintf(`global:
  evaluation_interval: 1s
rule_files: [%s]
scrape_configs: []
`, strings.Join(ruleFiles, ", ")))
}

// simulatedModel is the GPU model (hw_model) of a simulated system.
func simulatedModel(t *testing.T, system string) string {
	t.Helper()
	sim, err := gpusim.New(gpusim.Options{System: system, Scenario: "idle", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if ret := sim.Init(); ret != nvml.SUCCESS {
		t.Fatalf("%s: %v", system, ret)
	}
	dev, ret := sim.DeviceGetHandleByIndex(0)
	if ret != nvml.SUCCESS {
		t.Fatalf("%s: %v", system, ret)
	}
	name, ret := dev.GetName()
	if ret != nvml.SUCCESS {
		t.Fatalf("%s: %v", system, ret)
	}
	return name
}

// migUser is a pod on MIG instances of the MIG node: its devices (MIG UUIDs, with a
// time-slicing replica where it shares one) and the PIDs of the simulated processes that
// run in it.
type migUser struct {
	namespace, name, uid, resource string
	devices                        []string
	pids                           []int
}

// migUsers lays out the MIG node's pods on the `mig` scenario's instances (GPU 0: 3g, 2g,
// 1g, 1g; GPU 1: seven 1g; MIG device j of GPU i runs PID 30000+10i+j): ml/finetune on the
// 3g, ml/eval on the 2g, notebooks/jupyter-alice on two 1g of GPU 1, and the first 1g of
// GPU 0 time-sliced between notebooks/jupyter-bob, whose process runs there, and
// notebooks/jupyter-carol, who holds a replica and runs nothing.
func migUsers(t *testing.T) []migUser {
	t.Helper()
	sim, err := gpusim.New(gpusim.Options{System: "dgxh100", Scenario: "mig", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	migs := sim.MIGDevices()
	if len(migs[0]) != 4 || len(migs[1]) != 7 {
		t.Fatalf("MIG layout of the mig scenario changed: %v", migs)
	}
	return []migUser{
		{"ml", "finetune", "cccccccc-3333-4333-8333-000000000003", "nvidia.com/mig-3g.40gb", migs[0][:1], []int{30000}},
		{"ml", "eval", "dddddddd-4444-4444-8444-000000000004", "nvidia.com/mig-2g.20gb", migs[0][1:2], []int{30001}},
		{"notebooks", "jupyter-alice", "eeeeeeee-5555-4555-8555-000000000005", "nvidia.com/mig-1g.10gb", migs[1][:2], []int{30010, 30011}},
		{"notebooks", "jupyter-bob", "ffffffff-6666-4666-8666-000000000006", "nvidia.com/mig-1g.10gb.shared", []string{migs[0][2] + "::0"}, []int{30002}},
		{"notebooks", "jupyter-carol", "abababab-7777-4777-8777-000000000007", "nvidia.com/mig-1g.10gb.shared", []string{migs[0][2] + "::1"}, nil},
	}
}

// migSharedNode is the MIG node of migUsers: its kubelet, the processes' cgroups, and the
// pod log directories that name the pods behind the cgroups' pod UIDs.
func migSharedNode(t *testing.T) agentNode {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	node := agentNode{kubeletSocket: filepath.Join(dir, "kubelet.sock"), procRoot: filepath.Join(dir, "proc"), podLogsDir: filepath.Join(dir, "pods")}
	allocatable := map[string][]string{}
	var pods []fakekubelet.Pod
	for _, u := range migUsers(t) {
		pods = append(pods, fakekubelet.Pod{Namespace: u.namespace, Name: u.name, Containers: []fakekubelet.Container{
			{Name: "main", Devices: []fakekubelet.Devices{{ResourceName: u.resource, DeviceIDs: u.devices}}},
		}})
		allocatable[u.resource] = append(allocatable[u.resource], u.devices...)
		for _, pid := range u.pids {
			writeProc(t, node.procRoot, pid, fmt.Sprintf("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope\n",
				strings.ReplaceAll(u.uid, "-", "_"), strings.Repeat(u.uid[:1], 64)))
		}
		mustWrite(t, filepath.Join(node.podLogsDir, u.namespace+"_"+u.name+"_"+u.uid, "main", "0.log"), "")
	}
	var devices []fakekubelet.Devices
	for _, r := range slices.Sorted(maps.Keys(allocatable)) {
		devices = append(devices, fakekubelet.Devices{ResourceName: r, DeviceIDs: allocatable[r]})
	}
	startFakeKubelet(t, node.kubeletSocket, pods, devices)
	return node
}

// TestCostDashboardQueriesReturnData: the GPU cost dashboard (dashboards/cost.go) against
// two real Prometheus servers that load rules/gpu-recording.yaml (costRuleFiles).
//
//   - With prices for the simulated GPU models and a kWh price (gpu-prices.yaml as
//     rules/gen -prices writes it), fed by a MIG node whose instances five pods
//     hold (one instance time-sliced between two), a node with a time-sliced GPU, a node of
//     idle allocated GPUs and a bare-metal Slurm node: every panel and variable query
//     returns data, and the MIG instances and shared GPUs show their users' shares.
//   - With the committed gpu-prices.yaml (no price set), fed by one node: the price panel
//     says "no price set (internal/pricing/prices.yaml)", every cost query returns nothing
//     (no invented figure) where the GPU-hours are there, and each panel that shows only
//     costs says why it is empty.
func TestCostDashboardQueriesReturnData(t *testing.T) {
	var cost dashboards.Dashboard
	for _, d := range dashboards.All() {
		if d.UID == costDashboardUID {
			cost = d
		}
	}
	panels, err := cost.Panels()
	if err != nil {
		t.Fatal(err)
	}
	queries, err := cost.Queries() // the panels' queries, then the variables'
	if err != nil {
		t.Fatal(err)
	}
	kwh := 0.15
	prices := pricing.Prices{Currency: "EUR", EnergyKWh: &kwh, GPUHour: map[string]float64{
		simulatedModel(t, "dgxh100"): 2.5,
		simulatedModel(t, "dgxh200"): 3.2,
		simulatedModel(t, "dgxa100"): 1.4,
	}}

	priced := startCostPrometheus(t, costRuleFiles(t, &prices))
	startAgentOn(t, priced, "cost-mig", "dgxh100", "mig", migSharedNode(t))
	startAgentOn(t, priced, "cost-shared", "dgxh200", "shared-gpu", fakeNode(t, simulatedUUIDs(t, "dgxh200")))
	startAgentOn(t, priced, "cost-idle", "dgxa100", "idle", allocatedNode(t, "dgxa100"))
	startAgentOn(t, priced, "cost-slurm", "dgxh100", "steady-training", slurmNode(t))

	unpriced := startCostPrometheus(t, costRuleFiles(t, nil))
	startAgentOn(t, unpriced, "cost-unpriced", "dgxa100", "idle", allocatedNode(t, "dgxa100"))

	// The day and 30-day costs come last: the funnel, then a whole minute for the
	// GPU-hours, then the hourly cost and its (compressed) periods.
	started := time.Now()
	t.Run("with prices", func(t *testing.T) {
		for _, q := range queries {
			expr := promql.OnAll(q)
			prom.Eventually(t, 150*time.Second, expr, func() error {
				s, err := priced.Query(expr)
				if err != nil {
					return err
				}
				if len(s) == 0 {
					return fmt.Errorf("no data")
				}
				return nil
			})
		}
		t.Logf("every query answered %s after the agents started", time.Since(started).Round(time.Second))

		value := func(panel string) []prom.Sample {
			for _, p := range panels {
				if p.Title == panel {
					s, err := priced.Query(promql.OnAll(p.Queries[0]))
					if err != nil {
						t.Fatal(err)
					}
					return s
				}
			}
			t.Fatalf("no panel %q", panel)
			return nil
		}
		if s := value("GPU models with a price"); len(s) != 1 || s[0].Value != 3 {
			t.Errorf("GPU models with a price: %v, want 3", s)
		}
		currency, err := priced.Query(promql.OnAll(queries[len(queries)-1])) // the last variable's
		if err != nil || len(currency) != 1 || currency[0].Labels["currency"] != "EUR" {
			t.Errorf("currency variable: %v %v, want EUR", currency, err)
		}
		// Shares of a whole H100 (7 compute slices): the 3g instance 3/7, each 1g 1/7, the
		// time-sliced 1g half each (MIG has no per-process utilization to split by).
		want := map[string]float64{"ml/finetune": 3.0 / 7, "ml/eval": 2.0 / 7, "notebooks/jupyter-alice": 2.0 / 7,
			"notebooks/jupyter-bob": 1.0 / 14, "notebooks/jupyter-carol": 1.0 / 14}
		got := map[string]float64{}
		for _, s := range value("Users of MIG instances and shared GPUs ($currency)") {
			got[s.Labels["k8s_namespace_name"]+"/"+s.Labels["k8s_pod_name"]] += s.Value
		}
		for pod, w := range want {
			if math.Abs(got[pod]-w) > 1e-9 {
				t.Errorf("%s: allocated share %v, want %v (all: %v)", pod, got[pod], w, got)
			}
		}
		if got["serving/infer-a"] <= 0 || got["serving/infer-b"] <= 0 {
			t.Errorf("the time-sliced GPU's pods have no share: %v", got)
		}
		if s := value("Users per shared device"); len(s) != 2 {
			t.Errorf("shared devices: %v, want the time-sliced GPU and the time-sliced MIG instance", s)
		}
	})

	t.Run("without a price", func(t *testing.T) {
		prom.Eventually(t, 150*time.Second, "GPU-hours without prices", func() error {
			s, err := unpriced.Query(`cluster:gpu_hours_idle:sum1h`)
			if err != nil || len(s) == 0 {
				return fmt.Errorf("no GPU-hours yet (%v)", err)
			}
			return nil
		})
		time.Sleep(5 * time.Second) // with a price, the cost rules would answer by now
		// Panels that need no price (this Prometheus has an idle node only: no MIG
		// instance, no shared GPU, no Slurm job).
		withoutPrices := []string{"GPUs", "Allocated", "Idle", "Allocation funnel over time", "GPU-hours in the trailing hour",
			"Funnel by node pool", "GPUs without a price", "Idle GPUs now, top workloads"}
		readsCost := func(q string) bool {
			names, err := promql.MetricNames(q)
			if err != nil {
				t.Fatal(err)
			}
			return slices.ContainsFunc(names, func(n string) bool {
				return strings.Contains(n, ":gpu_cost_") || strings.Contains(n, ":gpu_price_per_")
			})
		}
		for _, p := range panels {
			onlyCost := true
			for _, q := range p.Queries {
				expr := promql.OnAll(q)
				s, err := unpriced.Query(expr)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case readsCost(q) && len(s) > 0:
					t.Errorf("panel %q shows a cost with no price set: %s = %v", p.Title, expr, s)
				case !readsCost(q):
					onlyCost = false
					if len(s) == 0 && slices.Contains(withoutPrices, p.Title) {
						t.Errorf("panel %q: no data without prices: %s", p.Title, expr)
					}
				}
			}
			if onlyCost && !strings.Contains(p.NoValue, pricing.File) {
				t.Errorf("panel %q shows only costs, and says nothing when there is none (noValue %q)", p.Title, p.NoValue)
			}
			if p.Title == "GPU models with a price" || p.Title == "kWh price" {
				s, err := unpriced.Query(promql.OnAll(p.Queries[0]))
				if err != nil || len(s) != 1 || s[0].Value != 0 {
					t.Fatalf("%s: %v %v, want 0", p.Title, s, err)
				}
				text := p.Texts["0"]
				if !strings.Contains(text, "no") || !strings.Contains(text, "price set ("+pricing.File+")") {
					t.Errorf("%s shows %q for 0, want it to say no price is set", p.Title, text)
				}
				t.Logf("%s: %q", p.Title, text)
			}
		}
		if got := panelText(t, panels, "GPU models with a price"); got != dashboards.NoPriceSet {
			t.Errorf("GPU models with a price says %q for 0, want %q", got, dashboards.NoPriceSet)
		}
		currency, err := unpriced.Query(promql.OnAll(queries[len(queries)-1]))
		if err != nil || len(currency) != 1 || currency[0].Labels["currency"] != "no currency set" {
			t.Errorf("currency variable without a price file's currency: %v %v", currency, err)
		}
	})
}

// panelText is what the panel titled title shows for the value 0.
func panelText(t *testing.T, panels []dashboards.Panel, title string) string {
	t.Helper()
	for _, p := range panels {
		if p.Title == title {
			return p.Texts["0"]
		}
	}
	t.Fatalf("no panel %q", title)
	return ""
}
