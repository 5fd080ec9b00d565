package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

func mig() *dashboard.DashboardBuilder {
	d := newDashboard("gpu-mig", "GPU MIG instances",
		"Multi-Instance GPU: how each GPU is split, each instance's framebuffer and activity, and which pod owns each instance.",
		clusterVar(), nodeVar(), parentVar())
	// A MIG instance's hw_id is its MIG UUID; hw_parent is its GPU's UUID.
	s := scope{mCluster, mNode, mParent, mMIG}
	limit := s.sel("hw_gpu_memory_limit_bytes")
	byInstance := "host_name, nvidia_gpu_index, hw_parent, nvidia_mig_uuid, nvidia_mig_profile"
	owner := byInstance + ", k8s_namespace_name, k8s_pod_name, k8s_container_name"
	// One series per instance, whether or not a pod's labels are on it.
	perInstance := func(sel string) string { return "max by (" + byInstance + ") (" + sel + ")" }
	migResources := scope{mCluster, mNode, `nvidia_gpu_resource_name=~"nvidia.com/mig-.*"`}

	d.WithRow(row("Layout"))
	add(d, 4, 4,
		statPanel("MIG-enabled GPUs", units.Short, instant("count(count by (host_name, hw_parent) ("+limit+"))", "")).
			Description("GPUs split into MIG instances.").NoValue("0"),
		statPanel("MIG instances", units.Short, instant("count("+limit+")", "")).
			Description("MIG instances (GPU instance + compute instance) the receivers read.").NoValue("0"),
		statPanel("Instances held by a pod", units.Short, instant("count("+s.sel("hw_gpu_memory_limit_bytes", mAttached)+") or vector(0)", "")).
			Description("MIG instances the kubelet has allocated to a pod."),
		statPanel("MIG framebuffer in use", units.PercentUnit, instant("sum("+s.sel("hw_gpu_memory_usage_bytes")+") / sum("+limit+")", "")).
			Description("Framebuffer used over framebuffer of all instances.").Thresholds(framebufferScale()).Min(0).Max(1),
		statPanel("Idle while allocated", units.Short, instant("sum("+s.sel("nvidia_gpu_idle_while_allocated")+") or vector(0)", "")).
			Description("MIG instances a pod holds while their SM activity (GPM, Hopper and newer) stayed under the idle threshold.").
			Thresholds(warnIfAny()).ColorMode(background),
		statPanel("Free MIG devices", units.Short, instant("sum("+migResources.sel("nvidia_gpu_devices_allocatable")+") - sum("+migResources.sel("nvidia_gpu_devices_allocated")+")", "")).
			Description("MIG devices (nvidia.com/mig-* resources) the kubelets can still hand out.").NoValue("0"),
	)
	add(d, 12, 8,
		barGauge("Instances per GPU", units.Short, instant("count by (host_name, nvidia_gpu_index, hw_parent) ("+limit+")", lGPU)).
			Description("How many MIG instances each GPU is split into.").Decimals(0).Thresholds(plain()),
		barGauge("Instances per profile", units.Short, instant("count by (nvidia_mig_profile) ("+limit+")", "{{nvidia_mig_profile}}")).
			Description("MIG instances per profile (slices and framebuffer, e.g. 1g.10gb).").Decimals(0).Thresholds(plain()),
	)

	d.WithRow(row("Owners"))
	add(d, 24, 9,
		tablePanel("Who owns each instance", units.BytesIEC,
			cols("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_parent", "GPU UUID", "nvidia_mig_profile", "Profile", "nvidia_mig_uuid", "MIG UUID",
				"k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container",
				"Value #A", "Framebuffer used", "Value #B", "Framebuffer", "Value #C", "Used", "Value #D", "SM active"),
			tableQuery("max by ("+owner+") ("+s.sel("hw_gpu_memory_usage_bytes")+")"),
			tableQuery("max by ("+owner+") ("+s.sel("hw_gpu_memory_limit_bytes")+")"),
			tableQuery("max by ("+owner+") ("+s.sel("hw_gpu_memory_utilization_ratio")+")"),
			tableQuery("max by ("+owner+") ("+s.sel("nvidia_gpu_profiling_activity_ratio", `nvidia_gpu_profiling_metric="sm_active"`)+")"),
		).Description("One row per MIG instance with the pod the kubelet allocated it to (empty: free, or shared by several pods; see below).").
			OverrideByName("Value #C", ratioGauge(framebufferScale())).
			OverrideByName("Value #D", ratioGauge(utilizationScale())),
	)
	add(d, 24, 7,
		tablePanel("Pods on MIG instances", units.BytesIEC,
			cols("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU",
				"hw_parent", "GPU UUID", "nvidia_mig_profile", "Profile", "nvidia_mig_uuid", "MIG UUID", "Value", "Framebuffer used"),
			tableQuery("max by ("+byPod+", k8s_container_name, "+byInstance+") ("+s.sel("nvidia_gpu_pod_memory_usage_bytes")+")")).
			Description("Each pod's own framebuffer on each MIG instance it runs on."),
	)

	d.WithRow(row("Framebuffer per instance"))
	add(d, 12, 8,
		timeSeries("Framebuffer used per instance", units.BytesIEC, query(perInstance(s.sel("hw_gpu_memory_usage_bytes")), lMIG)).
			Description("Framebuffer allocated in each MIG instance.").Min(0),
		timeSeries("Framebuffer used share per instance", units.PercentUnit, query(perInstance(s.sel("hw_gpu_memory_utilization_ratio")), lMIG)).
			Description("Used over the instance's framebuffer; orange from where GPUMemoryHigh fires.").Min(0).Max(1).
			Thresholds(framebufferScale()).ThresholdsStyle(dashedThresholds()),
	)

	d.WithRow(row("Activity per instance (GPM, Hopper and newer)"))
	activity := func(metric string) string {
		return s.sel("nvidia_gpu_profiling_activity_ratio", `nvidia_gpu_profiling_metric="`+metric+`"`)
	}
	for _, m := range []struct{ title, sel, desc string }{
		{"SM active per instance", activity("sm_active"), "Share of the interval warps were resident on the instance's SMs."},
		{"Tensor core active per instance", activity("tensor_active"), "Share of cycles the instance's tensor cores were busy."},
		{"DRAM active per instance", activity("dram_active"), "Share of cycles the instance's memory was being read or written."},
		// The receiver's utilization of a MIG instance is GPM's graphics activity, on by
		// default; the graphics_active profiling series is not.
		{"Graphics active per instance", s.sel("hw_gpu_utilization_ratio", mGeneral), "Share of time the instance's compute engine was busy (the instance's GPU utilization)."},
	} {
		add(d, 12, 8, timeSeries(m.title, units.PercentUnit, query(perInstance(m.sel), lMIG)).
			Description(m.desc+" NVML reports no utilization per MIG instance; GPM does on Hopper and newer.").Min(0).Max(1))
	}
	return d
}
