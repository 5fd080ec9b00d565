package contract

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
	"github.com/otelcol-gpu/otelcol-gpu/rules"
)

const root = "../.."

// external are series that come from elsewhere: Prometheus's own alert series and
// cAdvisor's container CPU (next to GPU utilization, to spot data-loader starvation).
var external = map[string]bool{"ALERTS": true, "ALERTS_FOR_STATE": true, "container_cpu_usage_seconds_total": true}

// TestDashboardsUseOnlyContractMetrics: a metric renamed in metadata.yaml, or a recording
// rule renamed in rules/, breaks this test instead of a dashboard panel. The dashboards read
// the metric contract, and the GPU cost dashboard the rules' series.
func TestDashboardsUseOnlyContractMetrics(t *testing.T) {
	contract, err := PrometheusNames(root)
	require.NoError(t, err)
	recorded := map[string]bool{}
	for _, n := range rules.PriceSeries {
		recorded[n] = true
	}
	for _, r := range rules.All() {
		if r.Record != "" {
			recorded[r.Record] = true
		}
	}
	used, err := dashboards.MetricNames()
	require.NoError(t, err)
	require.NotEmpty(t, used)
	for _, name := range used {
		if _, ok := contract[name]; !ok && !external[name] && !recorded[name] {
			t.Errorf("dashboards use %s, which is neither in the metric contract nor recorded by a rule", name)
		}
	}
}

// TestRulesUseOnlyContractMetrics: every series an alerting or recording rule reads is in
// the metric contract, recorded by another rule, or external.
func TestRulesUseOnlyContractMetrics(t *testing.T) {
	contract, err := PrometheusNames(root)
	require.NoError(t, err)
	recorded := map[string]bool{}
	// Price series: gpu-prices.yaml records them only for the prices set in
	// internal/pricing/prices.yaml, none by default.
	for _, n := range rules.PriceSeries {
		recorded[n] = true
	}
	var exprs []string
	var alerts int
	for _, r := range rules.All() {
		if r.Record != "" {
			recorded[r.Record] = true
		}
		if r.Alert != "" {
			alerts++
		}
		exprs = append(exprs, r.Expr)
	}
	assert.Positive(t, alerts)
	var unknown []string
	for _, expr := range exprs {
		names, err := promql.MetricNames(expr)
		require.NoError(t, err, expr)
		for _, n := range names {
			if _, ok := contract[n]; !ok && !recorded[n] && !external[n] {
				unknown = append(unknown, n)
			}
		}
	}
	sort.Strings(unknown)
	assert.Empty(t, unknown, "rules use series that are neither in the metric contract nor recorded")
}
