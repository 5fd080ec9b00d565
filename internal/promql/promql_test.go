package promql

import (
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMetricNames(t *testing.T) {
	tests := []struct {
		name string
		expr string
		want []string
	}{
		{"bare", `up`, []string{"up"}},
		{"selector", `hw_power_watts{host_name=~"$node", hw_id="GPU-1"}`, []string{"hw_power_watts"}},
		{"grafana range", `rate(hw_energy_joules_total{cluster=~"$cluster"}[$__rate_interval])`, []string{"hw_energy_joules_total"}},
		{"grafana range and seconds", `sum(avg_over_time(a[$__range])) * $__range_s / 3600 + sum(rate(b[${__interval}]))`, []string{"a", "b"}},
		{"subquery", `max_over_time(rate(a_total[5m])[1h:5m])`, []string{"a_total"}},
		{"aggregation", `sum by (host_name, hw_id) (hw_power_watts) + sum(x) by (host_name)`, []string{"hw_power_watts", "x"}},
		{"vector matching", `a / on (host_name, hw_id) group_left (hw_model) b`, []string{"a", "b"}},
		{"or vector", `count(ALERTS{alertstate="firing"}) or vector(0)`, []string{"ALERTS"}},
		{"strings are not metrics", `label_replace(a, "pod", "$1", "k8s_pod_name", "(.*)")`, []string{"a"}},
		{"offset", `(nvidia_gpu_count offset 1d) - nvidia_gpu_count > 0`, []string{"nvidia_gpu_count"}},
		{"recording rule names", `job:hw_power_watts:sum + b`, []string{"b", "job:hw_power_watts:sum"}},
		{"distinct and sorted", `z + a + z{k="v"} + sum_over_time(a[5m])`, []string{"a", "z"}},
		{"no metric", `vector(1) + time()`, nil},
		{"__name__", `{__name__="up", job="x"}`, []string{"up"}},
		{"__name__ alternation", `count({job="x", __name__=~"b_total|a"})`, []string{"a", "b_total"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := MetricNames(tt.expr)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSelectorsKeepGrafanaVariablesInStrings(t *testing.T) {
	got, err := Selectors(`sum by (hw_id) (rate(a{cluster=~"$cluster", x="}"}[$__rate_interval])) / {__name__=~"b|c", cluster=~"$cluster"}`)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []string{"a", "b", "c"}, []string{got[0].Metric, got[1].Metric, got[2].Metric})
	for _, s := range got {
		assert.True(t, s.Has("cluster", labels.MatchRegexp, "$cluster"), s.Metric)
		assert.False(t, s.Has(labels.MetricName, labels.MatchRegexp, "b|c"), "__name__ is the metric, not a matcher")
	}
	assert.True(t, got[0].Has("x", labels.MatchEqual, "}"))
	assert.False(t, got[1].Has("x", labels.MatchEqual, "}"))
}

func TestErrors(t *testing.T) {
	for _, expr := range []string{
		`{job="up"}`,             // no name
		`{__name__=~"up.*"}`,     // names nobody can list
		`{__name__!="up"}`,       // idem
		`a{x="y"`,                // syntax
		`rate(a[5m)`,             // syntax
		`sum by hw_id (a)`,       // syntax
		`a * $scale`,             // a user variable outside a string
		`label_values(a, hw_id)`, // a Grafana query, not PromQL
	} {
		t.Run(expr, func(t *testing.T) {
			_, err := MetricNames(expr)
			assert.Error(t, err)
		})
	}
}

func TestSubstitute(t *testing.T) {
	assert.Equal(t, `rate(a[1m]) * 300 / 15000 + b{x=~"$node"}[5m] + c[15s]`,
		Substitute(`rate(a[$__rate_interval]) * $__range_s / ${__interval_ms} + b{x=~"$node"}[$__range] + c[$__interval]`))
}

func TestOnAll(t *testing.T) {
	assert.Equal(t, `label_replace(a{x=~".*", y=~".*"}[1m], "pod", "$1", "k8s_pod_name", "(.*)")`,
		OnAll(`label_replace(a{x=~"$node", y=~"${pod:regex}"}[$__rate_interval], "pod", "$1", "k8s_pod_name", "(.*)")`))
}
