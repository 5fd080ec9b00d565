package rules

import (
	"fmt"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
)

// The allocation funnel: for each owner (a pod, with its namespace and workload, or a
// Slurm job) on each GPU or MIG instance, the share of a physical GPU it is allocated, of
// which the share that is active (a process of the owner holds framebuffer, or its
// utilization is above thresholds.IdleUtilizationRatio), the effective,
// utilization-weighted share, and the idle share (allocated - effective). Summed per
// workload, namespace, Slurm job, node pool and cluster, next to the total GPUs, as a
// gauge now and as GPU-hours over the trailing hour; the cost rules (cost.go) price the
// GPU-hours per GPU model.
//
// A GPU's share: a whole GPU is 1; a MIG instance is its compute slices over the GPU's
// (3g.40gb on an H100 is 3/7; the slices of a profile are its first number, so 1c.3g.40gb,
// a compute instance of one slice, is 1/7); a GPU or MIG instance shared by several owners
// (time-slicing, MPS) is split between them by their utilization now, or equally while
// none of them is busy (and under MIG, where NVML has no per-process utilization).

const (
	// nodePool is the Prometheus label that names a node's pool. Nothing sets it by
	// default: the agent's k8s_attributes must copy the node label that names the pool
	// into the resource attribute k8s.node.pool (rules/README.md, "Node pools").
	nodePool = "k8s_node_pool"
	// byWorkload names a pod's workload: k8s_attributes' owner names. A pod has at most one
	// of deployment, statefulset, daemonset and job (a cron job's pod has the job and the
	// cron job); a bare pod has none, and counts under its namespace only.
	byWorkload = "cluster, k8s_namespace_name, k8s_deployment_name, k8s_statefulset_name, k8s_daemonset_name, k8s_job_name, k8s_cronjob_name"
	podKey     = "host_name, hw_id, k8s_namespace_name, k8s_pod_name"
	jobKey     = "host_name, hw_id, slurm_job_id, slurm_job_sluid"
	// podGPULevel is the level of the per-(GPU or MIG instance, pod) funnel series.
	podGPULevel = "namespace_workload_pod_gpu"
)

// migSlicesDefault is the number of compute slices of a MIG-capable GPU (A100, H100, H200,
// H20, B200, GB200, B300), migSlices the models that have fewer (NVIDIA's MIG user guide,
// "Supported GPUs": the most instances a GPU takes). models is a Prometheus regular
// expression over hw_model. A GPU not listed here that has fewer slices makes its
// instances look smaller than they are: add it.
const migSlicesDefault = 7

var migSlices = []struct {
	models string
	slices int
}{
	{`NVIDIA A30.*|.*RTX PRO 6000.*`, 4},
	{`.*RTX PRO (5000|4500).*`, 2},
}

// tiers of the funnel under the total.
var tiers = []string{"allocated", "active", "effective", "idle"}

// owner is what the funnel attributes GPUs to.
type owner struct {
	level  string // of the per-(GPU, owner) series
	group  string // the (GPU, owner) group rule: value 1, the labels every share keeps
	key    string // labels that name one (GPU or MIG instance, owner)
	util   string // the owner's SM utilization on the GPU
	memory string // the owner's framebuffer on the GPU
}

var (
	podOwner = owner{podGPULevel, podGPULevel + ":gpu_allocated:group", podKey,
		"nvidia_gpu_pod_utilization_ratio", "nvidia_gpu_pod_memory_usage_bytes"}
	jobOwner = owner{"slurm_job_gpu", "slurm_job_gpu:gpu_in_use:group", jobKey,
		"nvidia_gpu_job_utilization_ratio", "nvidia_gpu_job_memory_usage_bytes"}
)

// gpuShare is the share of a physical GPU each series of o.group stands for: 1 for a whole
// GPU, the instance's compute slices over its GPU's for a MIG instance. A MIG instance
// whose profile the agent could not name (no nvidia_mig_profile) has no share.
func gpuShare(o owner) string {
	mig := `hw_parent!=""`
	var slices, total []string
	for n := 1; n <= migSlicesDefault; n++ {
		slices = append(slices, fmt.Sprintf(`%s{%s,nvidia_mig_profile=~"%d[cg][.].*"} * %d`, o.group, mig, n, n))
	}
	var listed []string
	for _, m := range migSlices {
		total = append(total, fmt.Sprintf(`%s{%s,hw_model=~"%s"} * %d`, o.group, mig, m.models, m.slices))
		listed = append(listed, m.models)
	}
	total = append(total, fmt.Sprintf(`%s{%s,hw_model!~"%s"} * %d`, o.group, mig, strings.Join(listed, "|"), migSlicesDefault))
	return `    ` + o.group + `{hw_parent=""}
  or
      (
          ` + strings.Join(slices, "\n        or ") + `
      )
    /
      (
          ` + strings.Join(total, "\n        or ") + `
      )`
}

// split is each owner's part of its GPU or MIG instance: its utilization over the sum of
// the utilizations of everyone on the device, or, where none of them is busy or NVML has
// no per-owner utilization (MIG), an equal part. Keyed by o.key.
func split(o owner) string {
	return `    (
        max by (` + o.key + `) (` + o.util + `)
      / on (host_name, hw_id) group_left ()
        (sum by (host_name, hw_id) (max by (` + o.key + `) (` + o.util + `)) > 0)
    )
  or
    (
        group by (` + o.key + `) (` + o.group + `)
      / on (host_name, hw_id) group_left ()
        count by (host_name, hw_id) (group by (` + o.key + `) (` + o.group + `))
      unless on (host_name, hw_id)
        (sum by (host_name, hw_id) (` + o.util + `) > 0)
    )`
}

// shareRules are the per-(GPU, owner) funnel series of an owner.
func shareRules(o owner, what string) []Rule {
	share := func(tier string) string { return o.level + ":gpus_" + tier + ":share" }
	return []Rule{
		{
			Comment: "The share of a physical GPU " + what + " is allocated now: a whole GPU is 1, a MIG instance its compute slices over the GPU's (" + fmt.Sprint(migSlicesDefault) + " on most models; fewer on the models listed in rules/funnel.go); a GPU or instance shared by several is split by their utilization now, equally while none is busy.",
			Record:  share("allocated"),
			Expr: `  (
` + indent(gpuShare(o), "  ") + `
  )
* on (` + o.key + `) group_left ()
  (
` + indent(split(o), "  ") + `
  )`,
		},
		{
			Comment: "The allocated share while it is active: a process of " + what + " holds framebuffer on the device, or its utilization is above " + num(thresholds.IdleUtilizationRatio) + " (gpu_enrich's idle threshold).",
			Record:  share("active"),
			Expr: `  ` + share("allocated") + `
and on (` + o.key + `)
  (` + o.memory + ` > 0 or ` + o.util + ` > ` + num(thresholds.IdleUtilizationRatio) + `)`,
		},
		{
			Comment: "The effective, utilization-weighted share: on a whole GPU the SM utilization of " + what + " (its own on a shared GPU); on a MIG instance the instance's utilization (NVML GPM, Hopper and newer) times its allocated share. Absent where there is no utilization to weigh by (MIG instances on GPUs without GPM, such as the A100).",
			Record:  share("effective"),
			Expr: `    clamp_max(
        ` + o.group + `{hw_parent=""}
      * on (` + o.key + `) group_left ()
        max by (` + o.key + `) (` + o.util + `),
      1
    )
  or
      ` + share("allocated") + `{hw_parent!=""}
    * on (host_name, hw_id) group_left ()
      clamp_max(max by (host_name, hw_id) (hw_gpu_utilization_ratio{hw_gpu_task="general",hw_parent!=""}), 1)`,
		},
		{
			Comment: "The idle share, allocated - effective, where the effective share is known.",
			Record:  share("idle"),
			Expr:    `clamp_min(` + share("allocated") + ` - ` + share("effective") + `, 0)`,
		},
	}
}

func funnel() Group {
	rules := []Rule{{
		Comment: "One series per (GPU or MIG instance, pod), value 1, with the pod's workload, node pool and cluster. topk keeps one series per (GPU, pod) where its labels changed within Prometheus's 5-minute lookback (k8s_attributes adding the workload a collection late after an agent restart), so that no pod counts twice.",
		Record:  podGPULevel + ":gpu_allocated:group",
		Expr: `  topk by (` + podKey + `) (1,
    group by (` + byWorkload + `, ` + nodePool + `, host_name, hw_id, hw_parent, hw_model, nvidia_mig_profile, k8s_pod_name) (
        nvidia_gpu_pod_energy_joules_total
      or nvidia_gpu_pod_memory_usage_bytes
      or nvidia_gpu_pod_utilization_ratio
    )
  )`,
	}}
	rules = append(rules, shareRules(podOwner, "the pod")...)
	rules = append(rules, shareRules(jobOwner, "the Slurm job")...)
	for i, t := range tiers {
		r := Rule{
			Record: "namespace_workload_model:gpus_" + t + ":sum",
			Expr:   `sum by (` + byWorkload + `, ` + nodePool + `, hw_model) (` + podGPULevel + `:gpus_` + t + `:share)`,
		}
		if i == 0 {
			r.Comment = "Per workload, node pool and GPU model (the level the cost rules price), then per workload, namespace, Slurm job, node pool and cluster: GPUs allocated, active, effective and idle now."
		}
		rules = append(rules, r,
			Rule{Record: "slurm_job_model:gpus_" + t + ":sum", Expr: `sum by (` + byJob + `, hw_model) (slurm_job_gpu:gpus_` + t + `:share)`},
			Rule{Record: "namespace_workload:gpus_" + t + ":sum", Expr: `sum by (` + byWorkload + `) (namespace_workload_model:gpus_` + t + `:sum)`},
			Rule{Record: "namespace:gpus_" + t + ":sum", Expr: `sum by (cluster, k8s_namespace_name) (namespace_workload:gpus_` + t + `:sum)`},
			Rule{Record: "slurm_job:gpus_" + t + ":sum", Expr: `sum by (` + byJob + `) (slurm_job_model:gpus_` + t + `:sum)`},
			Rule{Record: "node_pool:gpus_" + t + ":sum", Expr: `sum by (cluster, ` + nodePool + `) (namespace_workload_model:gpus_` + t + `:sum or slurm_job_model:gpus_` + t + `:sum)`},
			Rule{Record: "cluster:gpus_" + t + ":sum", Expr: `sum by (cluster) (node_pool:gpus_` + t + `:sum)`},
		)
	}
	rules = append(rules,
		Rule{
			Comment: "Each node's pool, from the pod series that carry it; remembered for a day, so that a node keeps its pool while none of its GPUs is allocated.",
			Record:  "node:gpu_node_pool:info",
			Expr: `  topk by (host_name) (1,
      group by (cluster, host_name, ` + nodePool + `) (` + podGPULevel + `:gpu_allocated:group{` + nodePool + `!=""})
    or on (host_name)
      last_over_time(node:gpu_node_pool:info[1d])
  )`,
		},
		Rule{
			Comment: "The GPUs the agents read (whole GPUs: nvidia_gpu_count), per node pool (a node without a known pool under an empty one) and cluster.",
			Record:  "node_pool:gpus_total:count",
			Expr: `  sum by (cluster, ` + nodePool + `) (
      max by (cluster, host_name) (nvidia_gpu_count)
    * on (host_name) group_left (` + nodePool + `)
      node:gpu_node_pool:info
    or on (host_name)
      max by (cluster, host_name) (nvidia_gpu_count)
  )`,
		},
		Rule{Record: "cluster:gpus_total:count", Expr: `sum by (cluster) (node_pool:gpus_total:count)`},
	)
	return Group{Name: "gpu-funnel.rules", Rules: rules}
}

// hourly is the integral of a gauge over the trailing hour, in gauge-hours: the gauge
// sampled once a minute, 60 samples. The range is a second short of the hour so that an
// evaluation on the minute gets 60 samples whether subquery ranges are closed at the start
// (Prometheus 2) or left-open (Prometheus 3).
func hourly(gauge string) string {
	return `sum_over_time(` + gauge + `[59m59s:1m]) / 60`
}

func funnelHours() Group {
	var rules []Rule
	for i, t := range tiers {
		r := Rule{
			Record: "namespace_workload_model:gpu_hours_" + t + ":sum1h",
			Expr:   hourly("namespace_workload_model:gpus_" + t + ":sum"),
		}
		if i == 0 {
			r.Comment = "GPU-hours over the trailing hour of each funnel tier: the gauge integrated once a minute, so a share that changes within the hour (a pod joining a time-sliced GPU) counts for the minutes it held. Per workload, node pool and GPU model, and summed from there."
		}
		rules = append(rules, r,
			Rule{Record: "slurm_job_model:gpu_hours_" + t + ":sum1h", Expr: hourly("slurm_job_model:gpus_" + t + ":sum")},
			Rule{Record: "namespace_workload:gpu_hours_" + t + ":sum1h", Expr: `sum by (` + byWorkload + `) (namespace_workload_model:gpu_hours_` + t + `:sum1h)`},
			Rule{Record: "namespace:gpu_hours_" + t + ":sum1h", Expr: `sum by (cluster, k8s_namespace_name) (namespace_workload:gpu_hours_` + t + `:sum1h)`},
			Rule{Record: "slurm_job:gpu_hours_" + t + ":sum1h", Expr: `sum by (` + byJob + `) (slurm_job_model:gpu_hours_` + t + `:sum1h)`},
			Rule{Record: "node_pool:gpu_hours_" + t + ":sum1h", Expr: `sum by (cluster, ` + nodePool + `) (namespace_workload_model:gpu_hours_` + t + `:sum1h or slurm_job_model:gpu_hours_` + t + `:sum1h)`},
			Rule{Record: "cluster:gpu_hours_" + t + ":sum1h", Expr: `sum by (cluster) (node_pool:gpu_hours_` + t + `:sum1h)`},
		)
	}
	rules = append(rules,
		Rule{Record: "node_pool:gpu_hours_total:sum1h", Expr: hourly("node_pool:gpus_total:count")},
		Rule{Record: "cluster:gpu_hours_total:sum1h", Expr: `sum by (cluster) (node_pool:gpu_hours_total:sum1h)`},
	)
	return Group{Name: "gpu-funnel-hours.rules", Rules: rules}
}
