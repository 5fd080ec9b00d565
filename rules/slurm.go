package rules

// A Slurm job is on a GPU while the agent writes a per-job series for it, that is while
// one of the job's processes runs there. Series name the job by slurm_job_id, or by
// slurm_job_sluid where Slurm (26.05+) names job cgroups by SLUID; every rule keeps both
// labels, so a job has exactly one of them set. cluster, where the series carry one, tells
// apart the jobs of several Slurm clusters that write to one Prometheus.
const byJob = "cluster, slurm_job_id, slurm_job_sluid"

func slurmJobs() Group {
	return Group{Name: "gpu-slurm.rules", Rules: []Rule{
		{
			Comment: "One series per (GPU or MIG instance, Slurm job) with a process of the job on it, value 1. The job's node is host_name.",
			Record:  "slurm_job_gpu:gpu_in_use:group",
			Expr: `  group by (host_name, hw_id, hw_parent, nvidia_gpu_index, hw_model, nvidia_mig_profile, ` + byJob + `) (
      nvidia_gpu_job_energy_joules_total
    or nvidia_gpu_job_memory_usage_bytes
    or nvidia_gpu_job_utilization_ratio
  )`,
		},
		{
			Comment: "GPUs (and MIG instances) each job runs on now, over all its nodes.",
			Record:  "slurm_job:gpu_count:count",
			Expr:    `count by (` + byJob + `) (slurm_job_gpu:gpu_in_use:group)`,
		},
		{
			Comment: "GPU-hours over the trailing hour, for chargeback: for each (GPU, job) series, the share of the node's collections in the hour that carried it (the node's nvidia_nvml_available counts them). A job that ended within the hour keeps its share. Slurm's allocation is not visible to the agent: a GPU counts while the job runs a process on it.",
			Record:  "slurm_job:gpu_hours:sum",
			Expr:    heldHours(byJob, "nvidia_gpu_job_energy_joules_total", "nvidia_gpu_job_memory_usage_bytes", "nvidia_gpu_job_utilization_ratio"),
		},
		{
			Comment: "GPU-hours actually used over the trailing hour: the job's SM utilization integrated over the hour (one GPU kept 50 % busy for the hour is 0.5). Absent for jobs on MIG instances only (NVML has no per-process utilization under MIG).",
			Record:  "slurm_job:gpu_used_hours:sum",
			Expr: `  sum by (` + byJob + `) (
      sum_over_time(nvidia_gpu_job_utilization_ratio[1h])
    / on (host_name) group_left ()
      max by (host_name) (count_over_time(nvidia_nvml_available[1h]))
  )`,
		},
		{
			Comment: "Mean SM utilization of the job's GPUs now.",
			Record:  "slurm_job:gpu_utilization:avg",
			Expr:    `avg by (` + byJob + `) (nvidia_gpu_job_utilization_ratio)`,
		},
		{
			Comment: "Framebuffer the job's processes use now, over all its GPUs.",
			Record:  "slurm_job:gpu_memory_usage_bytes:sum",
			Expr:    `sum by (` + byJob + `) (nvidia_gpu_job_memory_usage_bytes)`,
		},
		{
			Comment: "Energy the job used on GPUs over the trailing hour, in kWh (its share of each GPU's energy, by SM share where the GPU is shared).",
			Record:  "slurm_job:gpu_energy_kwh:sum",
			Expr:    `sum by (` + byJob + `) (increase(nvidia_gpu_job_energy_joules_total[1h])) / 3.6e6`,
		},
		{
			Comment: "Mean GPU power of the job over the last 5 minutes, in W.",
			Record:  "slurm_job:gpu_power_watts:sum_rate5m",
			Expr:    `sum by (` + byJob + `) (rate(nvidia_gpu_job_energy_joules_total[5m]))`,
		},
	}}
}
