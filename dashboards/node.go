package dashboards

import (
	g "github.com/otelcol-gpu/otelcol-gpu/dashboards/internal/grafana"
)

func nodeDetail() *g.Dashboard {
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
	const byProcess = "process_pid, process_executable_name"
	const enforced = `nvidia_gpu_power_limit_type="enforced"`

	d.Row("GPUs", false)
	d.Add(24, 8,
		g.Table("GPUs now", g.UnitShort,
			g.TableQuery(by("hw_gpu_utilization_ratio", mGeneral)),
			g.TableQuery(by("hw_gpu_memory_utilization_ratio")),
			g.TableQuery(by("hw_temperature_celsius", `hw_sensor_location="gpu"`)),
			g.TableQuery(by("hw_power_watts")),
			g.TableQuery(by("nvidia_gpu_performance_state")),
			g.TableQuery(healthCode(s, byModel)),
		).Describe("One row per GPU with its latest readings.").
			Columns("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_model", "Model", "hw_id", "UUID",
				"Value #A", "Utilization", "Value #B", "Framebuffer", "Value #C", "Temperature", "Value #D", "Power", "Value #E", "P-state", "Value #F", "Health").
			SortBy("GPU", false).
			OverrideField("Value #A", g.Unit(g.UnitRatio), g.CellGauge(), g.Min(0), g.Max(1), g.FieldThresholds(utilizationSteps)).
			OverrideField("Value #B", g.Unit(g.UnitRatio), g.CellGauge(), g.Min(0), g.Max(1), g.FieldThresholds(fillSteps)).
			OverrideField("Value #C", g.Unit(g.UnitCelsius), g.CellColorBackground(), g.FieldThresholds(g.Steps("green", 80, "orange", 87, "red"))).
			OverrideField("Value #D", g.Unit(g.UnitWatt)).
			OverrideField("Value #E", g.Unit(g.UnitNone), map[string]any{"id": "decimals", "value": 0}).
			OverrideField("Value #F", g.CellColorBackground(), g.FieldMappings(healthMapping)),
	)

	d.Row("Utilization", false)
	d.Add(12, 8,
		g.TimeSeries("GPU utilization", g.UnitRatio, g.Query(ts("hw_gpu_utilization_ratio", "", mGeneral), lGPU)).
			Describe("Fraction of time a kernel ran on the GPU (NVML's GPU utilization, dcgm-exporter's DCGM_FI_DEV_GPU_UTIL / 100).").Range(0, 1),
		g.TimeSeries("Encoder and decoder utilization", g.UnitRatio, g.Query(ts("hw_gpu_utilization_ratio", "hw_gpu_task", `hw_gpu_task=~"encoder|decoder"`), lGPU+" {{hw_gpu_task}}")).
			Describe("NVENC and NVDEC engines.").Range(0, 1),
		g.TimeSeries("Memory copy utilization", g.UnitRatio, g.Query(ts("nvidia_gpu_memory_copy_utilization_ratio", ""), lGPU)).
			Describe("Fraction of time device memory was read or written.").Range(0, 1),
		g.TimeSeries("SM utilization by process", g.UnitRatio, g.Query(ts("nvidia_gpu_process_utilization_ratio", byProcess, `nvidia_gpu_engine="sm"`), lGPU+" pid {{process_pid}} {{process_executable_name}}")).
			Describe("Share of the interval each process kept the SMs busy: who uses a shared GPU (not available under MIG).").Range(0, 1),
	)

	d.Row("Framebuffer", false)
	d.Add(8, 8,
		g.TimeSeries("Framebuffer used vs total", g.UnitBytes,
			g.Query(ts("hw_gpu_memory_usage_bytes", ""), lGPU+" used"),
			g.Query(ts("hw_gpu_memory_limit_bytes", ""), lGPU+" total"),
		).Describe("Framebuffer allocated, and the GPU's total (dashed).").MinZero().OverrideQuery("B", g.Dashed()...),
		g.TimeSeries("Framebuffer used", g.UnitRatio, g.Query(ts("hw_gpu_memory_utilization_ratio", ""), lGPU)).
			Describe("Framebuffer used over total.").Range(0, 1).Thresholds(fillSteps),
		g.TimeSeries("Framebuffer free and reserved", g.UnitBytes,
			g.Query(ts("nvidia_gpu_memory_free_bytes", ""), lGPU+" free"),
			g.Query(ts("nvidia_gpu_memory_reserved_bytes", ""), lGPU+" reserved"),
		).Describe("Free for allocation, and reserved by the driver and firmware (R510+ drivers).").MinZero(),
	)
	d.Add(8, 8,
		g.TimeSeries("Framebuffer by process", g.UnitBytes, g.Query(ts("nvidia_gpu_process_memory_usage_bytes", byProcess), lGPU+" pid {{process_pid}} {{process_executable_name}}")).
			Describe("Framebuffer each process uses on the GPU: who holds the memory of a shared GPU.").MinZero(),
	)
	d.Add(8, 8,
		g.TimeSeries("Framebuffer growth rate (largest per GPU)", g.UnitBytesPS,
			g.Query("max by ("+byGPU+") ("+s.sel("nvidia_gpu_memory_growth_rate_bytes_per_second")+")", lGPU)).
			Describe("Least-squares slope of framebuffer use over the leak window, the GPU's own or that of the pod on it growing fastest. A steady positive slope is a leak."),
	)
	d.Add(8, 8,
		g.Stat("GPUs with a suspected leak", g.UnitShort,
			g.Instant("count(max by ("+byGPU+") ("+s.sel("nvidia_gpu_memory_leak_suspected")+") == 1) or vector(0)", "")).
			Describe("Framebuffer grew in at least 90 % of the steps of the leak window while utilization stayed steady.").
			Thresholds(warnIfAny).Background(),
	)

	d.Row("Temperature and power", false)
	d.Add(12, 8,
		g.TimeSeries("GPU temperature vs limits", g.UnitCelsius,
			g.Query(ts("hw_temperature_celsius", "", `hw_sensor_location="gpu"`), lGPU),
			g.Query(ts("hw_temperature_limit_celsius", "hw_limit_type", `hw_sensor_location="gpu"`), lGPU+" {{hw_limit_type}} limit"),
		).Describe("GPU die temperature, and its thresholds (dashed): throttled (slowdown), max (operating), high.critical (shutdown).").
			OverrideQuery("B", g.Dashed()...),
		g.TimeSeries("Memory (HBM) temperature vs limits", g.UnitCelsius,
			g.Query(ts("hw_temperature_celsius", "", `hw_sensor_location="memory"`), lGPU),
			g.Query(ts("hw_temperature_limit_celsius", "hw_limit_type", `hw_sensor_location="memory"`), lGPU+" {{hw_limit_type}} limit"),
		).Describe("Memory temperature and its thresholds (dashed).").
			OverrideQuery("B", g.Dashed()...),
		g.TimeSeries("Power vs enforced limit", g.UnitWatt,
			g.Query(ts("hw_power_watts", ""), lGPU),
			g.Query(ts("nvidia_gpu_power_limit_watts", "", enforced), lGPU+" limit"),
		).Describe("Board power, and the enforced power limit (dashed).").MinZero().
			OverrideQuery("B", g.Dashed()...),
		g.TimeSeries("Power as share of the enforced limit", g.UnitRatio,
			g.Query(ts("hw_power_watts", "")+" / "+ts("nvidia_gpu_power_limit_watts", "", enforced), lGPU),
		).Describe("At 100 % the GPU is power-capped: clocks come down (see SW power cap under throttling).").
			MinZero().Thresholds(g.Steps("green", 0.95, "orange")),
	)
	d.Add(6, 8,
		g.TimeSeries("Fan speed", g.UnitRatio, g.Query(ts("nvidia_gpu_fan_speed_ratio", ""), lGPU)).
			Describe("Share of the fan's maximum speed (absent on fanless SXM boards).").Range(0, 1),
		g.TimeSeries("Performance state", g.UnitNone, g.Query(ts("nvidia_gpu_performance_state", ""), lGPU)).
			Describe("P-state: 0 is maximum performance, 15 minimum.").Range(0, 15).Stepped().Decimals(0),
		g.Stat("Energy in range", g.UnitKWh, g.Instant("sum(increase("+s.sel("hw_energy_joules_total")+"[$__range])) / 3600000", "")).
			Describe("Energy the selected GPUs drew over the dashboard's time range.").Decimals(2),
		g.Stat("Power now", g.UnitWatt, g.Instant("sum("+s.sel("hw_power_watts")+")", "")).
			Describe("Board power of the selected GPUs.").Graph(),
	)

	d.Row("Clocks and throttling", false)
	d.Add(12, 8,
		g.TimeSeries("Clocks", g.UnitHertz, g.Query(ts("nvidia_gpu_clock_frequency_hertz", "nvidia_gpu_clock_type"), lGPU+" {{nvidia_gpu_clock_type}}")).
			Describe("Current SM and memory clocks.").MinZero(),
		g.TimeSeries("Clock event reasons active", g.UnitShort,
			g.Query("sum by (nvidia_gpu_clock_event_reason) ("+s.sel("nvidia_gpu_clock_event_active")+")", "{{nvidia_gpu_clock_event_reason}}")).
			Describe("Number of selected GPUs whose clocks each reason holds down (gpu_idle is normal when idle).").
			Stacked().Stepped().Decimals(0),
		g.TimeSeries("Throttled GPUs by cause", g.UnitShort,
			g.Query("sum by (nvidia_gpu_throttle_cause) ("+s.sel("nvidia_gpu_throttled")+")", "{{nvidia_gpu_throttle_cause}}")).
			Describe("GPUs throttled, by cause class (thermal, power, other), from the active clock event reasons.").
			Stacked().Stepped().Decimals(0),
		g.TimeSeries("Time clocks held down, by cause", g.UnitRatio,
			g.Query("sum by ("+byGPU+", nvidia_gpu_clock_event_cause) (rate("+s.sel("nvidia_gpu_clock_event_duration_seconds_total")+"[$__rate_interval])) > 0", lGPU+" {{nvidia_gpu_clock_event_cause}}")).
			Describe("Share of wall time the driver held each GPU's clocks down, per cause (causes that held them down only).").MinZero().NoValue("never held down"),
	)

	d.Row("Errors and health", false)
	d.Add(12, 8,
		g.TimeSeries("Health", g.UnitNone, g.Query(healthCode(s, byGPU), lGPU)).
			Describe("0 OK, 1 degraded (uncorrected ECC, pending repair, severe XID in the last 10 min), 2 failed (lost, remap failure, fatal XID in the last 10 min).").
			Range(0, 2).Stepped().Mappings(healthMapping).Thresholds(g.Steps("green", 1, "orange", 2, "red")),
		g.TimeSeries("XID errors by code", g.UnitShort,
			g.Query("sum by ("+byGPU+", nvidia_gpu_xid) (increase("+s.sel("nvidia_gpu_xid_errors_total")+"[$__rate_interval]))", lGPU+" XID {{nvidia_gpu_xid}}")).
			Describe("XIDs the driver reported (increase over the rate window).").Bars().MinZero().NoValue("none"),
		g.TimeSeries("ECC errors (volatile)", g.UnitShort,
			g.Query("sum by ("+byGPU+", error_type) (increase("+s.sel("hw_errors_total", `nvidia_gpu_ecc_counter_type="volatile"`)+"[$__rate_interval])) > 0", lGPU+" {{error_type}}")).
			Describe("New corrected and uncorrected ECC errors (increase over the rate window; GPUs without any are not shown).").Bars().MinZero().NoValue("none"),
		g.Table("Memory repair", g.UnitShort,
			g.TableQuery(by("nvidia_gpu_memory_remapped_rows_total", `error_type="corrected"`)),
			g.TableQuery(by("nvidia_gpu_memory_remapped_rows_total", `error_type="uncorrected"`)),
			g.TableQuery(by("nvidia_gpu_memory_remap_pending")),
			g.TableQuery(by("nvidia_gpu_memory_remap_failed")),
			g.TableQuery("sum by ("+byModel+") ("+s.sel("nvidia_gpu_memory_retired_pages_total")+")"),
			g.TableQuery(by("nvidia_gpu_memory_retired_pages_pending")),
			g.TableQuery("sum by ("+byModel+") ("+s.sel("hw_errors_total", `error_type="uncorrected"`, `nvidia_gpu_ecc_counter_type="aggregate"`)+")"),
		).Describe("Row remapping (Ampere and newer), page retirement (older GPUs) and uncorrected ECC errors over the GPU's life.").
			Hide("hw_model", "hw_id").
			Columns("host_name", "Node", "nvidia_gpu_index", "GPU", "Value #A", "Rows remapped (corr.)", "Value #B", "Rows remapped (uncorr.)",
				"Value #C", "Remap pending", "Value #D", "Remap failed", "Value #E", "Pages retired", "Value #F", "Retirement pending", "Value #G", "Uncorrected ECC (life)").
			OverrideField("Value #C", g.CellColorBackground(), g.FieldThresholds(warnIfAny)).
			OverrideField("Value #D", g.CellColorBackground(), g.FieldThresholds(badIfAny)).
			OverrideField("Value #F", g.CellColorBackground(), g.FieldThresholds(warnIfAny)),
	)

	d.Row("PCIe and NVLink", true)
	d.Add(12, 8,
		g.TimeSeries("PCIe throughput", g.UnitBytesPS,
			g.Query("sum by ("+byGPU+", network_io_direction) (rate("+s.sel("hw_gpu_io_bytes_total")+"[$__rate_interval]))", lGPU+" {{network_io_direction}}")).
			Describe("Bytes per second over PCIe, from the driver's byte counters.").MinZero(),
		g.TimeSeries("NVLink throughput", g.UnitBytesPS,
			g.Query("sum by ("+byGPU+", network_io_direction) (rate("+s.sel("nvidia_gpu_nvlink_io_bytes_total")+"[$__rate_interval]))", lGPU+" {{network_io_direction}}")).
			Describe("Payload bytes per second over all NVLink links of the GPU.").MinZero(),
		g.TimeSeries("Interconnect bandwidth (GPM)", g.UnitBytesPS,
			g.Query(ts("nvidia_gpu_profiling_bandwidth_bytes_per_second", "nvidia_gpu_interconnect, network_io_direction"), lGPU+" {{nvidia_gpu_interconnect}} {{network_io_direction}}")).
			Describe("PCIe and NVLink bandwidth measured by NVML GPM (Hopper and newer).").MinZero(),
		g.TimeSeries("PCIe replays and NVLink errors", g.UnitPerSec,
			g.Query("sum by ("+byGPU+") (rate("+s.sel("nvidia_gpu_pcie_replays_total")+"[$__rate_interval])) > 0", lGPU+" PCIe replays"),
			g.Query("sum by ("+byGPU+", nvidia_gpu_nvlink_error_type) (rate("+s.sel("nvidia_gpu_nvlink_errors_total")+"[$__rate_interval])) > 0", lGPU+" NVLink {{nvidia_gpu_nvlink_error_type}}"),
		).Describe("Link-level retransmissions and NVLink CRC/replay/recovery errors per second (links without any are not shown).").MinZero().NoValue("none"),
	)
	d.Add(24, 7,
		g.Table("Links", g.UnitShort,
			g.TableQuery(by("nvidia_gpu_pcie_link_generation")),
			g.TableQuery(by("nvidia_gpu_pcie_link_generation_max")),
			g.TableQuery(by("nvidia_gpu_pcie_link_width")),
			g.TableQuery(by("nvidia_gpu_pcie_link_width_max")),
			g.TableQuery("sum by ("+byModel+") ("+s.sel("nvidia_gpu_nvlink_state")+")"),
			g.TableQuery("count by ("+byModel+") ("+s.sel("nvidia_gpu_nvlink_state")+")"),
		).Describe("PCIe link generation and width next to their maxima (less means a degraded link), NVLink links up out of all.").
			Hide("hw_id").
			Columns("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_model", "Model", "Value #A", "PCIe gen", "Value #B", "PCIe gen max",
				"Value #C", "PCIe width", "Value #D", "PCIe width max", "Value #E", "NVLinks up", "Value #F", "NVLinks"),
	)

	d.Row("Profiling activity (GPM, Hopper and newer)", true)
	for _, m := range []struct{ title, metrics, legend, desc string }{
		{"SM active", "sm_active", lGPU, "Share of the interval at least one warp was resident on an SM, averaged over SMs."},
		{"SM occupancy", "sm_occupancy", lGPU, "Resident warps over the SMs' maximum."},
		{"Tensor core active", "tensor_active", lGPU, "Share of cycles the tensor cores were busy."},
		{"DRAM active", "dram_active", lGPU, "Share of cycles device memory was being read or written."},
		{"Graphics active", "graphics_active", lGPU, "Share of time the graphics or compute engine was busy."},
		{"FP64, FP32, FP16 pipes active", "fp64_active|fp32_active|fp16_active", lGPU + " {{nvidia_gpu_profiling_metric}}", "Share of cycles each floating-point pipe was busy."},
	} {
		d.Add(8, 8, g.TimeSeries(m.title, g.UnitRatio,
			g.Query(ts("nvidia_gpu_profiling_activity_ratio", "nvidia_gpu_profiling_metric", `nvidia_gpu_profiling_metric=~"`+m.metrics+`"`), m.legend)).
			Describe(m.desc+" From NVML GPM; absent on GPUs older than Hopper.").Range(0, 1))
	}
	return d
}
