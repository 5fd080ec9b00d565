//go:build e2e

package testbed

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pricing"
	"github.com/otelcol-gpu/otelcol-gpu/rules"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// The prices of TestCostReportTotals, rendered into gpu-prices.yaml as rules/gen -prices
// does: an H100 costs 3 EUR an hour, a kWh 0.25 EUR, the A100 has no price.
const costReportPrices = `currency: EUR
gpu_hour:
  "NVIDIA H100 80GB HBM3": 3
energy_kwh: 0.25
`

// costFleet is what the agents write, constant from 10 minutes before the period to 5
// minutes after it, in cluster eu-1 (the series as rules/tests/funnel_cost_test.yaml
// writes them):
//   - node-a, three H100s: GPU 0 ml/trainer-7d9f-x (Deployment trainer), 80 % busy,
//     360 W; GPUs 1 and 2 ml/llm-0 (StatefulSet llm), 25 % busy, 180 W each;
//   - node-b, an H100 in MIG mode: notebooks/jupyter-alice, a bare pod, holds the 3g.40gb
//     instance (3/7 of the GPU; 20 GiB), 50 % busy by GPM; no per-pod energy under MIG;
//   - node-c, two A100s: research/nightly-1-x and nightly-2-x (Jobs nightly-1, nightly-2
//     of CronJob nightly), 10 % busy, 100 W each;
//   - node-d, Slurm: job 4242 on an H100, 60 % busy, 540 W.
//
// Over the 2 hours, in GPU-hours allocated / active / effective / idle, kWh, and cost
// allocated / effective / idle / energy (EUR):
//   - ml/Deployment trainer: 2 / 2 / 1.6 / 0.4, 0.72 kWh; 6 / 4.8 / 1.2 / 0.18;
//   - ml/StatefulSet llm: 4 / 4 / 1 / 3 (2 GPUs x 2 h x 25 %), 0.72 kWh; 12 / 3 / 9 / 0.18;
//   - notebooks (bare pod): 6/7 / 6/7 / 3/7 / 3/7 (3/7 x 2 h, half of it used), no kWh;
//     18/7 / 9/7 / 9/7, no energy cost;
//   - research/CronJob nightly (both runs): 4 / 4 / 0.4 / 3.6, 0.4 kWh; no GPU cost (the
//     A100 has no price), energy 0.1;
//   - job 4242: 2 / 2 / 1.2 / 0.8, 1.08 kWh; 6 / 3.6 / 2.4 / 0.27;
//   - namespace ml: 6 / 6 / 2.6 / 3.4, 1.44 kWh; 18 / 7.8 / 10.2 / 0.36.
func costFleet(ts, from time.Time) []prom.Series {
	const h100, a100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
	joules := func(watts float64) float64 { return watts * ts.Sub(from).Seconds() }
	var out []prom.Series
	add := func(name string, v float64, labels map[string]string) {
		l := map[string]string{"__name__": name, "cluster": "eu-1"}
		for k, x := range labels {
			l[k] = x
		}
		out = append(out, prom.Series{Labels: l, Points: []prom.Point{{T: ts, V: v}}})
	}
	gpu := func(host, id, index, model string, extra ...string) map[string]string {
		l := map[string]string{"host_name": host, "hw_id": id, "nvidia_gpu_index": index, "hw_model": model}
		for i := 0; i+1 < len(extra); i += 2 {
			l[extra[i]] = extra[i+1]
		}
		return l
	}
	// A pod on a GPU: utilization, framebuffer and energy (watts < 0: none, as under MIG).
	pod := func(g map[string]string, util, watts float64, owner ...string) {
		l := map[string]string{}
		for k, v := range g {
			l[k] = v
		}
		for i := 0; i+1 < len(owner); i += 2 {
			l[owner[i]] = owner[i+1]
		}
		if util >= 0 {
			add("nvidia_gpu_pod_utilization_ratio", util, l)
		}
		add("nvidia_gpu_pod_memory_usage_bytes", 20<<30, l)
		if watts >= 0 {
			add("nvidia_gpu_pod_energy_joules_total", joules(watts), l)
		}
	}
	for host, n := range map[string]float64{"node-a": 3, "node-b": 1, "node-c": 2, "node-d": 1} {
		add("nvidia_gpu_count", n, map[string]string{"host_name": host})
	}
	trainer := []string{"k8s_namespace_name", "ml", "k8s_pod_name", "trainer-7d9f-x", "k8s_container_name", "trainer", "k8s_deployment_name", "trainer", "k8s_node_pool", "train"}
	llm := []string{"k8s_namespace_name", "ml", "k8s_pod_name", "llm-0", "k8s_container_name", "llm", "k8s_statefulset_name", "llm", "k8s_node_pool", "train"}
	pod(gpu("node-a", "GPU-a0a0a0a0-0000-4000-8000-000000000000", "0", h100), 0.8, 360, trainer...)
	pod(gpu("node-a", "GPU-a1a1a1a1-0000-4000-8000-000000000001", "1", h100), 0.25, 180, llm...)
	pod(gpu("node-a", "GPU-a2a2a2a2-0000-4000-8000-000000000002", "2", h100), 0.25, 180, llm...)

	mig := gpu("node-b", "MIG-b3b3b3b3-0000-5000-8000-000000000003", "0", h100,
		"hw_parent", "GPU-b0b0b0b0-0000-4000-8000-000000000000", "nvidia_mig_uuid", "MIG-b3b3b3b3-0000-5000-8000-000000000003", "nvidia_mig_profile", "3g.40gb")
	pod(mig, -1, -1, "k8s_namespace_name", "notebooks", "k8s_pod_name", "jupyter-alice", "k8s_container_name", "notebook", "k8s_node_pool", "mig")
	migUtil := map[string]string{"hw_gpu_task": "general"}
	for k, v := range mig {
		migUtil[k] = v
	}
	add("hw_gpu_utilization_ratio", 0.5, migUtil)

	for i, id := range []string{"GPU-c0c0c0c0-0000-4000-8000-000000000000", "GPU-c1c1c1c1-0000-4000-8000-000000000001"} {
		run := "nightly-" + string(rune('1'+i))
		pod(gpu("node-c", id, string(rune('0'+i)), a100), 0.1, 100,
			"k8s_namespace_name", "research", "k8s_pod_name", run+"-x", "k8s_container_name", "sweep", "k8s_job_name", run, "k8s_cronjob_name", "nightly")
	}

	job := gpu("node-d", "GPU-d0d0d0d0-0000-4000-8000-000000000000", "0", h100, "slurm_job_id", "4242")
	add("nvidia_gpu_job_utilization_ratio", 0.6, job)
	add("nvidia_gpu_job_memory_usage_bytes", 30<<30, job)
	add("nvidia_gpu_job_energy_joules_total", joules(540), job)
	return out
}

// TestCostReportTotals writes costFleet into Prometheus 3 for two hours in the past,
// evaluates the shipped recording rules and a price file over them minute by minute (as
// Prometheus's rule manager would have, had it run then), then runs the built
// gpu-cost-report for those two hours and expects the totals worked out above, and the
// rules' own hourly costs to add up to the report's.
func TestCostReportTotals(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gpu-cost-report")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gpu-cost-report")
	build.Dir = proc.RepoRoot()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	p, err := pricing.Parse([]byte(costReportPrices))
	require.NoError(t, err)
	priceFiles, err := rules.RenderPrices(p, "TestCostReportTotals")
	require.NoError(t, err)
	dir := t.TempDir()
	prices := filepath.Join(dir, "gpu-prices.yaml")
	require.NoError(t, os.WriteFile(prices, priceFiles["gpu-prices.yaml"], 0o600))

	// Nothing is evaluated by Prometheus itself (it would write at the wall clock, and
	// Prometheus then refuses samples more than an hour older than its newest).
	srv := prom.Start3(t, "")
	ev, err := srv.Rules([]string{prices, filepath.Join(proc.RepoRoot(), "rules", "gpu-recording.yaml")}, time.Minute,
		"gpu-price.rules", "gpu-slurm.rules", "gpu-funnel.rules", "gpu-funnel-hours.rules", "gpu-cost.rules")
	require.NoError(t, err)

	start := time.Now().UTC().Truncate(time.Hour).Add(-4 * time.Hour)
	end := start.Add(2 * time.Hour)
	from := start.Add(-10 * time.Minute)
	began := time.Now()
	for ts := from; !ts.After(end.Add(5 * time.Minute)); ts = ts.Add(time.Minute) {
		require.NoError(t, srv.RemoteWrite(costFleet(ts, from)))
		require.NoError(t, ev.EvalAt(ts), "at %s", ts)
	}
	t.Logf("2 h 15 min of data and rules written and evaluated in %s", time.Since(began).Round(time.Second))

	report := func(args ...string) (stdout, stderr string) {
		cmd := exec.Command(bin, append([]string{"--prometheus", "http://" + srv.Addr,
			"--start", start.Format(time.RFC3339), "--end", end.Format(time.RFC3339)}, args...)...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		require.NoError(t, cmd.Run(), "stderr: %s", e.String())
		return o.String(), e.String()
	}
	csv, stderr := report()
	period := start.Format(time.RFC3339) + "," + end.Format(time.RFC3339)
	want := strings.ReplaceAll(`period_start,period_end,level,cluster,namespace,workload_kind,workload,slurm_job_id,slurm_job_sluid,gpu_model,gpu_hours_allocated,gpu_hours_active,gpu_hours_effective,gpu_hours_idle,energy_kwh,cost_allocated,cost_effective,cost_idle,cost_energy,currency
PERIOD,namespace,eu-1,ml,,,,,NVIDIA H100 80GB HBM3,6,6,2.6,3.4,1.44,18,7.8,10.2,0.36,EUR
PERIOD,namespace,eu-1,notebooks,,,,,NVIDIA H100 80GB HBM3,0.8571,0.8571,0.4286,0.4286,,2.5714,1.2857,1.2857,,EUR
PERIOD,namespace,eu-1,research,,,,,NVIDIA A100-SXM4-80GB,4,4,0.4,3.6,0.4,,,,0.1,EUR
PERIOD,workload,eu-1,ml,Deployment,trainer,,,NVIDIA H100 80GB HBM3,2,2,1.6,0.4,0.72,6,4.8,1.2,0.18,EUR
PERIOD,workload,eu-1,ml,StatefulSet,llm,,,NVIDIA H100 80GB HBM3,4,4,1,3,0.72,12,3,9,0.18,EUR
PERIOD,workload,eu-1,notebooks,,,,,NVIDIA H100 80GB HBM3,0.8571,0.8571,0.4286,0.4286,,2.5714,1.2857,1.2857,,EUR
PERIOD,workload,eu-1,research,CronJob,nightly,,,NVIDIA A100-SXM4-80GB,4,4,0.4,3.6,0.4,,,,0.1,EUR
PERIOD,job,eu-1,,,,4242,,NVIDIA H100 80GB HBM3,2,2,1.2,0.8,1.08,6,3.6,2.4,0.27,EUR
`, "PERIOD", period)
	assert.Equal(t, want, csv)
	assert.Equal(t, "gpu-cost-report: warning: no price for GPU model(s) \"NVIDIA A100-SXM4-80GB\" in internal/pricing/prices.yaml: their GPU cost columns are empty\n", stderr)

	// JSON, one level: the same figures, absent ones null.
	js, _ := report("--by", "namespace", "--format", "json")
	var r struct {
		Currency string           `json:"currency"`
		Rows     []map[string]any `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &r))
	assert.Equal(t, "EUR", r.Currency)
	require.Len(t, r.Rows, 3)
	assert.Equal(t, 18.0, r.Rows[0]["cost_allocated"])
	assert.Nil(t, r.Rows[1]["energy_kwh"])
	assert.Nil(t, r.Rows[2]["cost_idle"])

	// The rules' own trailing-hour figures at the two hours' ends add up to the report's:
	// both integrate the same minutes (start+1m … end).
	for q, want := range map[string]float64{
		`namespace:gpu_cost_allocated:sum1h{k8s_namespace_name="ml"}`:          18,
		`namespace:gpu_cost_idle:sum1h{k8s_namespace_name="notebooks"}`:        18.0 / 14,
		`namespace:gpu_hours_effective:sum1h{k8s_namespace_name="research"}`:   0.4,
		`namespace:gpu_cost_energy:sum1h{k8s_namespace_name="ml"}`:             0.36,
		`slurm_job:gpu_cost_effective:sum1h{slurm_job_id="4242"}`:              3.6,
		`namespace_workload:gpu_energy_kwh:sum{k8s_deployment_name="trainer"}`: 0.72,
	} {
		sum := 0.0
		for _, at := range []time.Time{start.Add(time.Hour), end} {
			got, err := srv.QueryAt(q, at)
			require.NoError(t, err)
			require.Len(t, got, 1, "%s at %s", q, at)
			sum += got[0].Value
		}
		assert.InDelta(t, want, sum, 1e-9, q)
		assert.False(t, math.IsNaN(sum), q)
	}
}
