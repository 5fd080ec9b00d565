package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"
)

func nodeDetail() *dashboard.DashboardBuilder {
	d := newDashboard("gpu-node-detail", "GPU node & GPU detail",
		"Everything one node's GPUs report: utilization, framebuffer, temperatures and power against their limits, clocks and throttling, errors and health, PCIe and NVLink, profiling activity. MIG instances are on the MIG dashboard.",
		clusterVar(), nodeVar(), gpuVar())
	// GPUs only: with "All", hw_id=~".*" would also take in MIG instances.
	s := scope{mCluster, mNode, mGPU, mPhysical}
	by := func(metric string, extra ...string) string {
		return "max by (" + byModel + ") (" + s.sel(metric, extra...) + ")"
	}
	// ts is one series per GPU (and per extraBy labels): a GPU's series change labels when
	// a pod comes or goes (the pod's labels are on a GPU one pod holds alone).
	ts := func(metric, extraBy string, extra ...string) string {
		labels := byGPU
		if extraBy != "" {
			labels += ", " + extraBy
		}
		return "max by (" + labels + ") (" + s.sel(metric, extra...) + ")"
	}
	// A GPU's process series are one per owner (pod and container, container, Slurm job)
	// and executable by default, without process_pid; summing over these labels gives the
	// same lines when processes.keep_pid writes one series per PID.
	const byProcess = "k8s_namespace_name, k8s_pod_name, k8s_container_name, container_id, slurm_job_id, slurm_job_sluid, process_executable_name"
	const lProcess = lGPU + " {{process_executable_name}} {{k8s_namespace_name}}/{{k8s_pod_name}} {{k8s_container_name}} {{slurm_job_id}}{{slurm_job_sluid}}"
	perProcess := func(metric string, extra ...string) string {
		return "sum by (" + byGPU + ", " + byProcess + ") (" + s.sel(metric, extra...) + ")"
	}
	const pidNote = " One line per owner (pod and container, container or Slurm job) and executable; beyond the agent's processes.max_per_gpu (8) the smallest are summed into (other). The agent's processes.keep_pid writes one series per PID (process_pid) instead, summed here."
	const enforced = `nvidia_gpu_power_limit_type="enforced"`

	d.WithRow(row("GPUs"))
	add(d, 24, 8,
		tablePanel("GPUs now", units.Short,
			cols("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_model", "Model", "hw_id", "UUID",
				"Value #A", "Utilization", "Value #B", "Framebuffer", "Value #C", "Temperature", "Value #D", "Power", "Value #E", "P-state", "Value #F", "Health"),
			tableQuery(by("hw_gpu_utilization_ratio", mGeneral)),
			tableQuery(by("hw_gpu_memory_utilization_ratio")),
			tableQuery(by("hw_temperature_celsius", `hw_sensor_location="gpu"`)),
			tableQuery(by("hw_power_watts")),
			tableQuery(by("nvidia_gpu_performance_state")),
			tableQuery(healthCode(s, byModel)),
		).Description("One row per GPU with its latest readings."+fullOverlay("The P-state column")).
			SortBy(sorted("GPU", false)).
			OverrideByName("Value #A", ratioGauge(utilizationScale())).
			OverrideByName("Value #B", ratioGauge(framebufferScale())).
			OverrideByName("Value #C", props(unitProp(units.Celsius), cellBackground(), thresholdsProp(temperatureScale()))).
			OverrideByName("Value #D", props(unitProp(units.Watt))).
			OverrideByName("Value #E", props(unitProp(units.NoUnit), prop("decimals", 0))).
			OverrideByName("Value #F", props(cellBackground(), prop("mappings", []dashboard.ValueMapping{healthMapping()}))),
	)

	d.WithRow(row("Utilization"))
	add(d, 12, 8,
		timeSeries("GPU utilization", units.PercentUnit, query(ts("hw_gpu_utilization_ratio", "", mGeneral), lGPU)).
			Description("Fraction of time a kernel ran on the GPU (NVML's GPU utilization, dcgm-exporter's DCGM_FI_DEV_GPU_UTIL / 100).").Min(0).Max(1),
		timeSeries("Encoder and decoder utilization", units.PercentUnit, query(ts("hw_gpu_utilization_ratio", "hw_gpu_task", `hw_gpu_task=~"encoder|decoder"`), lGPU+" {{hw_gpu_task}}")).
			Description("NVENC and NVDEC engines.").Min(0).Max(1),
		timeSeries("Memory copy utilization", units.PercentUnit, query(ts("nvidia_gpu_memory_copy_utilization_ratio", ""), lGPU)).
			Description("Fraction of time device memory was read or written.").Min(0).Max(1),
		timeSeries("SM utilization by process", units.PercentUnit, query(perProcess("nvidia_gpu_process_utilization_ratio", `nvidia_gpu_engine="sm"`), lProcess)).
			Description("Share of the interval the processes kept the SMs busy: who uses a shared GPU (not available under MIG)."+pidNote).Min(0).Max(1),
	)

	d.WithRow(row("Framebuffer"))
	add(d, 8, 8,
		timeSeries("Framebuffer used vs total", units.BytesIEC,
			query(ts("hw_gpu_memory_usage_bytes", ""), lGPU+" used"),
			query(ts("hw_gpu_memory_limit_bytes", ""), lGPU+" total"),
		).Description("Framebuffer allocated, and the GPU's total (dashed).").Min(0).OverrideByQuery("B", dashed()),
		timeSeries("Framebuffer used", units.PercentUnit, query(ts("hw_gpu_memory_utilization_ratio", ""), lGPU)).
			Description("Framebuffer used over total; orange from where GPUMemoryHigh fires.").Min(0).Max(1).
			Thresholds(framebufferScale()).ThresholdsStyle(dashedThresholds()),
		timeSeries("Framebuffer free and reserved", units.BytesIEC,
			query(ts("nvidia_gpu_memory_free_bytes", ""), lGPU+" free"),
			query(ts("nvidia_gpu_memory_reserved_bytes", ""), lGPU+" reserved"),
		).Description("Free for allocation, and reserved by the driver and firmware (R510+ drivers)."+fullOverlay("Reserved")).Min(0),
	)
	add(d, 8, 8,
		timeSeries("Framebuffer by process", units.BytesIEC, query(perProcess("nvidia_gpu_process_memory_usage_bytes"), lProcess)).
			Description("Framebuffer the processes use on the GPU: who holds the memory of a shared GPU."+pidNote).Min(0),
	)
	add(d, 8, 8,
		timeSeries("Framebuffer growth rate (largest per GPU)", units.BytesPerSecondIEC,
			query("max by ("+byGPU+") ("+s.sel("nvidia_gpu_memory_growth_rate_bytes_per_second")+")", lGPU)).
			Description("Least-squares slope of framebuffer use over the leak window, the GPU's own or that of the pod on it growing fastest. A steady positive slope is a leak."),
	)
	add(d, 8, 8,
		statPanel("GPUs with a suspected leak", units.Short,
			instant("count(max by ("+byGPU+") ("+s.sel("nvidia_gpu_memory_leak_suspected")+") == 1) or vector(0)", "")).
			Description("Framebuffer grew in at least 90 % of the steps of the leak window while utilization stayed steady.").
			Thresholds(warnIfAny()).ColorMode(background),
	)

	d.WithRow(row("Temperature and power"))
	add(d, 12, 8,
		timeSeries("GPU temperature vs limits", units.Celsius,
			query(ts("hw_temperature_celsius", "", `hw_sensor_location="gpu"`), lGPU),
			query(ts("hw_temperature_limit_celsius", "hw_limit_type", `hw_sensor_location="gpu"`), lGPU+" {{hw_limit_type}} limit"),
		).Description("GPU die temperature, and its thresholds (dashed): throttled (slowdown), max (operating), high.critical (shutdown)."+fullOverlay("The thresholds")).
			OverrideByQuery("B", dashed()),
		timeSeries("Memory (HBM) temperature vs limits", units.Celsius,
			query(ts("hw_temperature_celsius", "", `hw_sensor_location="memory"`), lGPU),
			query(ts("hw_temperature_limit_celsius", "hw_limit_type", `hw_sensor_location="memory"`), lGPU+" {{hw_limit_type}} limit"),
		).Description("Memory temperature and its thresholds (dashed)."+fullOverlay("The thresholds")).
			OverrideByQuery("B", dashed()),
		timeSeries("Power vs enforced limit", units.Watt,
			query(ts("hw_power_watts", ""), lGPU),
			query(ts("nvidia_gpu_power_limit_watts", "", enforced), lGPU+" limit"),
		).Description("Board power, and the enforced power limit (dashed).").Min(0).
			OverrideByQuery("B", dashed()),
		timeSeries("Power as share of the enforced limit", units.PercentUnit,
			query(ts("hw_power_watts", "")+" / "+ts("nvidia_gpu_power_limit_watts", "", enforced), lGPU),
		).Description("At 100 % the GPU is power-capped: clocks come down (see SW power cap under throttling). Orange from where GPUPowerNearLimit fires.").
			Min(0).Thresholds(powerScale()).ThresholdsStyle(dashedThresholds()),
	)
	add(d, 6, 8,
		timeSeries("Fan speed", units.PercentUnit, query(ts("nvidia_gpu_fan_speed_ratio", ""), lGPU)).
			Description("Share of the fan's maximum speed (absent on fanless SXM boards).").Min(0).Max(1),
		timeSeries("Performance state", units.NoUnit, query(ts("nvidia_gpu_performance_state", ""), lGPU)).
			Description("P-state: 0 is maximum performance, 15 minimum."+fullOverlay("")).Min(0).Max(15).LineInterpolation(common.LineInterpolationStepAfter).Decimals(0),
		statPanel("Energy in range", units.KiloWattHour, instant("sum(increase("+s.sel("hw_energy_joules_total")+"[$__range])) / 3600000", "")).
			Description("Energy the selected GPUs drew over the dashboard's time range.").Decimals(2),
		statPanel("Power now", units.Watt, instant("sum("+s.sel("hw_power_watts")+")", "")).
			Description("Board power of the selected GPUs.").GraphMode(common.BigValueGraphModeArea),
	)

	d.WithRow(row("Clocks and throttling"))
	add(d, 12, 8,
		timeSeries("Clocks", units.Hertz, query(ts("nvidia_gpu_clock_frequency_hertz", "nvidia_gpu_clock_type"), lGPU+" {{nvidia_gpu_clock_type}}")).
			Description("Current SM and memory clocks.").Min(0),
		timeSeries("Clock event reasons active", units.Short,
			query("sum by (nvidia_gpu_clock_event_reason) ("+s.sel("nvidia_gpu_clock_event_active")+")", "{{nvidia_gpu_clock_event_reason}}")).
			Description("Number of selected GPUs whose clocks each reason holds down (gpu_idle is normal when idle). By default gpu_enrich folds them into throttle causes (next panel)."+fullOverlay("The reasons themselves")+" It sets gpu_enrich's throttle.keep_clock_events.").
			Stacking(normalStack()).FillOpacity(60).LineInterpolation(common.LineInterpolationStepAfter).Decimals(0),
		timeSeries("Throttled GPUs by cause", units.Short,
			query("sum by (nvidia_gpu_throttle_cause) ("+s.sel("nvidia_gpu_throttled")+")", "{{nvidia_gpu_throttle_cause}}")).
			Description("GPUs throttled, by cause class (thermal, power, other), from the active clock event reasons.").
			Stacking(normalStack()).FillOpacity(60).LineInterpolation(common.LineInterpolationStepAfter).Decimals(0),
		timeSeries("Time clocks held down, by cause", units.PercentUnit,
			query("sum by ("+byGPU+", nvidia_gpu_clock_event_cause) (rate("+s.sel("nvidia_gpu_clock_event_duration_seconds_total")+"[$__rate_interval])) > 0", lGPU+" {{nvidia_gpu_clock_event_cause}}")).
			Description("Share of wall time the driver held each GPU's clocks down, per cause (causes that held them down only)."+fullOverlay("")).Min(0).NoValue("never held down"),
	)

	d.WithRow(row("Errors and health"))
	add(d, 12, 8,
		timeSeries("Health", units.NoUnit, query(healthCode(s, byGPU), lGPU)).
			Description("0 OK, 1 degraded (uncorrected ECC, pending repair, severe XID in the last "+healthWindow()+"), 2 failed (lost, remap failure, fatal XID in the last "+healthWindow()+").").
			Min(0).Max(2).LineInterpolation(common.LineInterpolationStepAfter).Mappings([]dashboard.ValueMapping{healthMapping()}).
			Thresholds(scale("green", step{1, "orange"}, step{2, "red"})).ThresholdsStyle(dashedThresholds()),
		timeSeries("XID errors by code", units.Short,
			query("sum by ("+byGPU+", nvidia_gpu_xid) (increase("+s.sel("nvidia_gpu_xid_errors_total")+"[$__rate_interval]))", lGPU+" XID {{nvidia_gpu_xid}}")).
			Description("XIDs the driver reported (increase over the rate window).").DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).Min(0).NoValue("none"),
		timeSeries("ECC errors (volatile)", units.Short,
			query("sum by ("+byGPU+", error_type) (increase("+s.sel("hw_errors_total", `nvidia_gpu_ecc_counter_type="volatile"`)+"[$__rate_interval])) > 0", lGPU+" {{error_type}}")).
			Description("New corrected and uncorrected ECC errors (increase over the rate window; GPUs without any are not shown).").DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).Min(0).NoValue("none"),
		tablePanel("Memory repair", units.Short,
			cols("host_name", "Node", "nvidia_gpu_index", "GPU", "Value #A", "Rows remapped (corr.)", "Value #B", "Rows remapped (uncorr.)",
				"Value #C", "Remap pending", "Value #D", "Remap failed", "Value #E", "Pages retired", "Value #F", "Retirement pending", "Value #G", "Uncorrected ECC (life)").
				hiding("hw_model", "hw_id"),
			tableQuery(by("nvidia_gpu_memory_remapped_rows_total", `error_type="corrected"`)),
			tableQuery(by("nvidia_gpu_memory_remapped_rows_total", `error_type="uncorrected"`)),
			tableQuery(by("nvidia_gpu_memory_remap_pending")),
			tableQuery(by("nvidia_gpu_memory_remap_failed")),
			tableQuery("sum by ("+byModel+") ("+s.sel("nvidia_gpu_memory_retired_pages_total")+")"),
			tableQuery(by("nvidia_gpu_memory_retired_pages_pending")),
			tableQuery("sum by ("+byModel+") ("+s.sel("hw_errors_total", `error_type="uncorrected"`, `nvidia_gpu_ecc_counter_type="aggregate"`)+")"),
		).Description("Row remapping (Ampere and newer), page retirement (older GPUs) and uncorrected ECC errors over the GPU's life."+fullOverlay("The remapped row counts")).
			OverrideByName("Value #C", props(cellBackground(), thresholdsProp(warnIfAny()))).
			OverrideByName("Value #D", props(cellBackground(), thresholdsProp(badIfAny()))).
			OverrideByName("Value #F", props(cellBackground(), thresholdsProp(warnIfAny()))),
	)

	links := row("PCIe and NVLink").Collapsed(true)
	add(links, 12, 8,
		timeSeries("PCIe throughput", units.BytesPerSecondIEC,
			query("sum by ("+byGPU+", network_io_direction) (rate("+s.sel("hw_gpu_io_bytes_total")+"[$__rate_interval]))", lGPU+" {{network_io_direction}}")).
			Description("Bytes per second over PCIe, from the driver's byte counters.").Min(0),
		timeSeries("NVLink throughput", units.BytesPerSecondIEC,
			query("sum by ("+byGPU+", network_io_direction) (rate("+s.sel("nvidia_gpu_nvlink_io_bytes_total")+"[$__rate_interval]))", lGPU+" {{network_io_direction}}")).
			Description("Payload bytes per second over all NVLink links of the GPU.").Min(0),
		timeSeries("Interconnect bandwidth (GPM)", units.BytesPerSecondIEC,
			query(ts("nvidia_gpu_profiling_bandwidth_bytes_per_second", "nvidia_gpu_interconnect, network_io_direction"), lGPU+" {{nvidia_gpu_interconnect}} {{network_io_direction}}")).
			Description("PCIe and NVLink bandwidth measured by NVML GPM (Hopper and newer)."+fullOverlay("")).Min(0),
		timeSeries("PCIe replays and NVLink errors", units.OpsPerSecond,
			query("sum by ("+byGPU+") (rate("+s.sel("nvidia_gpu_pcie_replays_total")+"[$__rate_interval])) > 0", lGPU+" PCIe replays"),
			query("sum by ("+byGPU+", nvidia_gpu_nvlink_error_type) (rate("+s.sel("nvidia_gpu_nvlink_errors_total")+"[$__rate_interval])) > 0", lGPU+" NVLink {{nvidia_gpu_nvlink_error_type}}"),
		).Description("Link-level retransmissions and NVLink CRC/replay/recovery errors per second (links without any are not shown).").Min(0).NoValue("none"),
	)
	add(links, 24, 7,
		tablePanel("Links", units.Short,
			cols("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_model", "Model", "Value #A", "PCIe gen", "Value #B", "PCIe gen max",
				"Value #C", "PCIe width", "Value #D", "PCIe width max", "Value #E", "NVLinks up").hiding("hw_id"),
			tableQuery(by("nvidia_gpu_pcie_link_generation")),
			tableQuery(by("nvidia_gpu_pcie_link_generation_max")),
			tableQuery(by("nvidia_gpu_pcie_link_width")),
			tableQuery(by("nvidia_gpu_pcie_link_width_max")),
			// Per GPU by default the series' value is the number of links up; per link
			// (full overlay) each is 1 or 0: the sum is the links up either way.
			tableQuery("sum by ("+byModel+") ("+s.sel("nvidia_gpu_nvlink_state")+")"),
		).Description("PCIe link generation and width next to their maxima (less means a degraded link), and the NVLink links up (fewer than the GPU has means a link went down)."+fullOverlay("The PCIe columns")),
	)
	d.WithRow(links)

	profiling := row("Profiling activity (GPM, Hopper and newer)").Collapsed(true)
	// The receiver reports sm_active, tensor_active and dram_active by default; the full
	// overlay adds the other activities (profiling.activities).
	optIn := fullOverlay("")
	for _, m := range []struct{ title, metrics, legend, desc string }{
		{"SM active", "sm_active", lGPU, "Share of the interval at least one warp was resident on an SM, averaged over SMs."},
		{"SM occupancy", "sm_occupancy", lGPU, "Resident warps over the SMs' maximum." + optIn},
		{"Tensor core active", "tensor_active", lGPU, "Share of cycles the tensor cores were busy."},
		{"DRAM active", "dram_active", lGPU, "Share of cycles device memory was being read or written."},
		{"Graphics active", "graphics_active", lGPU, "Share of time the graphics or compute engine was busy (GPU utilization reads the same activity on Hopper and newer)." + optIn},
		{"FP64, FP32, FP16 pipes active", "fp64_active|fp32_active|fp16_active", lGPU + " {{nvidia_gpu_profiling_metric}}", "Share of cycles each floating-point pipe was busy." + optIn},
	} {
		add(profiling, 8, 8, timeSeries(m.title, units.PercentUnit,
			query(ts("nvidia_gpu_profiling_activity_ratio", "nvidia_gpu_profiling_metric", `nvidia_gpu_profiling_metric=~"`+m.metrics+`"`), m.legend)).
			Description(m.desc+" From NVML GPM; absent on GPUs older than Hopper.").Min(0).Max(1))
	}
	return d.WithRow(profiling)
}
