package dashboards

import (
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards/internal/grafana"
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

func clusterVar() grafana.Variable {
	v := grafana.QueryVariable("cluster", "Cluster", `label_values(nvidia_nvml_available, cluster)`, true)
	v.Description = "Prometheus cluster label, where there is one; All (.*) also matches series without it."
	return v
}

func nodeVar() grafana.Variable {
	return grafana.QueryVariable("node", "Node", `label_values(nvidia_nvml_available{`+mCluster+`}, host_name)`, true)
}

// gpuVar lists GPUs (not MIG instances) by UUID.
func gpuVar() grafana.Variable {
	return grafana.QueryVariable("gpu", "GPU", `label_values(hw_gpu_memory_limit_bytes{`+mCluster+`, `+mNode+`, `+mPhysical+`}, hw_id)`, true)
}

// parentVar lists MIG-enabled GPUs (the hw_parent of MIG instances).
func parentVar() grafana.Variable {
	v := grafana.QueryVariable("gpu", "GPU", `label_values(hw_gpu_memory_limit_bytes{`+mCluster+`, `+mNode+`, `+mMIG+`}, hw_parent)`, true)
	v.Description = "MIG-enabled GPUs (UUID of the parent GPU of MIG instances)."
	return v
}

// podMetrics are the per-pod series; a pod has at least one of them (memory needs its
// processes or an exclusive GPU, utilization its processes' SM time, energy a non-MIG GPU).
var podMetrics = []string{"nvidia_gpu_pod_memory_usage_bytes", "nvidia_gpu_pod_energy_joules_total", "nvidia_gpu_pod_utilization_ratio"}

// podSelector selects every per-pod series.
func podSelector(m ...string) string {
	return `{__name__=~"` + strings.Join(podMetrics, "|") + `", ` + strings.Join(m, ", ") + `}`
}

// podsOnGPUs is one series per pod, container and GPU (or MIG instance) it runs on.
func podsOnGPUs(s scope) string {
	parts := make([]string, len(podMetrics))
	for i, m := range podMetrics {
		parts[i] = s.sel(m)
	}
	return "group by (" + byPod + ", k8s_container_name, host_name, hw_id) (" + strings.Join(parts, " or ") + ")"
}

func namespaceVar() grafana.Variable {
	return grafana.QueryVariable("namespace", "Namespace", `label_values(`+podSelector(mCluster)+`, k8s_namespace_name)`, true)
}

func podVar() grafana.Variable {
	return grafana.QueryVariable("pod", "Pod", `label_values(`+podSelector(mCluster, mNamespace)+`, k8s_pod_name)`, true)
}

func newDashboard(uid, title, description string, vars ...grafana.Variable) *grafana.Dashboard {
	d := grafana.New(uid, title, description, Tag, "gpu", "nvidia")
	d.Variables = append([]grafana.Variable{grafana.DatasourceVariable()}, vars...)
	d.Links = []grafana.Link{{
		Title: "GPU dashboards", Type: "dashboards", Tags: []string{Tag}, AsDropdown: true,
		IncludeVars: true, KeepTime: true,
	}}
	return d
}

// Threshold scales.
var (
	utilizationSteps = grafana.Steps("blue", 0.1, "green", 0.9, "orange")
	fillSteps        = grafana.Steps("green", 0.9, "orange", 0.95, "red")
	badIfAny         = grafana.Steps("green", 1, "red")
	warnIfAny        = grafana.Steps("green", 1, "orange")
)

// healthCode is 0 (ok), 1 (degraded) or 2 (failed) per GPU, from hw_status's one series per
// state.
func healthCode(s scope, by string) string {
	return "max by (" + by + ") ((" + s.sel("hw_status", `hw_state="ok"`) + " == 1) * 0 or (" +
		s.sel("hw_status", `hw_state="degraded"`) + " == 1) or (" +
		s.sel("hw_status", `hw_state="failed"`) + " == 1) * 2)"
}

var healthMapping = grafana.ValueText("0", "OK", "green", "1", "Degraded", "orange", "2", "Failed", "red")

// buckets returns instant queries counting the series of sel in each tenth of 0–1.
func buckets(sel string) []grafana.Target {
	var out []grafana.Target
	for i := 0; i < 10; i++ {
		lo, hi := float64(i)/10, float64(i+1)/10
		cond := sel + " >= " + strconv.FormatFloat(lo, 'f', -1, 64) + " < " + strconv.FormatFloat(hi, 'f', -1, 64)
		if i == 9 {
			cond = sel + " >= " + strconv.FormatFloat(lo, 'f', -1, 64)
		}
		legend := strconv.Itoa(i*10) + "–" + strconv.Itoa((i+1)*10) + " %"
		out = append(out, grafana.Instant("count("+cond+") or vector(0)", legend))
	}
	return out
}
