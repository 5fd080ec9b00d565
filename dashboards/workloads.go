package dashboards

import (
	g "github.com/otelcol-gpu/otelcol-gpu/dashboards/internal/grafana"
)

func workloads() *g.Dashboard {
	d := newDashboard("gpu-workloads", "GPU workloads",
		"GPUs per namespace and pod: utilization, framebuffer and leak trend, energy, idle-while-allocated, bottleneck class, and the pods' CPU next to their GPU utilization to spot data-loader starvation.",
		clusterVar(), namespaceVar(), podVar())
	// Per-pod series (nvidia_gpu_pod_*, and the pod's leak trend) always carry the pod; a
	// GPU's own series carry it when one pod holds the GPU alone.
	s := scope{mCluster, mNamespace, mPod, mAttached}
	podUtil := s.sel("nvidia_gpu_pod_utilization_ratio")
	podMem := s.sel("nvidia_gpu_pod_memory_usage_bytes")
	podEnergy := s.sel("nvidia_gpu_pod_energy_joules_total")
	byPodGPU := byPod + ", k8s_container_name, " + byGPU
	maxBy := func(by, sel string) string { return "max by (" + by + ") (" + sel + ")" }

	d.Row("Overview", false)
	d.Add(4, 4,
		g.Stat("Pods on GPUs", g.UnitShort, g.Instant("count(count by ("+byPod+") ("+podsOnGPUs(s)+"))", "")).
			Describe("Pods on a GPU or MIG instance.").NoValue("0"),
		g.Stat("GPUs in use", g.UnitShort, g.Instant("count(count by (host_name, hw_id) ("+podsOnGPUs(s)+"))", "")).
			Describe("GPUs and MIG instances these pods run on.").NoValue("0"),
		g.Stat("Mean pod GPU utilization", g.UnitRatio, g.Instant("avg("+podUtil+")", "")).
			Describe("Mean share of the interval the pods kept their GPUs' SMs busy.").Thresholds(utilizationSteps).Range(0, 1),
		g.Stat("Framebuffer used", g.UnitBytes, g.Instant("sum("+podMem+")", "")).
			Describe("Framebuffer the pods use, summed."),
		g.Stat("GPU power", g.UnitWatt, g.Instant("sum(rate("+podEnergy+"[$__rate_interval]))", "")).
			Describe("GPU power attributed to the pods (a shared GPU's power split by SM share)."),
		g.Stat("Suspected leaks", g.UnitShort, g.Instant("count("+maxBy(byPod+", hw_id", s.sel("nvidia_gpu_pod_memory_leak_suspected"))+" == 1) or vector(0)", "")).
			Describe("Pods whose framebuffer grew persistently over the leak window while utilization stayed steady.").
			Thresholds(warnIfAny).Background(),
	)

	d.Row("GPU utilization", false)
	d.Add(12, 8,
		g.TimeSeries("GPU utilization by pod", g.UnitRatio, g.Query("avg by ("+byPod+") ("+podUtil+")", lPod)).
			Describe("Share of the interval the pod kept its GPUs' SMs busy, averaged over its GPUs.").Range(0, 1),
		g.TimeSeries("GPU utilization by namespace", g.UnitRatio, g.Query("avg by (k8s_namespace_name) ("+podUtil+")", "{{k8s_namespace_name}}")).
			Describe("Mean over the namespace's pods and GPUs.").Range(0, 1),
	)
	d.Add(24, 9,
		g.Table("Pods on GPUs now", g.UnitShort,
			g.TableQuery(maxBy(byPodGPU, podUtil)),
			g.TableQuery(maxBy(byPodGPU, podMem)),
			g.TableQuery("sum by ("+byPodGPU+") (rate("+podEnergy+"[$__rate_interval]))"),
			g.TableQuery(maxBy(byPodGPU, s.sel("nvidia_gpu_pod_memory_growth_rate_bytes_per_second"))),
		).Describe("One row per pod and GPU (or MIG instance).").
			Hide("hw_id").
			Columns("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU",
				"Value #A", "Utilization", "Value #B", "Framebuffer", "Value #C", "Power", "Value #D", "Framebuffer growth").
			OverrideField("Value #A", g.Unit(g.UnitRatio), g.CellGauge(), g.Min(0), g.Max(1), g.FieldThresholds(utilizationSteps)).
			OverrideField("Value #B", g.Unit(g.UnitBytes)).
			OverrideField("Value #C", g.Unit(g.UnitWatt)).
			OverrideField("Value #D", g.Unit(g.UnitBytesPS)),
	)

	d.Row("CPU next to GPU: data-loader starvation", false)
	// cAdvisor's series name the pod namespace and pod; keep only pods that are on a GPU.
	gpuPods := `label_replace(label_replace(group by (` + byPod + `) (` + podsOnGPUs(s) + `), "namespace", "$1", "k8s_namespace_name", "(.*)"), "pod", "$1", "k8s_pod_name", "(.*)")`
	cpu := `sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{` + mCluster + `, namespace=~"$namespace", pod=~"$pod", container!="", container!="POD"}[$__rate_interval])) and on (namespace, pod) ` + gpuPods
	d.Add(24, 10,
		g.TimeSeries("Container CPU next to GPU utilization", g.UnitRatio,
			g.Query("avg by ("+byPod+") ("+podUtil+")", lPod+" GPU"),
			g.Query(cpu, "{{namespace}}/{{pod}} CPU cores"),
		).Describe("GPU utilization (left, solid) and the pod's CPU use in cores (right, dashed, from cAdvisor). Low GPU utilization while the CPU is pinned at its limit means the input pipeline (data loading, preprocessing) starves the GPU.").
			MinZero().SoftMax(1).
			OverrideQuery("B", append(g.Dashed(), g.Unit(g.UnitShort), g.RightAxis(), map[string]any{"id": "custom.axisLabel", "value": "CPU cores"})...),
	)

	d.Row("Bottleneck and waste", false)
	bottleneck := s.sel("nvidia_gpu_bottleneck") + " == 1"
	idle := s.sel("nvidia_gpu_idle_while_allocated")
	d.Add(8, 8,
		g.BarGauge("GPUs by bottleneck class", g.UnitShort,
			g.Instant("count by (nvidia_gpu_bottleneck_class) ("+maxBy("host_name, hw_id, nvidia_gpu_bottleneck_class", bottleneck)+")", "{{nvidia_gpu_bottleneck_class}}")).
			Describe("compute_bound: SMs saturated; memory_bound: DRAM or copy engines saturated; starved: busy but neither saturated (waiting for input); idle. For GPUs held by one pod.").
			Decimals(0).Thresholds(g.Steps("blue")),
	)
	d.Add(16, 8,
		g.Table("Bottleneck class by pod", g.UnitShort,
			g.TableQuery(maxBy(byPodGPU+", nvidia_gpu_bottleneck_class", bottleneck))).
			Describe("The current bottleneck class of each pod's GPU (GPUs held by one pod).").
			Hide("Value", "hw_id").
			Columns("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU", "nvidia_gpu_bottleneck_class", "Bottleneck"),
	)
	d.Add(12, 8,
		g.TimeSeries("Idle while allocated, by namespace", g.UnitShort, g.Query("sum by (k8s_namespace_name) ("+idle+")", "{{k8s_namespace_name}}")).
			Describe("GPUs a pod holds but leaves idle for the whole idle window. A GPU shared by several pods carries no pod, so it shows on the Fleet overview only.").
			Stacked().Decimals(0),
		g.Table("Idle while allocated, now", g.UnitShort, g.TableQuery(maxBy(byPodGPU, idle+" == 1"))).
			Describe("Pods holding an idle GPU.").
			Hide("Value", "hw_id").
			Columns("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU"),
	)

	d.Row("Framebuffer and leak trend", false)
	growth := s.sel("nvidia_gpu_pod_memory_growth_rate_bytes_per_second")
	d.Add(12, 8,
		g.TimeSeries("Framebuffer by pod", g.UnitBytes, g.Query("sum by ("+byPod+") ("+podMem+")", lPod)).
			Describe("Framebuffer the pod's processes use, over all its GPUs.").MinZero(),
		g.TimeSeries("Framebuffer growth rate by pod", g.UnitBytesPS, g.Query(maxBy(byPod+", "+byGPU, growth), lPod+" on "+lGPU)).
			Describe("Least-squares slope of the pod's framebuffer over the leak window, per GPU."),
	)
	d.Add(24, 6,
		g.Table("Suspected leaks", g.UnitBytesPS,
			g.TableQuery(maxBy(byPodGPU, growth)+" and on ("+byPodGPU+") ("+maxBy(byPodGPU, s.sel("nvidia_gpu_pod_memory_leak_suspected"))+" == 1)")).
			Describe("Pods whose framebuffer grew in at least 90 % of the steps of the leak window, by at least the minimum growth, while utilization stayed steady; with their growth rate.").
			Hide("hw_id").
			Columns("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU", "Value", "Growth rate"),
	)

	d.Row("Energy", false)
	d.Add(12, 8,
		g.TimeSeries("GPU power by pod", g.UnitWatt, g.Query("sum by ("+byPod+") (rate("+podEnergy+"[$__rate_interval]))", lPod)).
			Describe("Rate of the pod's GPU energy: an exclusive GPU's whole power, a shared GPU's split by SM share (not available on MIG instances).").
			Stacked().MinZero(),
	)
	d.Add(6, 8,
		g.BarGauge("Energy by namespace (time range)", g.UnitKWh,
			g.Instant("sum by (k8s_namespace_name) (increase("+podEnergy+"[$__range])) / 3600000", "{{k8s_namespace_name}}")).
			Describe("GPU energy per namespace over the dashboard's time range.").Thresholds(g.Steps("blue")),
		g.BarGauge("Top 10 pods by energy (time range)", g.UnitKWh,
			g.Instant("topk(10, sum by ("+byPod+") (increase("+podEnergy+"[$__range]))) / 3600000", lPod)).
			Describe("GPU energy per pod over the dashboard's time range.").Thresholds(g.Steps("blue")),
	)
	return d
}
