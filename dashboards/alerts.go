package dashboards

import (
	g "github.com/otelcol-gpu/otelcol-gpu/dashboards/internal/grafana"
)

func alertsHealth() *g.Dashboard {
	d := newDashboard("gpu-alerts-health", "GPU alerts & health",
		"GPU alerts firing, XID history and GPU health, and whether the collectors can see the GPUs at all.",
		clusterVar(), nodeVar())
	s := scope{mCluster, mNode}
	firing := s.sel("ALERTS", mFiring, mGPUAlerts)
	countOr0 := func(expr string) string { return "count(" + expr + ") or vector(0)" }

	d.Row("Alerts", false)
	d.Add(4, 4,
		g.Stat("Firing", g.UnitShort, g.Instant(countOr0(firing), "")).
			Describe("GPU alerts (alertname GPU*) firing now.").Thresholds(badIfAny).Background(),
		g.Stat("Critical", g.UnitShort, g.Instant(countOr0(s.sel("ALERTS", mFiring, mGPUAlerts, `severity="critical"`)), "")).
			Describe("Firing GPU alerts of severity critical.").Thresholds(badIfAny).Background(),
		g.Stat("Warning", g.UnitShort, g.Instant(countOr0(s.sel("ALERTS", mFiring, mGPUAlerts, `severity="warning"`)), "")).
			Describe("Firing GPU alerts of severity warning.").Thresholds(warnIfAny).Background(),
		g.Stat("Pending", g.UnitShort, g.Instant(countOr0(s.sel("ALERTS", `alertstate="pending"`, mGPUAlerts)), "")).
			Describe("GPU alerts whose condition holds but not yet for their `for` duration.").Thresholds(g.Steps("green", 1, "yellow")),
		g.Stat("GPUs failed", g.UnitShort, g.Instant(countOr0(s.sel("hw_status", `hw_state="failed"`)+" == 1"), "")).
			Describe("GPUs lost (fell off the bus), with a failed row remap, or with a fatal XID in the last 10 minutes.").Thresholds(badIfAny).Background(),
		g.Stat("GPUs degraded", g.UnitShort, g.Instant(countOr0(s.sel("hw_status", `hw_state="degraded"`)+" == 1"), "")).
			Describe("GPUs with uncorrected ECC errors, a pending row remap or page retirement, or a severe XID in the last 10 minutes.").Thresholds(warnIfAny).Background(),
	)
	d.Add(8, 8,
		g.BarGauge("Firing alerts by severity", g.UnitShort, g.Instant("count by (severity) ("+firing+")", "{{severity}}")).
			Describe("Firing GPU alerts per severity label.").Decimals(0).Thresholds(g.Steps("blue")).
			OverrideField("critical", g.FixedColor("red")).
			OverrideField("warning", g.FixedColor("orange")).
			OverrideField("info", g.FixedColor("blue")).
			NoValue("none firing"),
	)
	d.Add(16, 8,
		g.TimeSeries("Firing alerts over time", g.UnitShort, g.Query("count by (alertname, severity) ("+firing+")", "{{alertname}} ({{severity}})")).
			Describe("Firing GPU alerts per alert name.").Stacked().Stepped().Decimals(0),
	)
	d.Add(24, 8,
		g.Table("Firing alerts", g.UnitShort, g.TableQuery(firing)).
			Describe("Every firing GPU alert with its labels.").
			Hide("Value", "__name__", "alertstate").
			Columns("alertname", "Alert", "severity", "Severity", "host_name", "Node", "nvidia_gpu_index", "GPU", "hw_id", "UUID").
			SortBy("Severity", false),
	)

	d.Row("XID history", false)
	xid := s.sel("nvidia_gpu_xid_errors_total")
	d.Add(12, 9,
		g.TimeSeries("XID errors by code", g.UnitShort, g.Query("sum by (nvidia_gpu_xid) (increase("+xid+"[$__rate_interval]))", "XID {{nvidia_gpu_xid}}")).
			Describe("XIDs the drivers reported, per code (increase over the rate window). Fatal: 48, 64, 79, 95, 119, 120, 140; severe: 63, 74, 92, 94; others (13, 31, 43, ...) are usually the application's.").
			Bars().MinZero(),
		g.Table("XID errors by GPU and code", g.UnitShort,
			g.TableQuery("sum by ("+byGPU+", nvidia_gpu_xid) (increase("+xid+"[$__range]))"),
			g.TableQuery("sum by ("+byGPU+", nvidia_gpu_xid) ("+xid+")"),
		).Describe("XIDs per GPU and code: in the dashboard's time range, and since the receiver started (a code's first XID starts its series, so the range count can miss it).").
			Hide("hw_id").
			Columns("host_name", "Node", "nvidia_gpu_index", "GPU", "nvidia_gpu_xid", "XID", "Value #A", "In range", "Value #B", "Since receiver start").
			SortBy("Since receiver start", true),
	)

	d.Row("Health", false)
	d.Add(8, 8,
		g.BarGauge("GPUs by health state", g.UnitShort,
			g.Instant(countOr0(s.sel("hw_status", `hw_state="ok"`)+" == 1"), "ok"),
			g.Instant(countOr0(s.sel("hw_status", `hw_state="degraded"`)+" == 1"), "degraded"),
			g.Instant(countOr0(s.sel("hw_status", `hw_state="failed"`)+" == 1"), "failed"),
		).Describe("GPUs per hw_status state.").Decimals(0).Thresholds(g.Steps("blue")).
			OverrideQuery("A", g.FixedColor("green")).
			OverrideQuery("B", g.FixedColor("orange")).
			OverrideQuery("C", g.FixedColor("red")),
	)
	d.Add(16, 8,
		g.TimeSeries("GPUs by health state over time", g.UnitShort, g.Query("count by (hw_state) ("+s.sel("hw_status")+" == 1)", "{{hw_state}}")).
			Describe("GPUs per health state.").Stacked().Stepped().Decimals(0).
			OverrideField("ok", g.FixedColor("green")).
			OverrideField("degraded", g.FixedColor("orange")).
			OverrideField("failed", g.FixedColor("red")),
	)
	d.Add(24, 7,
		g.Table("GPUs not OK", g.UnitShort, g.TableQuery("max by ("+byModel+", hw_state) ("+s.sel("hw_status", `hw_state!="ok"`)+" == 1)")).
			Describe("GPUs degraded or failed now.").
			Hide("Value").
			Columns("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_model", "Model", "hw_id", "UUID", "hw_state", "State"),
	)
	d.Add(6, 4,
		g.Stat("Row remaps pending", g.UnitShort, g.Instant("sum("+s.sel("nvidia_gpu_memory_remap_pending")+") or vector(0)", "")).
			Describe("GPUs waiting for a reset to remap rows.").Thresholds(warnIfAny).Background(),
		g.Stat("Row remaps failed", g.UnitShort, g.Instant("sum("+s.sel("nvidia_gpu_memory_remap_failed")+") or vector(0)", "")).
			Describe("GPUs whose row remap failed: they need service.").Thresholds(badIfAny).Background(),
		g.Stat("Page retirements pending", g.UnitShort, g.Instant("sum("+s.sel("nvidia_gpu_memory_retired_pages_pending")+") or vector(0)", "")).
			Describe("GPUs (pre-Ampere) waiting for a reset to retire pages.").Thresholds(warnIfAny).Background(),
		g.Stat("Uncorrected ECC errors in range", g.UnitShort, g.Instant("sum(increase("+s.sel("hw_errors_total", `error_type="uncorrected"`, `nvidia_gpu_ecc_counter_type="volatile"`)+"[$__range])) or vector(0)", "")).
			Describe("Uncorrected ECC errors over the dashboard's time range.").Thresholds(badIfAny).Background().Decimals(0),
	)

	d.Row("Collection health", false)
	d.Add(6, 8,
		g.TimeSeries("NVML available", g.UnitNone, g.Query(s.sel("nvidia_nvml_available"), "{{host_name}}")).
			Describe("1 while NVML answers on the node, 0 while it cannot be initialised (the node's GPUs are then not measured).").
			Range(0, 1).Stepped().Mappings(g.ValueText("0", "unavailable", "red", "1", "available", "green")),
		g.TimeSeries("NVML initialisation errors", g.UnitShort,
			g.Query("sum by (host_name, nvidia_nvml_error) (increase("+s.sel("nvidia_nvml_init_errors_total")+"[$__rate_interval]))", "{{host_name}} {{nvidia_nvml_error}}")).
			Describe("Failed NVML initialisation attempts, by error.").Bars().MinZero(),
		g.TimeSeries("Pod attribution age", g.UnitSeconds, g.Query(s.sel("nvidia_gpu_attribution_age_seconds"), "{{host_name}}")).
			Describe("Age of the kubelet pod-resources snapshot used to attribute GPUs to pods; it grows while the kubelet cannot be read.").
			MinZero().Thresholds(g.Steps("green", 300, "orange")),
		g.TimeSeries("Pod attribution errors", g.UnitShort,
			g.Query("increase("+s.sel("nvidia_gpu_attribution_errors_total")+"[$__rate_interval])", "{{host_name}}")).
			Describe("Failed reads of the kubelet pod-resources API.").Bars().MinZero(),
	)
	return d
}
