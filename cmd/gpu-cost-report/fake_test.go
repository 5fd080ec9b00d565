package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakePrometheus answers the report's queries the way Prometheus would for a fleet whose
// funnel gauges, energy rates and prices are constant over the period: every figure is
// the gauge times the period's hours (or minutes), so the expected rows are worked out by
// hand in the tests. It serves /api/v1/query and /api/v1/query_range as Prometheus does
// (client_golang posts the form).
type fakePrometheus struct {
	pods, jobs []fakeOwner
	prices     map[string]float64 // per GPU model, per hour
	kwh        float64            // 0: no kWh price
	currency   string
	// minutes of the period; dataFrom, the first minute with data (0: start+1m).
	minutes, dataFrom int
	// Failure modes.
	status   int      // answer every query with this HTTP status and a Prometheus error
	warnings []string // add these warnings to every answer

	mu      sync.Mutex
	queries []string
	headers []http.Header
}

// fakeOwner is one series of namespace_workload_model:gpus_*:sum (or slurm_job_model:…):
// its labels, the gauge of each tier (allocated, active, effective, idle; negative:
// absent) and its energy in kWh over the whole period (negative: absent).
type fakeOwner struct {
	labels map[string]string
	tiers  [4]float64
	kwh    float64
}

func (f *fakePrometheus) start(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return srv
}

var (
	tierRE   = regexp.MustCompile(`^sum by \([^)]*\) \(sum_over_time\(\(?(namespace_workload_model|slurm_job_model):gpus_(\w+):sum( \* on \(hw_model\) group_left \(\) hw_model:gpu_price_per_hour:config\))?\[`)
	energyRE = regexp.MustCompile(`^sum by \([^)]*\) \(increase\((nvidia_gpu_pod_energy_joules_total|nvidia_gpu_job_energy_joules_total)\[`)
)

func (f *fakePrometheus) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	q := r.Form.Get("query")
	f.mu.Lock()
	f.queries = append(f.queries, q)
	f.headers = append(f.headers, r.Header.Clone())
	f.mu.Unlock()
	if f.status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		fmt.Fprintf(w, `{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory"}`)
		return
	}
	var result []any
	resultType := "vector"
	hours := float64(f.minutes) / 60
	sample := func(labels map[string]string, v float64) {
		result = append(result, map[string]any{"metric": labels, "value": []any{1, strconv.FormatFloat(v, 'g', -1, 64)}})
	}
	switch {
	case r.URL.Path == "/api/v1/query_range" && q == "count(cluster:gpus_total:count)":
		resultType = "matrix"
		start, _ := strconv.ParseFloat(r.Form.Get("start"), 64)
		var values []any
		for m := f.dataFrom; m < f.minutes; m++ {
			values = append(values, []any{start + float64(m*60), "6"})
		}
		if len(values) > 0 {
			result = append(result, map[string]any{"metric": map[string]string{}, "values": values})
		}
	case strings.HasPrefix(q, "count_over_time(hw_model:gpu_price_per_hour:config["):
		for m := range f.prices {
			sample(map[string]string{"hw_model": m}, float64(f.minutes))
		}
	case strings.HasPrefix(q, "count_over_time(cluster:gpu_price_per_kwh:config["):
		if f.kwh > 0 {
			sample(map[string]string{}, float64(f.minutes))
		}
	case strings.HasPrefix(q, "sum_over_time(cluster:gpu_price_per_kwh:config["):
		if f.kwh > 0 {
			sample(map[string]string{}, f.kwh*float64(f.minutes))
		}
	case strings.HasPrefix(q, "max_over_time(cluster:gpu_price_configured:config["):
		energy := 0.0
		if f.kwh > 0 {
			energy = 1
		}
		sample(map[string]string{"price": "gpu_hour", "currency": f.currency}, float64(len(f.prices)))
		sample(map[string]string{"price": "energy_kwh", "currency": f.currency}, energy)
	case tierRE.MatchString(q):
		m := tierRE.FindStringSubmatch(q)
		owners := f.pods
		if m[1] == "slurm_job_model" {
			owners = f.jobs
		}
		tier := map[string]int{"allocated": 0, "active": 1, "effective": 2, "idle": 3}[m[2]]
		for _, o := range owners {
			v := o.tiers[tier]
			if v < 0 {
				continue
			}
			if m[3] == "" {
				sample(o.labels, v*hours)
			} else if p, ok := f.prices[o.labels["hw_model"]]; ok {
				sample(o.labels, v*hours*p)
			}
		}
	case energyRE.MatchString(q):
		owners := f.pods
		if energyRE.FindStringSubmatch(q)[1] == "nvidia_gpu_job_energy_joules_total" {
			owners = f.jobs
		}
		for _, o := range owners {
			if o.kwh >= 0 {
				labels := map[string]string{}
				for k, v := range o.labels {
					labels[k] = v
				}
				sample(labels, o.kwh)
			}
		}
	default:
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":"the fake does not know %q"}`, q)
		return
	}
	if result == nil {
		result = []any{}
	}
	body := map[string]any{"status": "success", "data": map[string]any{"resultType": resultType, "result": result}}
	if len(f.warnings) > 0 {
		body["warnings"] = f.warnings
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// fleet is the tests' scenario, over 2 hours (worked out in TestReportFromPrometheus):
// GPUs as shares of a whole GPU, constant all along.
func fleet() *fakePrometheus {
	h100, a100 := "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
	pod := func(ns, model string, workload ...string) map[string]string {
		l := map[string]string{"cluster": "eu-1", "k8s_namespace_name": ns, "hw_model": model}
		for i := 0; i+1 < len(workload); i += 2 {
			l[workload[i]] = workload[i+1]
		}
		return l
	}
	return &fakePrometheus{
		minutes: 120,
		pods: []fakeOwner{
			{pod("ml", h100, "k8s_deployment_name", "trainer"), [4]float64{1, 1, 0.8, 0.2}, 0.72},
			{pod("ml", h100, "k8s_statefulset_name", "llm"), [4]float64{2, 2, 0.5, 1.5}, 0.72},
			// A bare pod on a 3g.40gb MIG instance: no per-pod energy under MIG.
			{pod("notebooks", h100), [4]float64{3.0 / 7, 3.0 / 7, 3.0 / 14, 3.0 / 14}, -1},
			// Two runs of a cron job, on a model without a price.
			{pod("research", a100, "k8s_job_name", "nightly-1", "k8s_cronjob_name", "nightly"), [4]float64{1, 1, 0.1, 0.9}, 0.2},
			{pod("research", a100, "k8s_job_name", "nightly-2", "k8s_cronjob_name", "nightly"), [4]float64{1, 1, 0.1, 0.9}, 0.2},
		},
		jobs: []fakeOwner{
			{map[string]string{"cluster": "eu-1", "slurm_job_id": "4242", "hw_model": h100}, [4]float64{1, 1, 0.6, 0.4}, 1.08},
		},
		prices:   map[string]float64{h100: 3},
		kwh:      0.25,
		currency: "EUR",
	}
}

// testNow is "now" in the tests: the default period is November 2026.
var testNow = time.Date(2026, 12, 7, 12, 0, 30, 0, time.UTC)
