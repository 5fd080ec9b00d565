package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run runs the command against a fake Prometheus; env is its environment.
func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runMain(context.Background(), args, func(k string) string { return env[k] }, testNow, &out, &errOut)
	return code, out.String(), errOut.String()
}

const period2h = "--start=2026-12-07T08:00:00Z"

// The fleet of fleet(), 2 hours (08:00 to 10:00), an H100 at 3 EUR an hour, a kWh at
// 0.25, the A100 without a price. GPU-hours are the gauge x 2 h:
//   - ml/Deployment trainer, 1 H100 at 80 %: 2 / 2 / 1.6 / 0.4 GPU-hours, 0.72 kWh; cost
//     6 / 4.8 / 1.2, energy 0.72 x 0.25 = 0.18;
//   - ml/StatefulSet llm, 2 H100s at 25 %: 4 / 4 / 1 / 3, 0.72 kWh; 12 / 3 / 9, 0.18;
//   - notebooks, a bare pod on a 3g.40gb instance (3/7 of a GPU) at 50 %: 6/7 / 6/7 /
//     3/7 / 3/7, no energy under MIG; cost 18/7 / 9/7 / 9/7, energy empty;
//   - research/CronJob nightly, two runs on an A100 each at 10 %: 4 / 4 / 0.4 / 3.6,
//     0.4 kWh; GPU cost empty (no price for the A100), energy 0.1;
//   - Slurm job 4242, 1 H100 at 60 %: 2 / 2 / 1.2 / 0.8, 1.08 kWh; 6 / 3.6 / 2.4, 0.27;
//   - namespaces: ml 6 / 6 / 2.6 / 3.4, 1.44 kWh; 18 / 7.8 / 10.2, 0.36.
const wantCSV = `period_start,period_end,level,cluster,namespace,workload_kind,workload,slurm_job_id,slurm_job_sluid,gpu_model,gpu_hours_allocated,gpu_hours_active,gpu_hours_effective,gpu_hours_idle,energy_kwh,cost_allocated,cost_effective,cost_idle,cost_energy,currency
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,namespace,eu-1,ml,,,,,NVIDIA H100 80GB HBM3,6,6,2.6,3.4,1.44,18,7.8,10.2,0.36,EUR
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,namespace,eu-1,notebooks,,,,,NVIDIA H100 80GB HBM3,0.8571,0.8571,0.4286,0.4286,,2.5714,1.2857,1.2857,,EUR
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,namespace,eu-1,research,,,,,NVIDIA A100-SXM4-80GB,4,4,0.4,3.6,0.4,,,,0.1,EUR
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,workload,eu-1,ml,Deployment,trainer,,,NVIDIA H100 80GB HBM3,2,2,1.6,0.4,0.72,6,4.8,1.2,0.18,EUR
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,workload,eu-1,ml,StatefulSet,llm,,,NVIDIA H100 80GB HBM3,4,4,1,3,0.72,12,3,9,0.18,EUR
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,workload,eu-1,notebooks,,,,,NVIDIA H100 80GB HBM3,0.8571,0.8571,0.4286,0.4286,,2.5714,1.2857,1.2857,,EUR
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,workload,eu-1,research,CronJob,nightly,,,NVIDIA A100-SXM4-80GB,4,4,0.4,3.6,0.4,,,,0.1,EUR
2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,job,eu-1,,,,4242,,NVIDIA H100 80GB HBM3,2,2,1.2,0.8,1.08,6,3.6,2.4,0.27,EUR
`

func TestReportFromPrometheus(t *testing.T) {
	f := fleet()
	srv := f.start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, wantCSV, out)
	// The A100 has no price: said once, by name.
	assert.Equal(t, "gpu-cost-report: warning: no price for GPU model(s) \"NVIDIA A100-SXM4-80GB\" in internal/pricing/prices.yaml: their GPU cost columns are empty\n", errOut)

	// One chunk: the integrals are evaluated at the end of the period, over the period
	// less a second (the minutes 08:01 … 10:00, as the rules' hourly integrals count).
	assert.Contains(t, f.queries, "sum by (cluster, k8s_namespace_name, k8s_deployment_name, k8s_statefulset_name, k8s_daemonset_name, k8s_job_name, k8s_cronjob_name, hw_model) (sum_over_time(namespace_workload_model:gpus_allocated:sum[1h59m59s:1m])) / 60")
	assert.Contains(t, f.queries, "sum by (cluster, slurm_job_id, slurm_job_sluid, hw_model) (sum_over_time((slurm_job_model:gpus_idle:sum * on (hw_model) group_left () hw_model:gpu_price_per_hour:config)[1h59m59s:1m])) / 60")
	assert.Contains(t, f.queries, "sum by (cluster, k8s_namespace_name, k8s_deployment_name, k8s_statefulset_name, k8s_daemonset_name, k8s_job_name, k8s_cronjob_name, hw_model) (increase(nvidia_gpu_pod_energy_joules_total[2h])) / 3.6e6")
}

func TestLevelsAndJSON(t *testing.T) {
	srv := fleet().start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--by", "job", "--format", "json")
	require.Equal(t, 0, code, errOut)
	assert.JSONEq(t, `{
	  "period_start": "2026-12-07T08:00:00Z", "period_end": "2026-12-07T10:00:00Z", "currency": "EUR", "warnings": [],
	  "rows": [{"level": "job", "cluster": "eu-1", "namespace": "", "workload_kind": "", "workload": "",
	    "slurm_job_id": "4242", "slurm_job_sluid": "", "gpu_model": "NVIDIA H100 80GB HBM3",
	    "gpu_hours_allocated": 2, "gpu_hours_active": 2, "gpu_hours_effective": 1.2, "gpu_hours_idle": 0.8,
	    "energy_kwh": 1.08, "cost_allocated": 6, "cost_effective": 3.6, "cost_idle": 2.4, "cost_energy": 0.27}]
	}`, out)

	code, out, errOut = run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--by", "workload", "--format", "json")
	require.Equal(t, 0, code, errOut)
	var r jsonReport
	require.NoError(t, json.Unmarshal([]byte(out), &r))
	require.Len(t, r.Rows, 4)
	notebooks := r.Rows[2]
	assert.Equal(t, "notebooks", notebooks.Namespace)
	assert.Nil(t, notebooks.EnergyKWh, "no energy under MIG: null, not 0")
	assert.Nil(t, notebooks.CostEnergy)
	assert.Nil(t, r.Rows[3].CostAllocated, "the A100 has no price: null")
	assert.Equal(t, 0.1, *r.Rows[3].CostEnergy)
	assert.Len(t, r.Warnings, 1)
}

// No price set anywhere: the hours and kWh are there, every cost cell empty, and the
// warning points at the price file. Not an error: the hours are worth reporting.
func TestNoPriceSet(t *testing.T) {
	f := fleet()
	f.prices, f.kwh, f.currency = nil, 0, ""
	srv := f.start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--by", "namespace")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "no price set: internal/pricing/prices.yaml")
	assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4)
	assert.Equal(t, "2026-12-07T08:00:00Z,2026-12-07T10:00:00Z,namespace,eu-1,ml,,,,,NVIDIA H100 80GB HBM3,6,6,2.6,3.4,1.44,,,,,", lines[1])
}

// The kWh price unset while GPU prices are: energy cost empty, said.
func TestNoKWhPrice(t *testing.T) {
	f := fleet()
	f.kwh = 0
	srv := f.start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--by", "job")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ",2,2,1.2,0.8,1.08,6,3.6,2.4,,EUR\n")
	assert.Contains(t, errOut, "no kWh price set")
}

// A job that never ran a process: no active series at all, so 0 active GPU-hours (not
// an empty cell); effective stays empty where nothing measured it.
func TestInactiveIsZero(t *testing.T) {
	f := fleet()
	f.jobs[0].tiers = [4]float64{1, -1, -1, -1}
	srv := f.start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--by", "job")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, ",4242,,NVIDIA H100 80GB HBM3,2,0,,,1.08,6,,,0.27,EUR\n")
}

// Data only from 09:00: the report is written, for what there is, and says so.
func TestPeriodBeforeTheFirstSample(t *testing.T) {
	f := fleet()
	f.dataFrom = 60
	srv := f.start(t)
	code, _, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "warning: no data before 2026-12-07T09:01:00Z, 1h1m0s after the period starts")
	assert.Contains(t, errOut, "retention")
}

func TestFailures(t *testing.T) {
	// Prometheus holds nothing for the period.
	f := fleet()
	f.dataFrom = f.minutes
	srv := f.start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "Prometheus holds no otelcol-gpu data for 2026-12-07T08:00:00Z to 2026-12-07T10:00:00Z")

	// Prometheus refuses a query.
	f = fleet()
	f.status = 422
	srv = f.start(t)
	code, out, errOut = run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "too many samples")

	// A partial answer (Thanos with a store down): an error, or warnings with --allow-partial.
	f = fleet()
	f.warnings = []string{"partial response: store eu-1-a unreachable"}
	srv = f.start(t)
	code, out, errOut = run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "the answer may be partial (--allow-partial writes the report anyway): partial response: store eu-1-a unreachable")
	code, out, errOut = run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--allow-partial")
	assert.Equal(t, 0, code, errOut)
	assert.NotEmpty(t, out)
	assert.Contains(t, errOut, "warning: Prometheus: partial response: store eu-1-a unreachable")

	// Prometheus down.
	srv.Close()
	code, out, errOut = run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "connection refused")
}

// --out replaces the file only once the report is complete.
func TestOutFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "report.csv")
	require.NoError(t, os.WriteFile(path, []byte("last month's\n"), 0o644))

	f := fleet()
	f.status = 503
	srv := f.start(t)
	code, _, _ := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--out", path)
	assert.Equal(t, 1, code)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "last month's\n", string(data))

	srv = fleet().start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--out", path)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, out)
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, wantCSV, string(data))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}

// A long period is queried a span at a time and summed: the same figures.
func TestQuerySpans(t *testing.T) {
	f := fleet()
	f.minutes = 30 // each 30-minute span answers for 30 minutes
	srv := f.start(t)
	code, out, errOut := run(t, nil, "--prometheus", srv.URL, period2h, "--end=2026-12-07T10:00:00Z", "--query-span=30m", "--by=job")
	require.Equal(t, 0, code, errOut)
	// 4 spans of 30 minutes: the 2-hour figures (energy: 4 x 1.08).
	assert.Contains(t, out, ",2,2,1.2,0.8,4.32,6,3.6,2.4,1.08,EUR\n")
	n := 0
	for _, q := range f.queries {
		if strings.Contains(q, "slurm_job_model:gpus_allocated:sum[29m59s:1m]") {
			n++
		}
	}
	assert.Equal(t, 4, n)
}
