package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/units"

	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
)

func alertsHealth() *dashboard.DashboardBuilder {
	d := newDashboard("gpu-alerts-health", "GPU alerts & health",
		"GPU alerts firing, XID history and GPU health, and whether the collectors can see the GPUs at all.",
		clusterVar(), nodeVar())
	s := scope{mCluster, mNode}
	firing := s.sel("ALERTS", mFiring, mGPUAlerts)
	countOr0 := func(expr string) string { return "count(" + expr + ") or vector(0)" }

	d.WithRow(row("Alerts"))
	add(d, 4, 4,
		statPanel("Firing", units.Short, instant(countOr0(firing), "")).
			Description("GPU alerts (alertname GPU*) firing now.").Thresholds(badIfAny()).ColorMode(background),
		statPanel("Critical", units.Short, instant(countOr0(s.sel("ALERTS", mFiring, mGPUAlerts, `severity="critical"`)), "")).
			Description("Firing GPU alerts of severity critical.").Thresholds(badIfAny()).ColorMode(background),
		statPanel("Warning", units.Short, instant(countOr0(s.sel("ALERTS", mFiring, mGPUAlerts, `severity="warning"`)), "")).
			Description("Firing GPU alerts of severity warning.").Thresholds(warnIfAny()).ColorMode(background),
		statPanel("Pending", units.Short, instant(countOr0(s.sel("ALERTS", `alertstate="pending"`, mGPUAlerts)), "")).
			Description("GPU alerts whose condition holds but not yet for their `for` duration.").Thresholds(scale("green", step{1, "yellow"})),
		statPanel("GPUs failed", units.Short, instant(countOr0(s.sel("hw_status", `hw_state="failed"`)+" == 1"), "")).
			Description("GPUs lost (fell off the bus), with a failed row remap, or with a fatal XID in the last "+healthWindow()+".").Thresholds(badIfAny()).ColorMode(background),
		statPanel("GPUs degraded", units.Short, instant(countOr0(s.sel("hw_status", `hw_state="degraded"`)+" == 1"), "")).
			Description("GPUs with uncorrected ECC errors, a pending row remap or page retirement, or a severe XID in the last "+healthWindow()+".").Thresholds(warnIfAny()).ColorMode(background),
	)
	add(d, 8, 8,
		barGauge("Firing alerts by severity", units.Short, instant("count by (severity) ("+firing+")", "{{severity}}")).
			Description("Firing GPU alerts per severity label.").Decimals(0).Thresholds(plain()).
			OverrideByName("critical", props(fixedColor("red"))).
			OverrideByName("warning", props(fixedColor("orange"))).
			OverrideByName("info", props(fixedColor("blue"))).
			NoValue("none firing"),
	)
	add(d, 16, 8,
		timeSeries("Firing alerts over time", units.Short, query("count by (alertname, severity) ("+firing+")", "{{alertname}} ({{severity}})")).
			Description("Firing GPU alerts per alert name.").Stacking(normalStack()).FillOpacity(60).LineInterpolation(common.LineInterpolationStepAfter).Decimals(0),
	)
	add(d, 24, 8,
		tablePanel("Firing alerts", units.Short,
			cols("alertname", "Alert", "severity", "Severity", "host_name", "Node", "nvidia_gpu_index", "GPU", "hw_id", "UUID").hiding("Value", "__name__", "alertstate"),
			tableQuery(firing)).
			Description("Every firing GPU alert with its labels.").
			SortBy(sorted("Severity", false)),
	)

	d.WithRow(row("XID history"))
	xid := s.sel("nvidia_gpu_xid_errors_total")
	add(d, 12, 9,
		timeSeries("XID errors by code", units.Short, query("sum by (nvidia_gpu_xid) (increase("+xid+"[$__rate_interval]))", "XID {{nvidia_gpu_xid}}")).
			Description("XIDs the drivers reported, per code (increase over the rate window). Fatal: "+xids(thresholds.XIDFatal)+"; severe: "+xids(thresholds.XIDSevere)+"; others (13, 31, 43, ...) are usually the application's.").
			DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).Min(0),
		tablePanel("XID errors by GPU and code", units.Short,
			cols("host_name", "Node", "nvidia_gpu_index", "GPU", "nvidia_gpu_xid", "XID", "Value #A", "In range", "Value #B", "Since receiver start").hiding("hw_id"),
			tableQuery("sum by ("+byGPU+", nvidia_gpu_xid) (increase("+xid+"[$__range]))"),
			tableQuery("sum by ("+byGPU+", nvidia_gpu_xid) ("+xid+")"),
		).Description("XIDs per GPU and code: in the dashboard's time range, and since the receiver started (a code's first XID starts its series, so the range count can miss it).").
			SortBy(sorted("Since receiver start", true)),
	)

	d.WithRow(row("Health"))
	add(d, 8, 8,
		barGauge("GPUs by health state", units.Short,
			instant(countOr0(s.sel("hw_status", `hw_state="ok"`)+" == 1"), "ok"),
			instant(countOr0(s.sel("hw_status", `hw_state="degraded"`)+" == 1"), "degraded"),
			instant(countOr0(s.sel("hw_status", `hw_state="failed"`)+" == 1"), "failed"),
		).Description("GPUs per hw_status state.").Decimals(0).Thresholds(plain()).
			OverrideByQuery("A", props(fixedColor("green"))).
			OverrideByQuery("B", props(fixedColor("orange"))).
			OverrideByQuery("C", props(fixedColor("red"))),
	)
	add(d, 16, 8,
		timeSeries("GPUs by health state over time", units.Short, query("count by (hw_state) ("+s.sel("hw_status")+" == 1)", "{{hw_state}}")).
			Description("GPUs per health state.").Stacking(normalStack()).FillOpacity(60).LineInterpolation(common.LineInterpolationStepAfter).Decimals(0).
			OverrideByName("ok", props(fixedColor("green"))).
			OverrideByName("degraded", props(fixedColor("orange"))).
			OverrideByName("failed", props(fixedColor("red"))),
	)
	add(d, 24, 7,
		tablePanel("GPUs not OK", units.Short,
			cols("host_name", "Node", "nvidia_gpu_index", "GPU", "hw_model", "Model", "hw_id", "UUID", "hw_state", "State").hiding("Value"),
			tableQuery("max by ("+byModel+", hw_state) ("+s.sel("hw_status", `hw_state!="ok"`)+" == 1)")).
			Description("GPUs degraded or failed now."),
	)
	add(d, 6, 4,
		statPanel("Row remaps pending", units.Short, instant("sum("+s.sel("nvidia_gpu_memory_remap_pending")+") or vector(0)", "")).
			Description("GPUs waiting for a reset to remap rows.").Thresholds(warnIfAny()).ColorMode(background),
		statPanel("Row remaps failed", units.Short, instant("sum("+s.sel("nvidia_gpu_memory_remap_failed")+") or vector(0)", "")).
			Description("GPUs whose row remap failed: they need service.").Thresholds(badIfAny()).ColorMode(background),
		statPanel("Page retirements pending", units.Short, instant("sum("+s.sel("nvidia_gpu_memory_retired_pages_pending")+") or vector(0)", "")).
			Description("GPUs (pre-Ampere) waiting for a reset to retire pages.").Thresholds(warnIfAny()).ColorMode(background),
		statPanel("Uncorrected ECC errors in range", units.Short, instant("sum(increase("+s.sel("hw_errors_total", `error_type="uncorrected"`, `nvidia_gpu_ecc_counter_type="volatile"`)+"[$__range])) or vector(0)", "")).
			Description("Uncorrected ECC errors over the dashboard's time range.").Thresholds(badIfAny()).ColorMode(background).Decimals(0),
	)

	d.WithRow(row("Collection health"))
	add(d, 6, 8,
		timeSeries("NVML available", units.NoUnit, query(s.sel("nvidia_nvml_available"), "{{host_name}}")).
			Description("1 while NVML answers on the node, 0 while it cannot be initialised (the node's GPUs are then not measured).").
			Min(0).Max(1).LineInterpolation(common.LineInterpolationStepAfter).Mappings([]dashboard.ValueMapping{valueText([3]string{"0", "unavailable", "red"}, [3]string{"1", "available", "green"})}),
		timeSeries("NVML initialisation errors", units.Short,
			query("sum by (host_name, nvidia_nvml_error) (increase("+s.sel("nvidia_nvml_init_errors_total")+"[$__rate_interval]))", "{{host_name}} {{nvidia_nvml_error}}")).
			Description("Failed NVML initialisation attempts, by error.").DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).Min(0),
		timeSeries("Pod attribution age", units.Seconds, query(s.sel("nvidia_gpu_attribution_age_seconds"), "{{host_name}}")).
			Description("Age of the kubelet pod-resources snapshot used to attribute GPUs to pods; it grows while the kubelet cannot be read.").
			Min(0).Thresholds(attributionAgeScale()).ThresholdsStyle(dashedThresholds()),
		timeSeries("Pod attribution errors", units.Short,
			query("increase("+s.sel("nvidia_gpu_attribution_errors_total")+"[$__rate_interval])", "{{host_name}}")).
			Description("Failed reads of the kubelet pod-resources API.").DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).Min(0),
	)
	add(d, 24, 6,
		timeSeries("Process series folded", units.Short,
			query("increase("+s.sel("nvidia_gpu_processes_folded_total")+"[$__rate_interval])", "{{host_name}}")).
			Description("GPU processes the agent summed into a GPU's (other) series, because the GPU had more kinds of process (owner, executable, type) than gpu_enrich's processes.max_per_gpu allows series (GPUProcessSeriesFolded). Per-pod and per-job series still count them.").
			DrawStyle(common.GraphDrawStyleBars).FillOpacity(80).Min(0),
	)
	return d
}
