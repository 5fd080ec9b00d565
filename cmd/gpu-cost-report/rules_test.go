package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/rules"
)

// The report reads what the rules record, with the rules' labels, and integrates and
// prices the way they do: a renamed series or a regrouped rule fails here, not on
// finance's desk.
func TestQueriesFollowTheRules(t *testing.T) {
	exprs := map[string]string{}
	for _, r := range rules.All() {
		if r.Record != "" {
			exprs[r.Record] = r.Expr
		}
	}
	hour := chunk{time.Unix(0, 0), time.Unix(3600, 0)}
	for _, s := range []source{pods, jobs} {
		for _, tier := range tiers {
			gauge := strings.Replace(s.gauge, "%s", tier, 1)
			expr, ok := exprs[gauge]
			require.True(t, ok, "%s is not recorded", gauge)
			// The gauge's grouping, less the node pool (prices do not depend on it).
			by := strings.TrimPrefix(expr[:strings.Index(expr, ")")], "sum by (")
			labels := slices.DeleteFunc(strings.Split(by, ", "), func(l string) bool { return l == "k8s_node_pool" })
			assert.Equal(t, s.labels, labels, gauge)

			// The rules' hourly GPU-hours are this integral over an hour.
			level := strings.Split(gauge, ":")[0]
			hourly := exprs[level+":gpu_hours_"+tier+":sum1h"]
			require.NotEmpty(t, hourly)
			require.True(t, strings.HasSuffix(hourly, ") / 60"), hourly)
			q := tierQuery(s, tier, hour)
			assert.Contains(t, q, strings.TrimSuffix(hourly, " / 60"))
			assert.True(t, strings.HasSuffix(q, ") / 60"), q)
		}
		// The cost rules price GPU-hours the same way (here each minute, there each hour).
		level := strings.Split(s.gauge, ":")[0]
		assert.Contains(t, exprs[strings.Split(level, "_model")[0]+":gpu_cost_allocated:sum1h"], "* on (hw_model) group_left () "+pricePerHour)
	}
	// Energy: the rules' per-hour kWh is this over an hour.
	assert.Contains(t, exprs["namespace_workload:gpu_energy_kwh:sum"], "(increase(nvidia_gpu_pod_energy_joules_total[1h])) / 3.6e6")
	assert.Contains(t, exprs["slurm_job:gpu_energy_kwh:sum"], "(increase(nvidia_gpu_job_energy_joules_total[1h])) / 3.6e6")
	assert.Contains(t, energyQuery(pods, hour), "(increase(nvidia_gpu_pod_energy_joules_total[1h])) / 3.6e6")
	assert.Contains(t, exprs["namespace_workload:gpu_cost_energy:sum1h"], pricePerKWh)
	assert.Contains(t, exprs, priceConfigured)
	assert.Contains(t, exprs, gpusTotal)
	assert.Equal(t, []string{pricePerHour, pricePerKWh}, rules.PriceSeries)
}
