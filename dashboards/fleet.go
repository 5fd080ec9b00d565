package dashboards

import (
	g "github.com/otelcol-gpu/otelcol-gpu/dashboards/internal/grafana"
)

func fleetOverview() *g.Dashboard {
	d := newDashboard("gpu-fleet-overview", "GPU fleet overview",
		"Every GPU of the cluster at a glance: how many, how busy, how much power, what is firing, how utilization is spread, what is allocated but idle, and how fragmented allocation is.",
		clusterVar())
	s := scope{mCluster}
	util := s.sel("hw_gpu_utilization_ratio", mGeneral)
	idle := s.sel("nvidia_gpu_idle_while_allocated")
	withPods := "count(count by (host_name, hw_id) (" + podsOnGPUs(s) + "))"

	d.Row("Fleet now", false)
	d.Add(3, 4,
		g.Stat("GPUs", g.UnitShort, g.Instant("sum("+s.sel("nvidia_gpu_count")+")", "")).
			Describe("GPUs the gpu receivers discover and read (after their device filters), summed over nodes."),
		g.Stat("GPU nodes", g.UnitShort, g.Instant("count(count by (host_name) ("+s.sel("nvidia_nvml_available")+"))", "")).
			Describe("Nodes whose collector reports NVML availability."),
		g.Stat("Nodes without NVML", g.UnitShort, g.Instant("count("+s.sel("nvidia_nvml_available")+" == 0) or vector(0)", "")).
			Describe("Nodes where NVML cannot be initialised (driver or library missing): their GPUs are not measured.").
			Thresholds(badIfAny).Background(),
		g.Stat("Average utilization", g.UnitRatio, g.Instant("avg("+util+")", "")).
			Describe("Mean GPU utilization over GPUs that report it (NVML reports none for a GPU in MIG mode).").
			Thresholds(utilizationSteps).Range(0, 1),
		g.Stat("Framebuffer in use", g.UnitRatio, g.Instant("sum("+s.sel("hw_gpu_memory_usage_bytes", mPhysical)+") / sum("+s.sel("hw_gpu_memory_limit_bytes", mPhysical)+")", "")).
			Describe("Framebuffer allocated over framebuffer installed, all GPUs.").
			Thresholds(fillSteps).Range(0, 1),
		g.Stat("Power draw", g.UnitWatt, g.Instant("sum("+s.sel("hw_power_watts")+")", "")).
			Describe("Board power of all GPUs."),
		g.Stat("GPU alerts firing", g.UnitShort, g.Instant("count("+s.sel("ALERTS", mFiring, mGPUAlerts)+") or vector(0)", "")).
			Describe("Alerts named GPU* firing now (see the Alerts & health dashboard).").
			Thresholds(badIfAny).Background(),
		g.Stat("Unhealthy GPUs", g.UnitShort, g.Instant("count("+s.sel("hw_status", `hw_state!="ok"`)+" == 1) or vector(0)", "")).
			Describe("GPUs whose health (hw_status) is degraded or failed.").
			Thresholds(badIfAny).Background(),
	)

	d.Row("Utilization", false)
	d.Add(24, 12,
		g.Heatmap("GPU utilization, last 24 h", g.UnitRatio, g.Query("avg by ("+byGPU+") (avg_over_time("+util+"[$__interval]))", lGPU)).
			Describe("One row per GPU, one cell per interval: mean utilization. Dark rows are GPUs that sat idle; GPUs in MIG mode have no row (see the MIG dashboard).").
			WithTimeFrom("24h").WithInterval("5m"),
	)
	d.Add(12, 9,
		g.BarGauge("Utilization distribution (now)", g.UnitShort, buckets(util)...).
			Describe("How many GPUs sit in each 10 % utilization bucket right now.").
			Vertical().Decimals(0).Thresholds(g.Steps("blue")),
		g.TimeSeries("Utilization percentiles", g.UnitRatio,
			g.Query("quantile(0.1, "+util+")", "p10"),
			g.Query("quantile(0.5, "+util+")", "median"),
			g.Query("quantile(0.9, "+util+")", "p90"),
			g.Query("avg("+util+")", "mean"),
		).Describe("Spread of utilization across GPUs over time.").Range(0, 1),
	)
	d.Add(24, 8,
		g.TimeSeries("Utilization by node", g.UnitRatio, g.Query("avg by (host_name) ("+util+")", "{{host_name}}")).
			Describe("Mean GPU utilization per node.").Range(0, 1),
	)

	d.Row("Waste: allocated but idle", false)
	d.Add(4, 8,
		g.Stat("Idle while allocated", g.UnitShort, g.Instant("sum("+idle+") or vector(0)", "")).
			Describe("GPUs and MIG instances a pod holds while their utilization stayed under the idle threshold for the whole idle window.").
			Thresholds(warnIfAny).Background(),
		g.Stat("Share of allocated GPUs idle", g.UnitRatio, g.Instant("sum("+idle+") / "+withPods, "")).
			Describe("Idle-while-allocated GPUs over GPUs (and MIG instances) with at least one pod on them.").
			Thresholds(g.Steps("green", 0.1, "orange", 0.25, "red")).Range(0, 1),
		g.Stat("GPU-hours idle while allocated", g.UnitHours, g.Instant("sum(avg_over_time("+idle+"[$__range])) * $__range_s / 3600", "")).
			Describe("GPU-hours spent allocated and idle over the dashboard's time range.").Decimals(1),
	)
	d.Add(12, 8,
		g.TimeSeries("Idle while allocated over time", g.UnitShort,
			g.Query("sum("+idle+")", "idle while allocated"),
			g.Query(withPods, "with a pod"),
		).Describe("GPUs idle while allocated, next to all GPUs with a pod.").MinZero(),
	)
	d.Add(24, 8,
		g.Table("Idle while allocated, now", g.UnitShort,
			g.TableQuery("max by ("+byModel+", k8s_namespace_name, k8s_pod_name) ("+idle+" == 1)")).
			Describe("Who holds an idle GPU. A GPU shared by several pods carries no pod labels: look it up on the Workloads dashboard.").
			Hide("Value").
			Columns("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_id", "UUID", "hw_model", "Model", "k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod"),
	)

	d.Row("Fragmentation: allocatable vs allocated", false)
	free := s.sel("nvidia_gpu_devices_allocatable") + " - " + s.sel("nvidia_gpu_devices_allocated")
	byRes := "sum by (nvidia_gpu_resource_name) "
	d.Add(24, 7,
		g.Table("Devices by resource name", g.UnitShort,
			g.TableQuery(byRes+"("+s.sel("nvidia_gpu_devices_allocatable")+")"),
			g.TableQuery(byRes+"("+s.sel("nvidia_gpu_devices_allocated")+")"),
			g.TableQuery(byRes+"("+free+")"),
			g.TableQuery("max by (nvidia_gpu_resource_name) ("+free+")"),
			g.TableQuery("count by (nvidia_gpu_resource_name) (("+free+") > 0)"),
			g.TableQuery(byRes+"("+s.sel("nvidia_gpu_devices_allocated")+") / "+byRes+"("+s.sel("nvidia_gpu_devices_allocatable")+")"),
		).Describe("Per resource name (nvidia.com/gpu, MIG slices, time-slicing replicas): what nodes can hand out, what is handed out, and how the free devices are spread. Free in total but few on the best node means a multi-GPU pod cannot be scheduled: fragmentation.").
			Columns("nvidia_gpu_resource_name", "Resource", "Value #A", "Allocatable", "Value #B", "Allocated", "Value #C", "Free", "Value #D", "Most free on one node", "Value #E", "Nodes with free devices", "Value #F", "Allocated share").
			OverrideField("Value #F", g.Unit(g.UnitRatio), g.CellGauge(), g.Min(0), g.Max(1)),
	)
	d.Add(12, 8,
		g.TimeSeries("Allocated vs allocatable", g.UnitShort,
			g.Query(byRes+"("+s.sel("nvidia_gpu_devices_allocatable")+")", "{{nvidia_gpu_resource_name}} allocatable"),
			g.Query(byRes+"("+s.sel("nvidia_gpu_devices_allocated")+")", "{{nvidia_gpu_resource_name}} allocated"),
		).Describe("Allocatable (dashed) and allocated devices per resource name.").MinZero().
			OverrideQuery("A", g.Dashed()...),
		g.BarGauge("Free devices per node", g.UnitShort,
			g.Instant("sum by (host_name, nvidia_gpu_resource_name) ("+free+")", "{{host_name}} {{nvidia_gpu_resource_name}}")).
			Describe("Devices each node can still hand out, per resource name.").Decimals(0).
			Thresholds(g.Steps("text", 1, "green")),
	)
	return d
}
