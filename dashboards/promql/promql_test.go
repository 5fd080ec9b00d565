package promql

import (
	"testing"

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
		{"followed by paren", `sum(up)`, []string{"up"}},
		{"followed by operator", `up > 0`, []string{"up"}},
		{"selector", `hw_power_watts{host_name=~"$node", hw_id="GPU-1"}`, []string{"hw_power_watts"}},
		{"range", `rate(hw_energy_joules_total[5m])`, []string{"hw_energy_joules_total"}},
		{"grafana range", `rate(hw_energy_joules_total{cluster=~"$cluster"}[$__rate_interval])`, []string{"hw_energy_joules_total"}},
		{"subquery", `max_over_time(rate(a_total[5m])[1h:5m])`, []string{"a_total"}},
		{"by before", `sum by (host_name, hw_id) (hw_power_watts)`, []string{"hw_power_watts"}},
		{"by after", `sum(hw_power_watts) by (host_name)`, []string{"hw_power_watts"}},
		{"without", `max without (hw_gpu_task) (hw_gpu_utilization_ratio)`, []string{"hw_gpu_utilization_ratio"}},
		{"upper-case keywords", `sum BY (hw_id) (a) AND ON (hw_id) b`, []string{"a", "b"}},
		{"group aggregation", `group by (k8s_pod_name) (nvidia_gpu_pod_memory_usage_bytes)`, []string{"nvidia_gpu_pod_memory_usage_bytes"}},
		{"topk", `topk(5, hw_power_watts)`, []string{"hw_power_watts"}},
		{"topk by", `topk by (host_name) (1, hw_power_watts)`, []string{"hw_power_watts"}},
		{"count_values", `count_values("state", x)`, []string{"x"}},
		{"vector matching", `a / on (host_name, hw_id) group_left (hw_model) b`, []string{"a", "b"}},
		{"group_left without list", `a * on (hw_id) group_left b`, []string{"a", "b"}},
		{"ignoring", `a - ignoring (nvidia_gpu_power_limit_type) b`, []string{"a", "b"}},
		{"or vector", `count(ALERTS{alertstate="firing"}) or vector(0)`, []string{"ALERTS"}},
		{"bool", `a >= bool 0.5`, []string{"a"}},
		{"numbers", `a * 1e-3 + 0.5 + 3600 + .5 + 0x1f - 1e+3`, []string{"a"}},
		{"inf and nan", `clamp(a, -Inf, +Inf) or nan`, []string{"a"}},
		{"offset and at", `a offset 5m + b @ end()`, []string{"a", "b"}},
		{"strings are not metrics", `label_replace(a, "pod", "$1", "k8s_pod_name", "(.*)")`, []string{"a"}},
		{"string with braces", `a{x=~"{not}[a]"} + b{y='it\'s'}`, []string{"a", "b"}},
		{"raw string", "a{x=~`b{`} + c", []string{"a", "c"}},
		{"variables", `a * $scale + ${factor} * $__range_s`, []string{"a"}},
		{"colons", `job:hw_power_watts:sum + b`, []string{"b", "job:hw_power_watts:sum"}},
		{"distinct and sorted", `z + a + z{k="v"} + a[5m]`, []string{"a", "z"}},
		{"comment", "a # b{\n+ c", []string{"a", "c"}},
		{"nested", `sum by (ns) (label_replace(label_replace(group by (k8s_namespace_name, k8s_pod_name) (p{cluster=~"$cluster"}), "namespace", "$1", "k8s_namespace_name", "(.*)"), "pod", "$1", "k8s_pod_name", "(.*)")) and on (namespace, pod) rate(container_cpu_usage_seconds_total{container!=""}[$__rate_interval])`,
			[]string{"container_cpu_usage_seconds_total", "p"}},
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

func TestSelectors(t *testing.T) {
	got, err := Selectors(`sum by (hw_id) (rate(a{cluster=~"$cluster", x="}"}[5m])) / b`)
	require.NoError(t, err)
	assert.Equal(t, []Selector{{Metric: "a", Matchers: `cluster=~"$cluster", x="}"`}, {Metric: "b"}}, got)
}

func TestSelectorsByName(t *testing.T) {
	got, err := Selectors(`{__name__=~"a|b", cluster=~"$cluster"}`)
	require.NoError(t, err)
	assert.Equal(t, []Selector{{Metric: "a", Matchers: `__name__=~"a|b", cluster=~"$cluster"`}, {Metric: "b", Matchers: `__name__=~"a|b", cluster=~"$cluster"`}}, got)
}

func TestErrors(t *testing.T) {
	for _, expr := range []string{
		`{job="up"}`,
		`{__name__=~"up.*"}`,
		`{__name__!="up"}`,
		`a{x="y"`,
		`rate(a[5m)`,
		`a{x="y}`,
		`a}`,
		`sum by hw_id (a)`,
		`a * ${unterminated`,
	} {
		t.Run(expr, func(t *testing.T) {
			_, err := MetricNames(expr)
			assert.Error(t, err)
		})
	}
}
