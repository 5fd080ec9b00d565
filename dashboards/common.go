package dashboards

import (
	"strconv"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"

	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
)

// Tag is on every dashboard; the dashboards link to each other through it.
const Tag = "otelcol-gpu"

// Matchers for the template variables. "All" is the regex .*, which also matches series
// without the label (there is no cluster label yet, for instance).
const (
	mCluster   = `cluster=~"$cluster"`
	mNode      = `host_name=~"$node"`
	mGPU       = `hw_id=~"$gpu"`
	mParent    = `hw_parent=~"$gpu"`
	mNamespace = `k8s_namespace_name=~"$namespace"`
	mPod       = `k8s_pod_name=~"$pod"`
	mPhysical  = `nvidia_mig_uuid=""`  // a GPU, not a MIG instance
	mMIG       = `nvidia_mig_uuid!=""` // a MIG instance
	mAttached  = `k8s_pod_name!=""`    // attributed to a pod
	mGeneral   = `hw_gpu_task="general"`
	mFiring    = `alertstate="firing"`
	mGPUAlerts = `alertname=~"GPU.*"`
)

// Legends.
const (
	lGPU = "{{host_name}} GPU {{nvidia_gpu_index}}"
	lMIG = "{{host_name}} GPU {{nvidia_gpu_index}} {{nvidia_mig_profile}} {{nvidia_mig_uuid}}"
	lPod = "{{k8s_namespace_name}}/{{k8s_pod_name}}"
)

// Label lists for `by (...)`.
const (
	byGPU   = "host_name, nvidia_gpu_index, hw_id"
	byModel = "host_name, nvidia_gpu_index, hw_id, hw_model"
	byPod   = "k8s_namespace_name, k8s_pod_name"
)

// scope is the set of matchers every selector of a dashboard (or a part of it) carries.
type scope []string

// with returns the scope plus more matchers.
func (s scope) with(m ...string) scope {
	return append(append(scope{}, s...), m...)
}

// sel writes a selector: metric{scope matchers, extra matchers}.
func (s scope) sel(metric string, extra ...string) string {
	return metric + "{" + strings.Join(s.with(extra...), ", ") + "}"
}

// Template variables, chained: node by cluster, GPU by node, pod by namespace.

// queryVariable is a variable whose values come from a Prometheus query such as
// label_values(metric{...}, label). It offers "All" (regex .*, which also matches series
// without the label) and several values at once, and starts at All.
func queryVariable(name, label, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(label).Datasource(datasource()).
		Query(dashboard.StringOrMap{String: ptr(query)}).Definition(query).Regex("").
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		Hide(dashboard.VariableHideDontHide).Multi(true).IncludeAll(true).AllValue(".*").
		Current(dashboard.VariableOption{
			Selected: ptr(true),
			Text:     dashboard.StringOrArrayOfString{ArrayOfString: []string{"All"}},
			Value:    dashboard.StringOrArrayOfString{ArrayOfString: []string{"$__all"}},
		}).Options([]dashboard.VariableOption{})
}

func clusterVar() *dashboard.QueryVariableBuilder {
	return queryVariable("cluster", "Cluster", `label_values(nvidia_nvml_available, cluster)`).
		Description("Prometheus cluster label, where there is one; All (.*) also matches series without it.")
}

func nodeVar() *dashboard.QueryVariableBuilder {
	return queryVariable("node", "Node", `label_values(nvidia_nvml_available{`+mCluster+`}, host_name)`)
}

// gpuVar lists GPUs (not MIG instances) by UUID.
func gpuVar() *dashboard.QueryVariableBuilder {
	return queryVariable("gpu", "GPU", `label_values(hw_gpu_memory_limit_bytes{`+mCluster+`, `+mNode+`, `+mPhysical+`}, hw_id)`)
}

// parentVar lists MIG-enabled GPUs (the hw_parent of MIG instances).
func parentVar() *dashboard.QueryVariableBuilder {
	return queryVariable("gpu", "GPU", `label_values(hw_gpu_memory_limit_bytes{`+mCluster+`, `+mNode+`, `+mMIG+`}, hw_parent)`).
		Description("MIG-enabled GPUs (UUID of the parent GPU of MIG instances).")
}

// podMetrics are the per-pod series; a pod has at least one of them (memory needs its
// processes or an exclusive GPU, utilization its processes' SM time, energy a non-MIG GPU).
func podMetrics() []string {
	return []string{"nvidia_gpu_pod_memory_usage_bytes", "nvidia_gpu_pod_energy_joules_total", "nvidia_gpu_pod_utilization_ratio"}
}

// podSelector selects every per-pod series.
func podSelector(m ...string) string {
	return `{__name__=~"` + strings.Join(podMetrics(), "|") + `", ` + strings.Join(m, ", ") + `}`
}

// podsOnGPUs is one series per pod, container and GPU (or MIG instance) it runs on.
func podsOnGPUs(s scope) string {
	var parts []string
	for _, m := range podMetrics() {
		parts = append(parts, s.sel(m))
	}
	return "group by (" + byPod + ", k8s_container_name, host_name, hw_id) (" + strings.Join(parts, " or ") + ")"
}

func namespaceVar() *dashboard.QueryVariableBuilder {
	return queryVariable("namespace", "Namespace", `label_values(`+podSelector(mCluster)+`, k8s_namespace_name)`)
}

func podVar() *dashboard.QueryVariableBuilder {
	return queryVariable("pod", "Pod", `label_values(`+podSelector(mCluster, mNamespace)+`, k8s_pod_name)`)
}

// newDashboard starts a dashboard: the datasource variable, then vars; a dropdown of the
// other GPU dashboards; the last 6 hours, refreshed every minute.
func newDashboard(uid, title, description string, vars ...*dashboard.QueryVariableBuilder) *dashboard.DashboardBuilder {
	d := dashboard.NewDashboardBuilder(title).Uid(uid).Description(description).Tags([]string{Tag, "gpu", "nvidia"}).
		Editable().Tooltip(dashboard.DashboardCursorSyncCrosshair).Time("now-6h", "now").Refresh("1m").
		Timezone("").WeekStart("").FiscalYearStartMonth(0).LiveNow(false).Version(1).
		Link(dashboard.NewDashboardLinkBuilder("GPU dashboards").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{Tag}).AsDropdown(true).IncludeVars(true).KeepTime(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus").
			Hide(dashboard.VariableHideDontHide))
	for _, v := range vars {
		d.WithVariable(v)
	}
	return d
}

func row(title string) *dashboard.RowBuilder {
	return dashboard.NewRowBuilder(title).Datasource(datasource())
}

// fullOverlay is the sentence a panel's description carries when what (a column, a line,
// or the whole panel when empty) reads series that are off by default.
func fullOverlay(what string) string {
	if what == "" {
		return " N" + FullOverlay[1:] + "."
	}
	return " " + what + " " + FullOverlay + "."
}

// Threshold scales. Orange (warning) and red (critical) start where the alert of that
// severity fires.
func utilizationScale() thresholdScale {
	return scale("blue", step{thresholds.UtilizationLowRatio, "green"}, step{thresholds.UtilizationSaturatedRatio, "orange"})
}

func framebufferScale() thresholdScale {
	return scale("green", step{thresholds.MemoryHighRatio, "orange"})
}

func temperatureScale() thresholdScale {
	return scale("green", step{thresholds.TemperatureHighCelsius, "orange"})
}

func powerScale() thresholdScale {
	return scale("green", step{thresholds.PowerNearLimitRatio, "orange"})
}

func attributionAgeScale() thresholdScale {
	return scale("green", step{thresholds.AttributionStaleSeconds, "orange"})
}

// badIfAny and warnIfAny colour counts of bad things.
func badIfAny() thresholdScale  { return scale("green", step{1, "red"}) }
func warnIfAny() thresholdScale { return scale("green", step{1, "orange"}) }

// plain is one colour for bars that count, not judge.
func plain() thresholdScale { return scale("blue") }

// healthCode is 0 (ok), 1 (degraded) or 2 (failed) per GPU, from hw_status's one series per
// state.
func healthCode(s scope, by string) string {
	return "max by (" + by + ") ((" + s.sel("hw_status", `hw_state="ok"`) + " == 1) * 0 or (" +
		s.sel("hw_status", `hw_state="degraded"`) + " == 1) or (" +
		s.sel("hw_status", `hw_state="failed"`) + " == 1) * 2)"
}

func healthMapping() dashboard.ValueMapping {
	return valueText([3]string{"0", "OK", "green"}, [3]string{"1", "Degraded", "orange"}, [3]string{"2", "Failed", "red"})
}

// healthWindow says how long an XID keeps a GPU degraded or failed, e.g. "10 minutes".
func healthWindow() string {
	return strconv.Itoa(int(thresholds.XIDHealthWindow.Minutes())) + " minutes"
}

// xids lists the XID codes of a class: "48, 64, 79".
func xids(class thresholds.XIDClass) string {
	var codes []string
	for _, c := range thresholds.XIDs(class) {
		codes = append(codes, strconv.FormatUint(c, 10))
	}
	return strings.Join(codes, ", ")
}

// buckets returns instant queries counting the series of sel in each tenth of 0–1.
func buckets(sel string) []*prometheus.DataqueryBuilder {
	var out []*prometheus.DataqueryBuilder
	for i := 0; i < 10; i++ {
		lo, hi := float64(i)/10, float64(i+1)/10
		cond := sel + " >= " + strconv.FormatFloat(lo, 'f', -1, 64) + " < " + strconv.FormatFloat(hi, 'f', -1, 64)
		if i == 9 {
			cond = sel + " >= " + strconv.FormatFloat(lo, 'f', -1, 64)
		}
		legend := strconv.Itoa(i*10) + "–" + strconv.Itoa((i+1)*10) + " %"
		out = append(out, instant("count("+cond+") or vector(0)", legend))
	}
	return out
}
