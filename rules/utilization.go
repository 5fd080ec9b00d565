package rules

import "github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"

func utilization() Group {
	return Group{Name: "gpu-utilization", Rules: []Rule{
		{
			Alert:       "GPUUtilizationSaturated",
			Comment:     "Not a fault: tells capacity planning that the GPU is the bottleneck.",
			Expr:        `hw_gpu_utilization_ratio{hw_gpu_task="general"} > ` + num(thresholds.UtilizationSaturatedRatio),
			For:         "5m",
			Severity:    "info",
			Summary:     gpuAt + " is saturated (" + valuePercent + " busy).",
			Description: gpuModel + onNodeUsedBy + " has had a kernel running more than " + percent(thresholds.UtilizationSaturatedRatio) + " of the time for 5 minutes (now " + valuePercent + ").",
		},
		{
			Alert:   "GPUIdleWhileAllocated",
			Comment: "nvidia_gpu_idle_while_allocated is 1 once an allocated GPU (or MIG instance) has stayed under the idle threshold (default 5 %) for the processor's idle window (default 10m); 1 for another hour raises the alert. One alert per pod on the GPU (a time-sliced GPU names each of its pods), with its ResourceClaim where DRA allocated the GPU; the GPU alone where no pod is known.",
			Expr: `  (
      group by (host_name, hw_id, hw_parent, nvidia_gpu_index, hw_model, nvidia_mig_profile, k8s_namespace_name, k8s_pod_name, k8s_resourceclaim_name) (
          nvidia_gpu_pod_energy_joules_total
        or nvidia_gpu_pod_memory_usage_bytes
        or nvidia_gpu_pod_utilization_ratio
      )
    and on (host_name, hw_id)
      nvidia_gpu_idle_while_allocated == 1
  )
or
  (
      group by (host_name, hw_id, hw_parent, nvidia_gpu_index, hw_model, nvidia_mig_profile, k8s_namespace_name, k8s_pod_name, k8s_resourceclaim_name) (
        nvidia_gpu_idle_while_allocated == 1
      )
    unless on (host_name, hw_id)
      (
          nvidia_gpu_pod_energy_joules_total
        or nvidia_gpu_pod_memory_usage_bytes
        or nvidia_gpu_pod_utilization_ratio
      )
  )`,
			For:         "1h",
			Severity:    "info",
			Summary:     "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}{{ with $labels.nvidia_mig_profile }}, MIG {{ . }}{{ end }}) on {{ $labels.host_name }} is allocated{{ with $labels.k8s_pod_name }} to pod {{ $labels.k8s_namespace_name }}/{{ . }}{{ end }} but idle.",
			Description: "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}{{ with $labels.nvidia_mig_profile }}, MIG {{ . }} of GPU {{ $labels.hw_parent }}{{ end }}, {{ $labels.hw_model }}) on node {{ $labels.host_name }} is allocated{{ with $labels.k8s_pod_name }} to pod {{ $labels.k8s_namespace_name }}/{{ . }}{{ end }}{{ with $labels.k8s_resourceclaim_name }} through ResourceClaim {{ . }}{{ end }} but has stayed below the idle threshold for more than an hour. It is reserved and wasted: ask the owner to release it or scale the workload down.",
		},
		{
			Alert:   "GPULowUtilizationHighPower",
			Comment: "Under " + percent(thresholds.UtilizationLowRatio) + " busy yet over " + percent(thresholds.PowerWhileIdleRatio) + " of the power limit: a hung or spinning context, clocks locked high, or a GPU in a bad state. Value: power as a share of the limit.",
			Expr: `  (
` + indent(powerShare, "      ") + `
    > ` + num(thresholds.PowerWhileIdleRatio) + `
  )
and ignoring (hw_gpu_task)
  hw_gpu_utilization_ratio{hw_gpu_task="general"} < ` + num(thresholds.UtilizationLowRatio),
			For:         "15m",
			Severity:    "warning",
			Summary:     gpuAt + " draws " + valuePercent + " of its power limit while almost idle.",
			Description: gpuModel + onNodeUsedBy + " has been under " + percent(thresholds.UtilizationLowRatio) + " utilization while drawing more than " + percent(thresholds.PowerWhileIdleRatio) + " of its enforced power limit (now " + valuePercent + ") for 15 minutes. Look for a hung or spinning process, locked clocks, or a GPU in a bad state.",
		},
		{
			Alert:   "GPUWorkloadUtilizationDeviation",
			Comment: "Needs gpu-recording.yaml. Value: (last hour - baseline) / baseline. Fires when the pod's last-hour mean utilization differs from its 7-day baseline by more than cluster:gpu_utilization_deviation_share:threshold (" + percent(thresholds.UtilizationDeviationShare) + ") of the baseline and by more than cluster:gpu_utilization_deviation_min:threshold (" + num(thresholds.UtilizationDeviationMin) + ", i.e. " + num(thresholds.UtilizationDeviationMin*100) + " points), with at least " + num(thresholds.BaselineMinHours) + " hours of baseline history.",
			Expr: `  (
      (namespace_pod:gpu_utilization:avg1h - namespace_pod:gpu_utilization:avg7d)
    / clamp_min(namespace_pod:gpu_utilization:avg7d, 0.01)
  )
and
  (
      abs(namespace_pod:gpu_utilization:avg1h - namespace_pod:gpu_utilization:avg7d)
    > namespace_pod:gpu_utilization:avg7d * scalar(cluster:gpu_utilization_deviation_share:threshold)
  )
and
  (
      abs(namespace_pod:gpu_utilization:avg1h - namespace_pod:gpu_utilization:avg7d)
    > scalar(cluster:gpu_utilization_deviation_min:threshold)
  )
and
  namespace_pod:gpu_utilization_baseline_hours:count7d >= ` + num(thresholds.BaselineMinHours),
			For:         "30m",
			Severity:    "info",
			Summary:     "GPU utilization of pod {{ $labels.k8s_namespace_name }}/{{ $labels.k8s_pod_name }} changed by " + valuePercent + " against its 7-day baseline.",
			Description: "Over the last hour pod {{ $labels.k8s_namespace_name }}/{{ $labels.k8s_pod_name }} kept its GPUs {{ with printf \"namespace_pod:gpu_utilization:avg1h{k8s_namespace_name=%q,k8s_pod_name=%q}\" $labels.k8s_namespace_name $labels.k8s_pod_name | query }}{{ . | first | value | humanizePercentage }}{{ end }} busy against a 7-day baseline of {{ with printf \"namespace_pod:gpu_utilization:avg7d{k8s_namespace_name=%q,k8s_pod_name=%q}\" $labels.k8s_namespace_name $labels.k8s_pod_name | query }}{{ . | first | value | humanizePercentage }}{{ end }} (" + valuePercent + "): a stalled input pipeline, a hung rank, a changed batch size or a new code version. GPUs:{{ range printf \"namespace_pod_gpu:gpu_allocated:group{k8s_namespace_name=%q,k8s_pod_name=%q}\" $labels.k8s_namespace_name $labels.k8s_pod_name | query }} GPU {{ .Labels.nvidia_gpu_index }} ({{ .Labels.hw_id }}) on {{ .Labels.host_name }};{{ end }}",
		},
	}}
}
