package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

func workloads() *dashboard.DashboardBuilder {
	d := newDashboard("gpu-workloads", "GPU workloads",
		"GPUs per namespace and pod: utilization, framebuffer and leak trend, energy, idle-while-allocated, bottleneck class, and the pods' CPU next to their GPU utilization to spot data-loader starvation; and per Slurm job on bare-metal nodes: utilization, framebuffer, power, GPUs and GPU-hours.",
		clusterVar(), namespaceVar(), podVar(), slurmJobVar(), slurmSLUIDVar())
	// Per-pod series (nvidia_gpu_pod_*, and the pod's leak trend) always carry the pod; a
	// GPU's own series carry it when one pod holds the GPU alone.
	s := scope{mCluster, mNamespace, mPod, mAttached}
	podUtil := s.sel("nvidia_gpu_pod_utilization_ratio")
	podMem := s.sel("nvidia_gpu_pod_memory_usage_bytes")
	podEnergy := s.sel("nvidia_gpu_pod_energy_joules_total")
	byPodGPU := byPod + ", k8s_container_name, " + byGPU
	maxBy := func(by, sel string) string { return "max by (" + by + ") (" + sel + ")" }

	d.WithRow(row("Overview"))
	add(d, 4, 4,
		statPanel("Pods on GPUs", units.Short, instant("count(count by ("+byPod+") ("+podsOnGPUs(s)+"))", "")).
			Description("Pods on a GPU or MIG instance.").NoValue("0"),
		statPanel("GPUs in use", units.Short, instant("count(count by (host_name, hw_id) ("+podsOnGPUs(s)+"))", "")).
			Description("GPUs and MIG instances these pods run on.").NoValue("0"),
		statPanel("Mean pod GPU utilization", units.PercentUnit, instant("avg("+podUtil+")", "")).
			Description("Mean share of the interval the pods kept their GPUs' SMs busy.").Thresholds(utilizationScale()).Min(0).Max(1),
		statPanel("Framebuffer used", units.BytesIEC, instant("sum("+podMem+")", "")).
			Description("Framebuffer the pods use, summed."),
		statPanel("GPU power", units.Watt, instant("sum(rate("+podEnergy+"[$__rate_interval]))", "")).
			Description("GPU power attributed to the pods (a shared GPU's power split by SM share)."),
		statPanel("Suspected leaks", units.Short, instant("count("+maxBy(byPod+", hw_id", s.sel("nvidia_gpu_pod_memory_leak_suspected"))+" == 1) or vector(0)", "")).
			Description("Pods whose framebuffer grew persistently over the leak window while utilization stayed steady.").
			Thresholds(warnIfAny()).ColorMode(background),
	)

	d.WithRow(row("GPU utilization"))
	add(d, 12, 8,
		timeSeries("GPU utilization by pod", units.PercentUnit, query("avg by ("+byPod+") ("+podUtil+")", lPod)).
			Description("Share of the interval the pod kept its GPUs' SMs busy, averaged over its GPUs.").Min(0).Max(1),
		timeSeries("GPU utilization by namespace", units.PercentUnit, query("avg by (k8s_namespace_name) ("+podUtil+")", "{{k8s_namespace_name}}")).
			Description("Mean over the namespace's pods and GPUs.").Min(0).Max(1),
	)
	add(d, 24, 9,
		tablePanel("Pods on GPUs now", units.Short,
			cols("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU",
				"Value #A", "Utilization", "Value #B", "Framebuffer", "Value #C", "Power", "Value #D", "Framebuffer growth").hiding("hw_id"),
			tableQuery(maxBy(byPodGPU, podUtil)),
			tableQuery(maxBy(byPodGPU, podMem)),
			tableQuery("sum by ("+byPodGPU+") (rate("+podEnergy+"[$__rate_interval]))"),
			tableQuery(maxBy(byPodGPU, s.sel("nvidia_gpu_pod_memory_growth_rate_bytes_per_second"))),
		).Description("One row per pod and GPU (or MIG instance).").
			OverrideByName("Value #A", ratioGauge(utilizationScale())).
			OverrideByName("Value #B", props(unitProp(units.BytesIEC))).
			OverrideByName("Value #C", props(unitProp(units.Watt))).
			OverrideByName("Value #D", props(unitProp(units.BytesPerSecondIEC))),
	)

	d.WithRow(row("CPU next to GPU: data-loader starvation"))
	// cAdvisor's series name the pod namespace and pod; keep only pods that are on a GPU.
	gpuPods := `label_replace(label_replace(group by (` + byPod + `) (` + podsOnGPUs(s) + `), "namespace", "$1", "k8s_namespace_name", "(.*)"), "pod", "$1", "k8s_pod_name", "(.*)")`
	cpu := `sum by (namespace, pod) (rate(container_cpu_usage_seconds_total{` + mCluster + `, namespace=~"$namespace", pod=~"$pod", container!="", container!="POD"}[$__rate_interval])) and on (namespace, pod) ` + gpuPods
	add(d, 24, 10,
		timeSeries("Container CPU next to GPU utilization", units.PercentUnit,
			query("avg by ("+byPod+") ("+podUtil+")", lPod+" GPU"),
			query(cpu, "{{namespace}}/{{pod}} CPU cores"),
		).Description("GPU utilization (left, solid) and the pod's CPU use in cores (right, dashed, from cAdvisor). Low GPU utilization while the CPU is pinned at its limit means the input pipeline (data loading, preprocessing) starves the GPU.").
			Min(0).AxisSoftMax(1).
			OverrideByQuery("B", dashed(unitProp(units.Short), prop("custom.axisPlacement", "right"), prop("custom.axisLabel", "CPU cores"))),
	)

	d.WithRow(row("Bottleneck and waste"))
	bottleneck := s.sel("nvidia_gpu_bottleneck") + " == 1"
	idle := s.sel("nvidia_gpu_idle_while_allocated")
	add(d, 8, 8,
		barGauge("GPUs by bottleneck class", units.Short,
			instant("count by (nvidia_gpu_bottleneck_class) ("+maxBy("host_name, hw_id, nvidia_gpu_bottleneck_class", bottleneck)+")", "{{nvidia_gpu_bottleneck_class}}")).
			Description("compute_bound: SMs saturated; memory_bound: DRAM or copy engines saturated; starved: busy but neither saturated (waiting for input); idle. For GPUs held by one pod.").
			Decimals(0).Thresholds(plain()),
	)
	add(d, 16, 8,
		tablePanel("Bottleneck class by pod", units.Short,
			cols("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU", "nvidia_gpu_bottleneck_class", "Bottleneck").hiding("Value", "hw_id"),
			tableQuery(maxBy(byPodGPU+", nvidia_gpu_bottleneck_class", bottleneck))).
			Description("The current bottleneck class of each pod's GPU (GPUs held by one pod)."),
	)
	add(d, 12, 8,
		timeSeries("Idle while allocated, by namespace", units.Short, query("sum by (k8s_namespace_name) ("+idle+")", "{{k8s_namespace_name}}")).
			Description("GPUs a pod holds but leaves idle for the whole idle window. A GPU shared by several pods carries no pod, so it shows on the Fleet overview only.").
			Stacking(normalStack()).FillOpacity(60).Decimals(0),
		tablePanel("Idle while allocated, now", units.Short,
			cols("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU").hiding("Value", "hw_id"),
			tableQuery(maxBy(byPodGPU, idle+" == 1"))).
			Description("Pods holding an idle GPU."),
	)

	d.WithRow(row("Framebuffer and leak trend"))
	growth := s.sel("nvidia_gpu_pod_memory_growth_rate_bytes_per_second")
	add(d, 12, 8,
		timeSeries("Framebuffer by pod", units.BytesIEC, query("sum by ("+byPod+") ("+podMem+")", lPod)).
			Description("Framebuffer the pod's processes use, over all its GPUs.").Min(0),
		timeSeries("Framebuffer growth rate by pod", units.BytesPerSecondIEC, query(maxBy(byPod+", "+byGPU, growth), lPod+" on "+lGPU)).
			Description("Least-squares slope of the pod's framebuffer over the leak window, per GPU."),
	)
	add(d, 24, 6,
		tablePanel("Suspected leaks", units.BytesPerSecondIEC,
			cols("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU", "Value", "Growth rate").hiding("hw_id"),
			tableQuery(maxBy(byPodGPU, growth)+" and on ("+byPodGPU+") ("+maxBy(byPodGPU, s.sel("nvidia_gpu_pod_memory_leak_suspected"))+" == 1)")).
			Description("Pods whose framebuffer grew in at least 90 % of the steps of the leak window, by at least the minimum growth, while utilization stayed steady; with their growth rate."),
	)

	d.WithRow(row("Energy"))
	add(d, 12, 8,
		timeSeries("GPU power by pod", units.Watt, query("sum by ("+byPod+") (rate("+podEnergy+"[$__rate_interval]))", lPod)).
			Description("Rate of the pod's GPU energy: an exclusive GPU's whole power, a shared GPU's split by SM share (not available on MIG instances).").
			Stacking(normalStack()).FillOpacity(60).Min(0),
	)
	add(d, 6, 8,
		barGauge("Energy by namespace (time range)", units.KiloWattHour,
			instant("sum by (k8s_namespace_name) (increase("+podEnergy+"[$__range])) / 3600000", "{{k8s_namespace_name}}")).
			Description("GPU energy per namespace over the dashboard's time range.").Thresholds(plain()),
		barGauge("Top 10 pods by energy (time range)", units.KiloWattHour,
			instant("topk(10, sum by ("+byPod+") (increase("+podEnergy+"[$__range]))) / 3600000", lPod)).
			Description("GPU energy per pod over the dashboard's time range.").Thresholds(plain()),
	)

	slurmJobs(d)
	return d
}
