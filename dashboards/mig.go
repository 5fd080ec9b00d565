package dashboards

import (
	g "github.com/otelcol-gpu/otelcol-gpu/dashboards/internal/grafana"
)

func mig() *g.Dashboard {
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

	d.Row("Layout", false)
	d.Add(4, 4,
		g.Stat("MIG-enabled GPUs", g.UnitShort, g.Instant("count(count by (host_name, hw_parent) ("+limit+"))", "")).
			Describe("GPUs split into MIG instances.").NoValue("0"),
		g.Stat("MIG instances", g.UnitShort, g.Instant("count("+limit+")", "")).
			Describe("MIG instances (GPU instance + compute instance) the receivers read.").NoValue("0"),
		g.Stat("Instances held by a pod", g.UnitShort, g.Instant("count("+s.sel("hw_gpu_memory_limit_bytes", mAttached)+") or vector(0)", "")).
			Describe("MIG instances the kubelet has allocated to a pod."),
		g.Stat("MIG framebuffer in use", g.UnitRatio, g.Instant("sum("+s.sel("hw_gpu_memory_usage_bytes")+") / sum("+limit+")", "")).
			Describe("Framebuffer used over framebuffer of all instances.").Thresholds(fillSteps).Range(0, 1),
		g.Stat("Idle while allocated", g.UnitShort, g.Instant("sum("+s.sel("nvidia_gpu_idle_while_allocated")+") or vector(0)", "")).
			Describe("MIG instances a pod holds while their SM activity (GPM, Hopper and newer) stayed under the idle threshold.").
			Thresholds(warnIfAny).Background(),
		g.Stat("Free MIG devices", g.UnitShort, g.Instant("sum("+migResources.sel("nvidia_gpu_devices_allocatable")+") - sum("+migResources.sel("nvidia_gpu_devices_allocated")+")", "")).
			Describe("MIG devices (nvidia.com/mig-* resources) the kubelets can still hand out.").NoValue("0"),
	)
	d.Add(12, 8,
		g.BarGauge("Instances per GPU", g.UnitShort, g.Instant("count by (host_name, nvidia_gpu_index, hw_parent) ("+limit+")", lGPU)).
			Describe("How many MIG instances each GPU is split into.").Decimals(0).Thresholds(g.Steps("blue")),
		g.BarGauge("Instances per profile", g.UnitShort, g.Instant("count by (nvidia_mig_profile) ("+limit+")", "{{nvidia_mig_profile}}")).
			Describe("MIG instances per profile (slices and framebuffer, e.g. 1g.10gb).").Decimals(0).Thresholds(g.Steps("blue")),
	)

	d.Row("Owners", false)
	d.Add(24, 9,
		g.Table("Who owns each instance", g.UnitBytes,
			g.TableQuery("max by ("+owner+") ("+s.sel("hw_gpu_memory_usage_bytes")+")"),
			g.TableQuery("max by ("+owner+") ("+s.sel("hw_gpu_memory_limit_bytes")+")"),
			g.TableQuery("max by ("+owner+") ("+s.sel("hw_gpu_memory_utilization_ratio")+")"),
			g.TableQuery("max by ("+owner+") ("+s.sel("nvidia_gpu_profiling_activity_ratio", `nvidia_gpu_profiling_metric="sm_active"`)+")"),
		).Describe("One row per MIG instance with the pod the kubelet allocated it to (empty: free, or shared by several pods; see below).").
			Columns("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_parent", "GPU UUID", "nvidia_mig_profile", "Profile", "nvidia_mig_uuid", "MIG UUID",
				"k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container",
				"Value #A", "Framebuffer used", "Value #B", "Framebuffer", "Value #C", "Used", "Value #D", "SM active").
			OverrideField("Value #C", g.Unit(g.UnitRatio), g.CellGauge(), g.Min(0), g.Max(1), g.FieldThresholds(fillSteps)).
			OverrideField("Value #D", g.Unit(g.UnitRatio), g.CellGauge(), g.Min(0), g.Max(1), g.FieldThresholds(utilizationSteps)),
	)
	d.Add(24, 7,
		g.Table("Pods on MIG instances", g.UnitBytes,
			g.TableQuery("max by ("+byPod+", k8s_container_name, "+byInstance+") ("+s.sel("nvidia_gpu_pod_memory_usage_bytes")+")")).
			Describe("Each pod's own framebuffer on each MIG instance it runs on.").
			Columns("k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod", "k8s_container_name", "Container", "host_name", "Node", "nvidia_gpu_index", "GPU",
				"hw_parent", "GPU UUID", "nvidia_mig_profile", "Profile", "nvidia_mig_uuid", "MIG UUID", "Value", "Framebuffer used"),
	)

	d.Row("Framebuffer per instance", false)
	d.Add(12, 8,
		g.TimeSeries("Framebuffer used per instance", g.UnitBytes, g.Query(perInstance(s.sel("hw_gpu_memory_usage_bytes")), lMIG)).
			Describe("Framebuffer allocated in each MIG instance.").MinZero(),
		g.TimeSeries("Framebuffer used share per instance", g.UnitRatio, g.Query(perInstance(s.sel("hw_gpu_memory_utilization_ratio")), lMIG)).
			Describe("Used over the instance's framebuffer.").Range(0, 1).Thresholds(fillSteps),
	)

	d.Row("Activity per instance (GPM, Hopper and newer)", false)
	for _, m := range []struct{ title, metric, desc string }{
		{"SM active per instance", "sm_active", "Share of the interval warps were resident on the instance's SMs."},
		{"Tensor core active per instance", "tensor_active", "Share of cycles the instance's tensor cores were busy."},
		{"DRAM active per instance", "dram_active", "Share of cycles the instance's memory was being read or written."},
		{"Graphics active per instance", "graphics_active", "Share of time the instance's compute engine was busy."},
	} {
		d.Add(12, 8, g.TimeSeries(m.title, g.UnitRatio,
			g.Query(perInstance(s.sel("nvidia_gpu_profiling_activity_ratio", `nvidia_gpu_profiling_metric="`+m.metric+`"`)), lMIG)).
			Describe(m.desc+" NVML reports no utilization per MIG instance; GPM does on Hopper and newer.").Range(0, 1))
	}
	return d
}
