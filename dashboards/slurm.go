package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

// Slurm jobs on bare-metal GPU nodes: the agent writes per-job series (nvidia_gpu_job_*)
// for every GPU a job has a process on, named by slurm_job_id, or by slurm_job_sluid where
// Slurm 26.05+ names job cgroups by SLUID. A job has one of the two labels, so queries
// group by both and legends print whichever is set.

const (
	mJobID    = `slurm_job_id=~"$slurm_job_id"`
	mJobSLUID = `slurm_job_sluid=~"$slurm_job_sluid"`
	byJob     = "slurm_job_id, slurm_job_sluid"
	lJob      = "job {{slurm_job_id}}{{slurm_job_sluid}}"
)

// jobMetrics are the per-job series; a job on a GPU has at least one of them (energy on a
// whole GPU, memory on a MIG instance too, utilization when its processes ran kernels).
func jobMetrics() []string {
	return []string{"nvidia_gpu_job_memory_usage_bytes", "nvidia_gpu_job_energy_joules_total", "nvidia_gpu_job_utilization_ratio"}
}

// jobSelector selects every per-job series.
func jobSelector(m ...string) string {
	return `{__name__=~"` + strings.Join(jobMetrics(), "|") + `", ` + strings.Join(m, ", ") + `}`
}

// jobsOnGPUs is one series per job and GPU (or MIG instance) it runs on.
func jobsOnGPUs(s scope) string {
	var parts []string
	for _, m := range jobMetrics() {
		parts = append(parts, s.sel(m))
	}
	return "group by (" + byJob + ", host_name, hw_id) (" + strings.Join(parts, " or ") + ")"
}

func slurmJobVar() *dashboard.QueryVariableBuilder {
	return queryVariable("slurm_job_id", "Slurm job", `label_values(`+jobSelector(mCluster)+`, slurm_job_id)`).
		Description("Slurm job ID (bare-metal nodes; All also matches pods and SLUID-named jobs).")
}

func slurmSLUIDVar() *dashboard.QueryVariableBuilder {
	return queryVariable("slurm_job_sluid", "Slurm SLUID", `label_values(`+jobSelector(mCluster)+`, slurm_job_sluid)`).
		Description("Slurm 26.05+ names job cgroups by SLUID instead of job ID; such jobs are picked here.")
}

// slurmJobs adds the "Slurm jobs" row: per-job GPU utilization, framebuffer, power and
// energy, GPUs per job and GPU-hours for chargeback.
func slurmJobs(d *dashboard.DashboardBuilder) {
	s := scope{mCluster, mJobID, mJobSLUID}
	util := s.sel("nvidia_gpu_job_utilization_ratio")
	mem := s.sel("nvidia_gpu_job_memory_usage_bytes")
	energy := s.sel("nvidia_gpu_job_energy_joules_total")
	onGPUs := jobsOnGPUs(s)
	byJobGPU := byJob + ", " + byGPU
	maxBy := func(by, sel string) string { return "max by (" + by + ") (" + sel + ")" }
	// GPU-hours over the time range: the share of its node's collections that carried each
	// (job, GPU) series, times the range (the recording rule slurm_job:gpu_hours:sum does
	// the same over the trailing hour).
	gpuHours := "sum by (" + byJob + ") (clamp_max((" +
		"count_over_time(" + energy + "[$__range]) or count_over_time(" + mem + "[$__range]) or count_over_time(" + util + "[$__range])" +
		") / on (host_name) group_left () max by (host_name) (count_over_time(" + scope{mCluster}.sel("nvidia_nvml_available") + "[$__range])), 1)) * $__range_s / 3600"

	d.WithRow(row("Slurm jobs"))
	add(d, 6, 4,
		statPanel("Slurm jobs on GPUs", units.Short, instant("count(count by ("+byJob+") ("+onGPUs+"))", "")).
			Description("Slurm jobs with a process on a GPU now (bare-metal nodes: the agent reads each GPU process's job from its cgroup).").NoValue("0"),
		statPanel("GPUs in Slurm jobs", units.Short, instant("count(count by (host_name, hw_id) ("+onGPUs+"))", "")).
			Description("GPUs and MIG instances these jobs run on.").NoValue("0"),
		statPanel("Mean job GPU utilization", units.PercentUnit, instant("avg("+util+")", "")).
			Description("Mean share of the interval the jobs' processes kept their GPUs' SMs busy.").Thresholds(utilizationScale()).Min(0).Max(1),
		statPanel("Slurm job GPU power", units.Watt, instant("sum(rate("+energy+"[$__rate_interval]))", "")).
			Description("GPU power attributed to the jobs (a shared GPU's power split by SM share)."),
	)
	add(d, 12, 8,
		timeSeries("GPU utilization by job", units.PercentUnit, query("avg by ("+byJob+") ("+util+")", lJob)).
			Description("Share of the interval the job's processes kept its GPUs' SMs busy, averaged over its GPUs on all its nodes (none on MIG instances).").Min(0).Max(1),
		timeSeries("GPUs per job", units.Short, query("count by ("+byJob+") ("+onGPUs+")", lJob)).
			Description("GPUs (and MIG instances) the job has a process on, over all its nodes. The agent sees processes, not Slurm's allocation: a GPU the job was given but never used does not count.").
			Min(0).Decimals(0),
		timeSeries("Framebuffer by job", units.BytesIEC, query("sum by ("+byJob+") ("+mem+")", lJob)).
			Description("Framebuffer the job's processes use, over all its GPUs and nodes.").Min(0),
		timeSeries("GPU power by job", units.Watt, query("sum by ("+byJob+") (rate("+energy+"[$__rate_interval]))", lJob)).
			Description("Rate of the job's GPU energy: an exclusive GPU's whole power, a shared GPU's split by SM share (not available on MIG instances).").
			Stacking(normalStack()).FillOpacity(60).Min(0),
	)
	add(d, 24, 9,
		tablePanel("Slurm jobs on GPUs now", units.Short,
			cols("slurm_job_id", "Job", "slurm_job_sluid", "SLUID", "host_name", "Node", "nvidia_gpu_index", "GPU",
				"Value #A", "Utilization", "Value #B", "Framebuffer", "Value #C", "Power").hiding("hw_id"),
			tableQuery(maxBy(byJobGPU, util)),
			tableQuery(maxBy(byJobGPU, mem)),
			tableQuery("sum by ("+byJobGPU+") (rate("+energy+"[$__rate_interval]))"),
		).Description("One row per job and GPU (or MIG instance) it runs on.").
			OverrideByName("Value #A", ratioGauge(utilizationScale())).
			OverrideByName("Value #B", props(unitProp(units.BytesIEC))).
			OverrideByName("Value #C", props(unitProp(units.Watt))),
	)
	add(d, 12, 8,
		barGauge("Top 10 jobs by GPU-hours (time range)", units.Hours, instant("topk(10, "+gpuHours+")", lJob)).
			Description("GPU-hours each job occupied over the dashboard's time range (GPUs × time with a process of the job on them), for chargeback.").
			Decimals(2).Thresholds(plain()),
		barGauge("Top 10 jobs by energy (time range)", units.KiloWattHour,
			instant("topk(10, sum by ("+byJob+") (increase("+energy+"[$__range]))) / 3600000", lJob)).
			Description("GPU energy per job over the dashboard's time range.").Thresholds(plain()),
	)
}
