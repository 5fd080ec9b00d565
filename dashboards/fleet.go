package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

func fleetOverview() *dashboard.DashboardBuilder {
	d := newDashboard("gpu-fleet-overview", "GPU fleet overview",
		"Every GPU of the cluster at a glance: how many, how busy, how much power, what is firing, how utilization is spread, what is allocated but idle, and how fragmented allocation is.",
		clusterVar())
	s := scope{mCluster}
	util := s.sel("hw_gpu_utilization_ratio", mGeneral)
	idle := s.sel("nvidia_gpu_idle_while_allocated")
	withPods := "count(count by (host_name, hw_id) (" + podsOnGPUs(s) + "))"

	d.WithRow(row("Fleet now"))
	add(d, 3, 4,
		statPanel("GPUs", units.Short, instant("sum("+s.sel("nvidia_gpu_count")+")", "")).
			Description("GPUs the gpu receivers discover and read (after their device filters), summed over nodes."),
		statPanel("GPU nodes", units.Short, instant("count(count by (host_name) ("+s.sel("nvidia_nvml_available")+"))", "")).
			Description("Nodes whose collector reports NVML availability."),
		statPanel("Nodes without NVML", units.Short, instant("count("+s.sel("nvidia_nvml_available")+" == 0) or vector(0)", "")).
			Description("Nodes where NVML cannot be initialised (driver or library missing): their GPUs are not measured.").
			Thresholds(badIfAny()).ColorMode(background),
		statPanel("Average utilization", units.PercentUnit, instant("avg("+util+")", "")).
			Description("Mean GPU utilization over GPUs that report it (NVML reports none for a GPU in MIG mode).").
			Thresholds(utilizationScale()).Min(0).Max(1),
		statPanel("Framebuffer in use", units.PercentUnit, instant("sum("+s.sel("hw_gpu_memory_usage_bytes", mPhysical)+") / sum("+s.sel("hw_gpu_memory_limit_bytes", mPhysical)+")", "")).
			Description("Framebuffer allocated over framebuffer installed, all GPUs.").
			Thresholds(framebufferScale()).Min(0).Max(1),
		statPanel("Power draw", units.Watt, instant("sum("+s.sel("hw_power_watts")+")", "")).
			Description("Board power of all GPUs."),
		statPanel("GPU alerts firing", units.Short, instant("count("+s.sel("ALERTS", mFiring, mGPUAlerts)+") or vector(0)", "")).
			Description("Alerts named GPU* firing now (see the Alerts & health dashboard).").
			Thresholds(badIfAny()).ColorMode(background),
		statPanel("Unhealthy GPUs", units.Short, instant("count("+s.sel("hw_status", `hw_state!="ok"`)+" == 1) or vector(0)", "")).
			Description("GPUs whose health (hw_status) is degraded or failed.").
			Thresholds(badIfAny()).ColorMode(background),
	)

	d.WithRow(row("Utilization"))
	add(d, 24, 12,
		heatmapPanel("GPU utilization, last 24 h", units.PercentUnit, query("avg by ("+byGPU+") (avg_over_time("+util+"[$__interval]))", lGPU)).
			Description("One row per GPU, one cell per interval: mean utilization. Dark rows are GPUs that sat idle; GPUs in MIG mode have no row (see the MIG dashboard).").
			TimeFrom("24h").Interval("5m"),
	)
	add(d, 12, 9,
		barGauge("Utilization distribution (now)", units.Short, buckets(util)...).
			Description("How many GPUs sit in each 10 % utilization bucket right now.").
			Orientation(common.VizOrientationVertical).Decimals(0).Thresholds(plain()),
		timeSeries("Utilization percentiles", units.PercentUnit,
			query("quantile(0.1, "+util+")", "p10"),
			query("quantile(0.5, "+util+")", "median"),
			query("quantile(0.9, "+util+")", "p90"),
			query("avg("+util+")", "mean"),
		).Description("Spread of utilization across GPUs over time.").Min(0).Max(1),
	)
	add(d, 24, 8,
		timeSeries("Utilization by node", units.PercentUnit, query("avg by (host_name) ("+util+")", "{{host_name}}")).
			Description("Mean GPU utilization per node.").Min(0).Max(1),
	)

	d.WithRow(row("Waste: allocated but idle"))
	add(d, 4, 8,
		statPanel("Idle while allocated", units.Short, instant("sum("+idle+") or vector(0)", "")).
			Description("GPUs and MIG instances a pod holds while their utilization stayed under the idle threshold for the whole idle window.").
			Thresholds(warnIfAny()).ColorMode(background),
		statPanel("Share of allocated GPUs idle", units.PercentUnit, instant("sum("+idle+") / "+withPods, "")).
			Description("Idle-while-allocated GPUs over GPUs (and MIG instances) with at least one pod on them.").
			Thresholds(scale("green", step{0.1, "orange"}, step{0.25, "red"})).Min(0).Max(1),
		statPanel("GPU-hours idle while allocated", units.Hours, instant("sum(avg_over_time("+idle+"[$__range])) * $__range_s / 3600", "")).
			Description("GPU-hours spent allocated and idle over the dashboard's time range.").Decimals(1),
	)
	add(d, 12, 8,
		timeSeries("Idle while allocated over time", units.Short,
			query("sum("+idle+")", "idle while allocated"),
			query(withPods, "with a pod"),
		).Description("GPUs idle while allocated, next to all GPUs with a pod.").Min(0),
	)
	add(d, 24, 8,
		tablePanel("Idle while allocated, now", units.Short,
			cols("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_id", "UUID", "hw_model", "Model", "k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod").hiding("Value"),
			tableQuery("max by ("+byModel+", k8s_namespace_name, k8s_pod_name) ("+idle+" == 1)")).
			Description("Who holds an idle GPU. A GPU shared by several pods carries no pod labels: look it up on the Workloads dashboard."),
	)

	d.WithRow(row("Fragmentation: allocatable vs allocated"))
	free := s.sel("nvidia_gpu_devices_allocatable") + " - " + s.sel("nvidia_gpu_devices_allocated")
	byRes := "sum by (nvidia_gpu_resource_name) "
	add(d, 24, 7,
		tablePanel("Devices by resource name", units.Short,
			cols("nvidia_gpu_resource_name", "Resource", "Value #A", "Allocatable", "Value #B", "Allocated", "Value #C", "Free", "Value #D", "Most free on one node", "Value #E", "Nodes with free devices", "Value #F", "Allocated share"),
			tableQuery(byRes+"("+s.sel("nvidia_gpu_devices_allocatable")+")"),
			tableQuery(byRes+"("+s.sel("nvidia_gpu_devices_allocated")+")"),
			tableQuery(byRes+"("+free+")"),
			tableQuery("max by (nvidia_gpu_resource_name) ("+free+")"),
			tableQuery("count by (nvidia_gpu_resource_name) (("+free+") > 0)"),
			tableQuery(byRes+"("+s.sel("nvidia_gpu_devices_allocated")+") / "+byRes+"("+s.sel("nvidia_gpu_devices_allocatable")+")"),
		).Description("Per resource name (nvidia.com/gpu, MIG slices, time-slicing replicas): what nodes can hand out, what is handed out, and how the free devices are spread. Free in total but few on the best node means a multi-GPU pod cannot be scheduled: fragmentation.").
			OverrideByName("Value #F", props(unitProp(units.PercentUnit), cellGauge(), minProp(0), maxProp(1))),
	)
	add(d, 12, 8,
		timeSeries("Allocated vs allocatable", units.Short,
			query(byRes+"("+s.sel("nvidia_gpu_devices_allocatable")+")", "{{nvidia_gpu_resource_name}} allocatable"),
			query(byRes+"("+s.sel("nvidia_gpu_devices_allocated")+")", "{{nvidia_gpu_resource_name}} allocated"),
		).Description("Allocatable (dashed) and allocated devices per resource name.").Min(0).
			OverrideByQuery("A", dashed()),
		barGauge("Free devices per node", units.Short,
			instant("sum by (host_name, nvidia_gpu_resource_name) ("+free+")", "{{host_name}} {{nvidia_gpu_resource_name}}")).
			Description("Devices each node can still hand out, per resource name.").Decimals(0).
			Thresholds(scale("text", step{1, "green"})),
	)
	return d
}
