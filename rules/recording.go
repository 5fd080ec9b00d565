package rules

import (
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
)

// heldHours is the GPU-hours each owner (grouped by the labels in by) held over the
// trailing hour: for each (GPU, owner) series of the per-owner metrics, the share of the
// node's collections in the hour that carried it (the node's nvidia_nvml_available,
// written at every collection, counts them), so the result does not depend on the
// collection interval.
func heldHours(by string, metrics ...string) string {
	counts := make([]string, len(metrics))
	for i, m := range metrics {
		counts[i] = "count_over_time(" + m + "[1h])"
	}
	return `  sum by (` + by + `) (
    clamp_max(
        (
            ` + strings.Join(counts, "\n          or ") + `
        )
      / on (host_name) group_left ()
        max by (host_name) (count_over_time(nvidia_nvml_available[1h])),
      1
    )
  )`
}

func allocation() Group {
	return Group{Name: "gpu-allocation.rules", Rules: []Rule{
		{
			Comment: "One series per (GPU or MIG instance, pod), value 1.",
			Record:  "namespace_pod_gpu:gpu_allocated:group",
			Expr: `  group by (host_name, hw_id, hw_parent, nvidia_gpu_index, hw_model, nvidia_mig_profile, k8s_namespace_name, k8s_pod_name) (
      nvidia_gpu_pod_energy_joules_total
    or nvidia_gpu_pod_memory_usage_bytes
    or nvidia_gpu_pod_utilization_ratio
  )`,
		},
		{
			Comment: "Devices (GPUs, MIG instances, replicas) each pod / namespace holds now.",
			Record:  "namespace_pod:gpu_allocated:count",
			Expr:    `count by (k8s_namespace_name, k8s_pod_name) (namespace_pod_gpu:gpu_allocated:group)`,
		},
		{
			Record: "namespace:gpu_allocated:count",
			Expr:   `count by (k8s_namespace_name) (namespace_pod_gpu:gpu_allocated:group)`,
		},
		{
			Comment: "GPU-hours held over the trailing hour: for each (GPU, pod) series, the share of the node's collections in the hour that carried it (the node's nvidia_nvml_available, written at every collection, counts them), so the result does not depend on the collection interval.",
			Record:  "namespace_pod:gpu_allocated_hours:sum",
			Expr:    heldHours("k8s_namespace_name, k8s_pod_name", "nvidia_gpu_pod_energy_joules_total", "nvidia_gpu_pod_memory_usage_bytes", "nvidia_gpu_pod_utilization_ratio"),
		},
		{
			Record: "namespace:gpu_allocated_hours:sum",
			Expr:   `sum by (k8s_namespace_name) (namespace_pod:gpu_allocated_hours:sum)`,
		},
		{
			Comment: "GPU-hours actually used over the trailing hour: the pod's SM utilization integrated over the hour (a pod that kept one GPU 50 % busy for the hour used 0.5 GPU-hours). Absent for pods on MIG instances (NVML has no per-process utilization under MIG).",
			Record:  "namespace_pod:gpu_used_hours:sum",
			Expr: `  sum by (k8s_namespace_name, k8s_pod_name) (
      sum_over_time(nvidia_gpu_pod_utilization_ratio[1h])
    / on (host_name) group_left ()
      max by (host_name) (count_over_time(nvidia_nvml_available[1h]))
  )`,
		},
		{
			Record: "namespace:gpu_used_hours:sum",
			Expr:   `sum by (k8s_namespace_name) (namespace_pod:gpu_used_hours:sum)`,
		},
	}}
}

func energy() Group {
	return Group{Name: "gpu-energy.rules", Rules: []Rule{
		{
			Comment: "Energy used on GPUs over the trailing hour, in kWh (1 kWh = 3.6e6 J).",
			Record:  "namespace_pod:gpu_energy_kwh:sum",
			Expr:    `sum by (k8s_namespace_name, k8s_pod_name) (increase(nvidia_gpu_pod_energy_joules_total[1h])) / 3.6e6`,
		},
		{
			Record: "namespace:gpu_energy_kwh:sum",
			Expr:   `sum by (k8s_namespace_name) (namespace_pod:gpu_energy_kwh:sum)`,
		},
		{
			Comment: "Mean GPU power per namespace over the last 5 minutes, in W.",
			Record:  "namespace:gpu_power_watts:sum_rate5m",
			Expr:    `sum by (k8s_namespace_name) (rate(nvidia_gpu_pod_energy_joules_total[5m]))`,
		},
	}}
}

func utilizationRecords() Group {
	return Group{Name: "gpu-utilization.rules", Rules: []Rule{
		{
			Comment: "Mean SM utilization over whole GPUs (MIG instances have no hw_gpu_utilization_ratio; the max by (host_name, hw_id) counts each GPU once while its pod labels change).",
			Record:  "cluster:gpu_utilization:avg",
			Expr: `  avg(
    max by (host_name, hw_id) (hw_gpu_utilization_ratio{hw_gpu_task="general",nvidia_mig_uuid=""})
  )`,
		},
		{
			Record: "hw_model:gpu_utilization:avg",
			Expr: `  avg by (hw_model) (
    max by (host_name, hw_id, hw_model) (hw_gpu_utilization_ratio{hw_gpu_task="general",nvidia_mig_uuid=""})
  )`,
		},
		{
			Comment: "Mean framebuffer use per model (whole GPUs).",
			Record:  "hw_model:gpu_memory_utilization:avg",
			Expr: `  avg by (hw_model) (
    max by (host_name, hw_id, hw_model) (hw_gpu_memory_utilization_ratio{nvidia_mig_uuid=""})
  )`,
		},
		{
			Record: "hw_model:gpu_count:count",
			Expr: `  count by (hw_model) (
    max by (host_name, hw_id, hw_model) (hw_gpu_memory_limit_bytes{nvidia_mig_uuid=""})
  )`,
		},
	}}
}

func waste() Group {
	return Group{Name: "gpu-waste.rules", Rules: []Rule{
		{
			Comment: "Devices held by the namespace that are idle while allocated.",
			Record:  "namespace:gpu_idle_allocated:count",
			Expr: `  count by (k8s_namespace_name) (
      namespace_pod_gpu:gpu_allocated:group
    and on (host_name, hw_id)
      nvidia_gpu_idle_while_allocated == 1
  )`,
		},
		{
			Comment: "Share of the devices a namespace holds that are idle (0 when none is).",
			Record:  "namespace:gpu_waste:ratio",
			Expr: `  (
      namespace:gpu_idle_allocated:count
    or
      namespace:gpu_allocated:count * 0
  )
/ namespace:gpu_allocated:count`,
		},
		{
			Comment: "Share of all allocated devices that are idle.",
			Record:  "cluster:gpu_waste:ratio",
			Expr: `  (
      count(
        group by (host_name, hw_id) (
            namespace_pod_gpu:gpu_allocated:group
          and on (host_name, hw_id)
            nvidia_gpu_idle_while_allocated == 1
        )
      )
    or
      vector(0)
  )
/ count(group by (host_name, hw_id) (namespace_pod_gpu:gpu_allocated:group))`,
		},
	}}
}

func capacity() Group {
	return Group{Name: "gpu-capacity.rules", Rules: []Rule{
		{
			Comment: "Devices (GPUs, MIG slices, replicas) per extended resource, from the kubelet.",
			Record:  "node_resource:gpu_devices_free:sum",
			Expr: `  sum by (host_name, nvidia_gpu_resource_name) (
    clamp_min(nvidia_gpu_devices_allocatable - nvidia_gpu_devices_allocated, 0)
  )`,
		},
		{
			Record: "cluster_resource:gpu_devices_allocatable:sum",
			Expr:   `sum by (nvidia_gpu_resource_name) (nvidia_gpu_devices_allocatable)`,
		},
		{
			Record: "cluster_resource:gpu_devices_allocated:sum",
			Expr:   `sum by (nvidia_gpu_resource_name) (nvidia_gpu_devices_allocated)`,
		},
		{
			Record: "cluster_resource:gpu_devices_free:sum",
			Expr:   `sum by (nvidia_gpu_resource_name) (node_resource:gpu_devices_free:sum)`,
		},
		{
			Comment: "The most devices one pod can still get on a single node.",
			Record:  "cluster_resource:gpu_devices_free:max",
			Expr:    `max by (nvidia_gpu_resource_name) (node_resource:gpu_devices_free:sum)`,
		},
		{
			Record: "cluster_resource:gpu_allocation:ratio",
			Expr: `  cluster_resource:gpu_devices_allocated:sum
/ (cluster_resource:gpu_devices_allocatable:sum > 0)`,
		},
		{
			Comment: "Fragmentation: the share of free devices that sit on nodes where some are already allocated. 0: all free capacity is on empty nodes (whole-node jobs fit); 1: every free device is on a partly used node.",
			Record:  "cluster_resource:gpu_fragmentation:ratio",
			Expr: `  (
      sum by (nvidia_gpu_resource_name) (
          node_resource:gpu_devices_free:sum
        and on (host_name, nvidia_gpu_resource_name)
          nvidia_gpu_devices_allocated > 0
      )
    or
      cluster_resource:gpu_devices_free:sum * 0
  )
/ (cluster_resource:gpu_devices_free:sum > 0)`,
		},
	}}
}

func baseline() Group {
	return Group{Name: "gpu-baseline.rules", Rules: []Rule{
		{
			Comment: "Tunables of the GPUWorkloadUtilizationDeviation alert (see rules/runbook.md): the relative deviation from the baseline, and the least absolute deviation (utilization points) that counts.",
			Record:  "cluster:gpu_utilization_deviation_share:threshold",
			Expr:    "vector(" + num(thresholds.UtilizationDeviationShare) + ")",
		},
		{
			Record: "cluster:gpu_utilization_deviation_min:threshold",
			Expr:   "vector(" + num(thresholds.UtilizationDeviationMin) + ")",
		},
		{
			Comment: "Mean SM utilization of each pod over its GPUs, now.",
			Record:  "namespace_pod:gpu_utilization:avg",
			Expr:    `avg by (k8s_namespace_name, k8s_pod_name) (nvidia_gpu_pod_utilization_ratio)`,
		},
		{
			Comment: "... over the last hour.",
			Record:  "namespace_pod:gpu_utilization:avg1h",
			Expr:    `avg_over_time(namespace_pod:gpu_utilization:avg[1h])`,
		},
		{
			Comment: "The baseline: mean of the hourly means over the 7 days before the last hour, and how many hours of history it rests on.",
			Record:  "namespace_pod:gpu_utilization:avg7d",
			Expr:    `avg_over_time(namespace_pod:gpu_utilization:avg1h[7d:1h] offset 1h)`,
		},
		{
			Record: "namespace_pod:gpu_utilization_baseline_hours:count7d",
			Expr:   `count_over_time(namespace_pod:gpu_utilization:avg1h[7d:1h] offset 1h)`,
		},
	}}
}
