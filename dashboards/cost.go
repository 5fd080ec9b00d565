package dashboards

import (
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/units"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pricing"
)

// The GPU cost dashboard reads the allocation funnel and cost recording rules
// (rules/funnel.go, rules/cost.go: gpu-recording.yaml) and the prices (gpu-prices.yaml,
// written from internal/pricing/prices.yaml), not raw metrics: a GPU's share of a MIG
// instance or a time-sliced GPU, GPU-hours and costs are computed once, by the rules, the
// same for the dashboard, the GPUIdleCostHigh alert and any report.

const (
	// mClusterOrNone is the cluster matcher of series the rules write without a cluster
	// label: the prices (one price file per Prometheus) and the per-model GPU counts
	// (summed over clusters). They stay when a cluster is chosen.
	mClusterOrNone = `cluster=~"$cluster|"`
	// noCost is what a cost panel says instead of an empty panel.
	noCost = "no cost: no price set for these GPUs (" + pricing.File + ")"
	// NoPriceSet is what the dashboard says where no GPU price is set.
	NoPriceSet = "no price set (" + pricing.File + ")"
	// cur is the currency of the price file, for titles (Grafana takes no variable in a
	// unit).
	cur = " ($currency)"
)

// costTiers are the funnel tiers under the total, with their legends.
var costTiers = []struct{ tier, legend string }{
	{"allocated", "Allocated"},
	{"active", "Active"},
	{"effective", "Effective (utilization-weighted)"},
	{"idle", "Idle (allocated − effective)"},
}

// currencyVar is the price file's currency, from the currency label of
// cluster:gpu_price_configured:config; "no currency set" where the file names none. Hidden:
// titles show it. query_result, as label_values takes a series selector only (Grafana
// passes it to the series API).
func currencyVar() *dashboard.QueryVariableBuilder {
	q := `query_result(max by (currency) (label_replace(cluster:gpu_price_configured:config{` + mClusterOrNone + `}, "currency", "no currency set", "currency", "")))`
	return dashboard.NewQueryVariableBuilder("currency").Label("Currency").Datasource(datasource()).
		Query(dashboard.StringOrMap{String: ptr(q)}).Definition(q).Regex(`/currency="([^"]+)"/`).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		Hide(dashboard.VariableHideHideVariable).Multi(false).IncludeAll(false).Options([]dashboard.VariableOption{}).
		Description("Currency of the prices in " + pricing.File + " (its currency key), shown in the cost panels' titles.")
}

// workloadName adds the labels workload and workload_kind naming the workload of each
// series of expr, which carries the workload labels the rules keep (k8s_attributes' owner
// names): a cron job's pod under its cron job; "(bare pods)" for pods without an owner.
func workloadName(expr string) string {
	out := `label_replace(` + expr + `, "workload", "(bare pods)", "k8s_namespace_name", ".*")`
	for _, k := range []string{"job", "cronjob", "daemonset", "statefulset", "deployment"} {
		out = `label_replace(label_replace(` + out + `, "workload", "$1", "k8s_` + k + `_name", "(.+)"), "workload_kind", "` + k + `", "k8s_` + k + `_name", ".+")`
	}
	return out
}

// workloadLabels are the labels of the per-workload rules (rules' byWorkload); tables hide
// them behind the workload label.
var workloadLabels = []string{"k8s_deployment_name", "k8s_statefulset_name", "k8s_daemonset_name", "k8s_job_name", "k8s_cronjob_name"}

const byWorkload = "cluster, k8s_namespace_name, k8s_deployment_name, k8s_statefulset_name, k8s_daemonset_name, k8s_job_name, k8s_cronjob_name"

func cost() *dashboard.DashboardBuilder {
	d := newDashboard("gpu-cost", "GPU cost",
		"The GPU allocation funnel (total, allocated, active, effective, idle GPUs and GPU-hours) and what it costs: idle cost by namespace, the top idle workloads and Slurm jobs, cost per GPU model, and the users of MIG instances and shared GPUs with their shares. Reads the recording rules of rules/gpu-recording.yaml and the prices of rules/gpu-prices.yaml (set in "+pricing.File+"; without a price the cost panels say so).",
		clusterVar(), namespaceVar(), currencyVar())
	c := scope{mCluster}
	ns := scope{mCluster, mNamespace}
	price := "max by (hw_model) (" + scope{mClusterOrNone}.sel("hw_model:gpu_price_per_hour:config") + ")"
	configured := func(what string) string {
		return "max(" + scope{mClusterOrNone}.sel("cluster:gpu_price_configured:config", `price="`+what+`"`) + ")"
	}

	// The funnel: the whole cluster (pods and Slurm jobs; the namespace variable does not
	// apply).
	d.WithRow(row("Allocation funnel"))
	total := "sum(" + c.sel("cluster:gpus_total:count") + ")"
	tier := func(t string) string { return "sum(" + c.sel("cluster:gpus_"+t+":sum") + ")" }
	funnelStat := func(title, expr, desc string) *stat.PanelBuilder {
		return statPanel(title, units.Short, instant(expr, "")).Description(desc).Decimals(1).Thresholds(plain())
	}
	add(d, 4, 4,
		funnelStat("GPUs", total, "Whole GPUs the agents read (nvidia_gpu_count), the funnel's top. The whole cluster: the namespace variable does not apply to this row."),
		funnelStat("Allocated", tier("allocated"), "GPUs held by pods and Slurm jobs, by share: a whole GPU is 1, a MIG instance its compute slices over its GPU's (3g on an H100: 3/7), a time-sliced GPU split between its pods."),
		funnelStat("Active", tier("active"), "Allocated GPUs whose owner runs something on them: a process holds framebuffer, or its utilization is above the idle threshold."),
		funnelStat("Effective", tier("effective"), "Allocated GPUs weighted by utilization: what the owners actually use."),
		funnelStat("Idle", tier("idle"), "Allocated minus effective: GPUs paid for and not used.").Thresholds(scale("green", step{1, "orange"})),
		statPanel("Effective share of allocated", units.PercentUnit, instant(tier("effective")+" / "+tier("allocated"), "")).
			Description("Effective over allocated GPUs: how much of what is held is used. Blue under the low-utilization threshold.").
			Thresholds(utilizationScale()).Min(0).Max(1),
	)
	var funnelNow, funnelHours []*prometheus.DataqueryBuilder
	funnelNow = append(funnelNow, query(total, "Total"))
	funnelHours = append(funnelHours, instant("sum("+c.sel("cluster:gpu_hours_total:sum1h")+")", "Total"))
	for _, t := range costTiers {
		funnelNow = append(funnelNow, query(tier(t.tier), t.legend))
		funnelHours = append(funnelHours, instant("sum("+c.sel("cluster:gpu_hours_"+t.tier+":sum1h")+")", t.legend))
	}
	add(d, 16, 8,
		timeSeries("Allocation funnel over time", units.Short, funnelNow...).
			Description("GPUs in each tier of the funnel. Idle (dashed) is allocated minus effective.").Min(0).Decimals(2).
			OverrideByQuery("E", dashed(fixedColor("orange"))),
	)
	add(d, 8, 8,
		barGauge("GPU-hours in the trailing hour", units.Short, funnelHours...).
			Description("GPU-hours of each tier over the last hour (the gauge integrated once a minute): what the cost rules price.").
			Decimals(1).Thresholds(plain()).OverrideByQuery("E", props(fixedColor("orange"))),
	)
	noPool := func(expr string) string {
		return `label_replace(` + expr + `, "k8s_node_pool", "(no pool)", "k8s_node_pool", "")`
	}
	poolQueries := []*prometheus.DataqueryBuilder{tableQuery(noPool("sum by (cluster, k8s_node_pool) (" + c.sel("node_pool:gpus_total:count") + ")"))}
	poolCols := []string{"cluster", "Cluster", "k8s_node_pool", "Node pool", "Value #A", "GPUs"}
	for i, t := range costTiers {
		poolQueries = append(poolQueries, tableQuery(noPool("sum by (cluster, k8s_node_pool) ("+c.sel("node_pool:gpus_"+t.tier+":sum")+")")))
		poolCols = append(poolCols, "Value #"+string(rune('B'+i)), strings.Fields(t.legend)[0])
	}
	add(d, 24, 7,
		tablePanel("Funnel by node pool", units.Short, cols(poolCols...), poolQueries...).
			Description("The funnel per node pool (the k8s_node_pool label, which the agents carry only when k8s_attributes is set to name the pool: rules/README.md, \"Node pools\"; nodes without one are under (no pool)).").
			Decimals(2).SortBy(sorted("GPUs", true)),
	)

	// Prices and idle cost per namespace. Sums over namespace and Slurm job series: with
	// the namespace variable at All, k8s_namespace_name=~".*" matches the jobs too (they
	// have no namespace); with a namespace chosen, only its pods.
	d.WithRow(row("Idle cost by namespace"))
	costOf := func(kind, period string) string {
		return "sum(" + ns.sel("namespace:gpu_cost_"+kind+":"+period) + " or " + ns.sel("slurm_job:gpu_cost_"+kind+":"+period) + ")"
	}
	add(d, 4, 4,
		statPanel("GPU models with a price", units.Short, instant(configured("gpu_hour"), "")).
			Description("How many GPU models "+pricing.File+" prices (cluster:gpu_price_configured:config). With none, every cost on this dashboard is empty: edit the file, regenerate (make generate) and reload rules/gpu-prices.yaml.").
			Decimals(0).Thresholds(scale("orange", step{1, "green"})).ColorMode(background).
			Mappings([]dashboard.ValueMapping{valueText([3]string{"0", NoPriceSet, "orange"})}).
			NoValue("price rules not loaded (rules/gpu-prices.yaml)"),
		statPanel("kWh price", units.Short, instant(configured("energy_kwh"), "")).
			Description("Whether "+pricing.File+" sets a price per kWh (energy_kwh), which prices the energy the pods and jobs use.").
			Thresholds(scale("orange", step{1, "green"})).ColorMode(background).
			Mappings([]dashboard.ValueMapping{valueText([3]string{"0", "no kWh price set (" + pricing.File + ")", "orange"}, [3]string{"1", "set", "green"})}).
			NoValue("price rules not loaded (rules/gpu-prices.yaml)"),
		statPanel("GPUs without a price", units.Short, instant("sum("+scope{mClusterOrNone}.sel("hw_model:gpus_unpriced:count")+") or vector(0)", "")).
			Description("GPUs whose model has no price in "+pricing.File+": the costs leave them out (all clusters). The models are in \"GPU models\" below.").
			Decimals(0).Thresholds(warnIfAny()).ColorMode(background),
		statPanel("Allocated cost, last 24 h"+cur, units.Short, instant(costOf("allocated", "sum1d"), "")).
			Description("What the GPUs held by the namespace's pods (and, with All, Slurm jobs) cost over the last 24 hours, each GPU model at its price.").
			Decimals(2).Thresholds(plain()).NoValue(noCost),
		statPanel("Idle cost, last 24 h"+cur, units.Short, instant(costOf("idle", "sum1d"), "")).
			Description("Cost of the idle share (allocated minus effective GPU-hours) over the last 24 hours.").
			Decimals(2).Thresholds(scale("green", step{0.01, "orange"})).NoValue(noCost),
		statPanel("Idle share of allocated cost, last 24 h", units.PercentUnit, instant(costOf("idle", "sum1d")+" / "+costOf("allocated", "sum1d"), "")).
			Description("Idle cost over allocated cost: the share of the GPU bill nothing used.").
			Thresholds(scale("green", step{0.5, "orange"})).Min(0).Max(1).NoValue(noCost),
	)
	add(d, 12, 8,
		barGauge("Idle cost by namespace, last 24 h"+cur, units.Short,
			instant("sort_desc(sum by (k8s_namespace_name) ("+ns.sel("namespace:gpu_cost_idle:sum1d")+"))", "{{k8s_namespace_name}}")).
			Description("Each namespace's idle cost over the last 24 hours (namespace:gpu_cost_idle:sum1d; GPUIdleCostHigh fires on it).").
			Decimals(2).Thresholds(plain()).NoValue(noCost),
		timeSeries("Idle cost by namespace, per trailing hour"+cur, units.Short,
			query("sum by (k8s_namespace_name) ("+ns.sel("namespace:gpu_cost_idle:sum1h")+")", "{{k8s_namespace_name}}")).
			Description("Idle cost of the hour before each point (namespace:gpu_cost_idle:sum1h).").
			Min(0).Decimals(2).Stacking(normalStack()).FillOpacity(60).NoValue(noCost),
	)
	nsCost := func(kind, period string) string {
		return "sum by (cluster, k8s_namespace_name) (" + ns.sel("namespace:gpu_cost_"+kind+":"+period) + ")"
	}
	add(d, 24, 8,
		tablePanel("Cost by namespace"+cur, units.Short,
			cols("cluster", "Cluster", "k8s_namespace_name", "Namespace", "Value #A", "Allocated, 24 h", "Value #B", "Used (effective), 24 h",
				"Value #C", "Idle, 24 h", "Value #D", "Energy, 24 h", "Value #E", "Idle, 30 days", "Value #F", "GPUs allocated now", "Value #G", "GPUs idle now"),
			tableQuery(nsCost("allocated", "sum1d")), tableQuery(nsCost("effective", "sum1d")), tableQuery(nsCost("idle", "sum1d")),
			tableQuery(nsCost("energy", "sum1d")), tableQuery(nsCost("idle", "sum30d")),
			tableQuery("sum by (cluster, k8s_namespace_name) ("+ns.sel("namespace:gpus_allocated:sum")+")"),
			tableQuery("sum by (cluster, k8s_namespace_name) ("+ns.sel("namespace:gpus_idle:sum")+")"),
		).Description("Per namespace: the cost of the GPU-hours allocated, used (effective) and idle, and of the energy (at the kWh price), over the last 24 hours; idle over 30 days; and the GPUs it holds and leaves idle now (by share).").
			Decimals(2).NoValue(noCost).SortBy(sorted("Idle, 24 h", true)),
	)

	// The top idle workloads, and Slurm jobs.
	d.WithRow(row("Top idle workloads"))
	wl := func(metric string) string {
		return workloadName("sum by (" + byWorkload + ") (" + ns.sel(metric) + ")")
	}
	topIdle := "topk(20, " + wl("namespace_workload:gpu_cost_idle:sum1d") + ")"
	inTop := func(metric string) string { return wl(metric) + " and on (" + byWorkload + ") " + topIdle }
	add(d, 24, 9,
		tablePanel("Top idle workloads, last 24 h"+cur, units.Short,
			cols("cluster", "Cluster", "k8s_namespace_name", "Namespace", "workload_kind", "Kind", "workload", "Workload", "Value #A", "Idle, 24 h", "Value #B", "Allocated, 24 h",
				"Value #C", "Used (effective), 24 h", "Value #D", "Idle GPU-hours, last hour", "Value #E", "GPUs idle now").hiding(workloadLabels...),
			tableQuery(topIdle),
			tableQuery(inTop("namespace_workload:gpu_cost_allocated:sum1d")),
			tableQuery(inTop("namespace_workload:gpu_cost_effective:sum1d")),
			tableQuery(inTop("namespace_workload:gpu_hours_idle:sum1h")),
			tableQuery(inTop("namespace_workload:gpus_idle:sum")),
		).Description("The 20 workloads (deployment, stateful set, daemon set, job or cron job; pods without an owner as (bare pods) of their namespace) whose idle GPUs cost most over the last 24 hours: release idle GPUs, scale down, or move light workloads to MIG instances or shared GPUs. Workload names need k8s_attributes on the agents.").
			Decimals(2).NoValue(noCost).SortBy(sorted("Idle, 24 h", true)).
			OverrideByName("Value #D", props(prop("decimals", 1))).OverrideByName("Value #E", props(prop("decimals", 2))),
	)
	add(d, 12, 8,
		barGauge("Idle GPUs now, top workloads", units.Short,
			instant("topk(10, "+wl("namespace_workload:gpus_idle:sum")+")", "{{k8s_namespace_name}} {{workload_kind}} {{workload}}")).
			Description("GPUs (by share) each workload holds and leaves idle now: allocated minus utilization-weighted. Needs no price.").
			Decimals(2).Thresholds(plain()),
	)
	job := scope{mCluster}
	jobs := "cluster, slurm_job_id, slurm_job_sluid"
	topJobs := "topk(20, sum by (" + jobs + ") (" + job.sel("slurm_job:gpu_cost_idle:sum1d") + "))"
	jobInTop := func(metric string) string {
		return "sum by (" + jobs + ") (" + job.sel(metric) + ") and on (" + jobs + ") " + topJobs
	}
	add(d, 12, 8,
		tablePanel("Slurm jobs by idle cost, last 24 h"+cur, units.Short,
			cols("cluster", "Cluster", "slurm_job_id", "Job", "slurm_job_sluid", "SLUID", "Value #A", "Idle, 24 h", "Value #B", "Allocated, 24 h", "Value #C", "GPUs idle now"),
			tableQuery(topJobs),
			tableQuery(jobInTop("slurm_job:gpu_cost_allocated:sum1d")),
			tableQuery(jobInTop("slurm_job:gpus_idle:sum")),
		).Description("Slurm jobs on bare-metal nodes (no namespace: the namespace variable does not apply), by the cost of their idle GPU-hours over the last 24 hours. A job counts on a GPU while one of its processes runs there.").
			Decimals(2).NoValue(noCost).SortBy(sorted("Idle, 24 h", true)),
	)

	// Cost per GPU model: the per-model GPU-hours of pods and jobs at the model's price.
	d.WithRow(row("Cost per GPU model"))
	perModel := func(level, metric string) string {
		return "sum by (hw_model) (" + ns.sel("namespace_workload_model:"+level+":"+metric) + " or " + ns.sel("slurm_job_model:"+level+":"+metric) + ")"
	}
	modelCost := func(t string) string {
		return "sum by (hw_model) ((" + ns.sel("namespace_workload_model:gpu_hours_"+t+":sum1h") + " or " + ns.sel("slurm_job_model:gpu_hours_"+t+":sum1h") +
			") * on (hw_model) group_left () " + price + ")"
	}
	add(d, 12, 8,
		barGauge("Cost per GPU model, trailing hour"+cur, units.Short,
			instant("sort_desc("+modelCost("allocated")+")", "{{hw_model}}")).
			Description("What the GPU-hours allocated over the last hour cost, per GPU model (pods and, with the namespace variable at All, Slurm jobs).").
			Decimals(2).Thresholds(plain()).NoValue(noCost),
	)
	add(d, 12, 8,
		tablePanel("GPU models"+cur, units.Short,
			cols("hw_model", "Model", "Value #A", "Price per GPU-hour", "Value #B", "GPUs", "Value #C", "Allocated now", "Value #D", "Idle now",
				"Value #E", "Allocated cost per hour now", "Value #F", "Idle cost per hour now"),
			tableQuery(price),
			tableQuery("sum by (hw_model) ("+scope{mClusterOrNone}.sel("hw_model:gpu_count:count")+")"),
			tableQuery(perModel("gpus_allocated", "sum")),
			tableQuery(perModel("gpus_idle", "sum")),
			tableQuery(perModel("gpus_allocated", "sum")+" * on (hw_model) group_left () "+price),
			tableQuery(perModel("gpus_idle", "sum")+" * on (hw_model) group_left () "+price),
		).Description("Each GPU model: its price in "+pricing.File+" (empty: no price, so no cost), the GPUs the agents read (all clusters), the GPUs allocated and idle now (by share), and what they cost per hour at that rate.").
			Decimals(2).SortBy(sorted("Allocated cost per hour now", true)),
	)
	var modelSeries []*prometheus.DataqueryBuilder
	for _, t := range []string{"allocated", "idle"} {
		modelSeries = append(modelSeries, query(modelCost(t), "{{hw_model}} "+t))
	}
	add(d, 24, 8,
		timeSeries("Cost per GPU model, per trailing hour"+cur, units.Short, modelSeries...).
			Description("Allocated (solid) and idle (dashed) cost of the hour before each point, per GPU model.").
			Min(0).Decimals(2).NoValue(noCost).OverrideByQuery("B", dashed()),
	)

	// MIG instances and shared GPUs: one row per (device, pod) with the pod's share.
	d.WithRow(row("MIG instances and shared GPUs by their users"))
	group := "namespace_workload_pod_gpu:gpu_allocated:group"
	sharedOrMIG := "(group by (host_name, hw_id) (" + c.sel(group, `hw_parent!=""`) + ") or (count by (host_name, hw_id) (" + c.sel(group) + ") > 1))"
	byUser := "cluster, host_name, hw_parent, hw_id, hw_model, nvidia_mig_profile, k8s_namespace_name, k8s_pod_name"
	share := func(t string) string {
		return "sum by (" + byUser + ") (" + ns.sel("namespace_workload_pod_gpu:gpus_"+t+":share") + " and on (host_name, hw_id) " + sharedOrMIG + ")"
	}
	add(d, 24, 10,
		tablePanel("Users of MIG instances and shared GPUs"+cur, units.Short,
			cols("cluster", "Cluster", "host_name", "Node", "hw_parent", "GPU (of a MIG instance)", "hw_id", "GPU or MIG instance", "hw_model", "Model",
				"nvidia_mig_profile", "MIG profile", "k8s_namespace_name", "Namespace", "k8s_pod_name", "Pod",
				"Value #A", "Allocated", "Value #B", "Active", "Value #C", "Effective", "Value #D", "Idle",
				"Value #E", "Allocated cost per hour", "Value #F", "Idle cost per hour"),
			tableQuery(share("allocated")), tableQuery(share("active")), tableQuery(share("effective")), tableQuery(share("idle")),
			tableQuery(share("allocated")+" * on (hw_model) group_left () "+price),
			tableQuery(share("idle")+" * on (hw_model) group_left () "+price),
		).Description("Each pod on a MIG instance or on a GPU (or instance) several pods share, with its share of a whole GPU: a MIG instance counts its compute slices over its GPU's, a shared device is split between its pods by their utilization now (equally while none is busy, and under MIG). Active: a process of the pod holds framebuffer or runs; effective: weighted by utilization; idle: allocated minus effective. The cost columns price the share at the model's price per hour (empty without a price).").
			Decimals(3).SortBy(sorted("Node", false)).
			OverrideByName("Value #E", props(prop("decimals", 2))).OverrideByName("Value #F", props(prop("decimals", 2))),
	)
	userLegend := "{{k8s_namespace_name}}/{{k8s_pod_name}} on {{host_name}} {{hw_id}} {{nvidia_mig_profile}}"
	add(d, 12, 8,
		timeSeries("Effective share per user", units.Short, query(share("effective"), userLegend)).
			Description("Each user's utilization-weighted share of a whole GPU on MIG instances and shared GPUs.").Min(0).Decimals(3),
		barGauge("Users per shared device", units.Short,
			instant("count by (host_name, hw_id, hw_model, nvidia_mig_profile) ("+c.sel(group)+") > 1", "{{host_name}} {{hw_id}} {{nvidia_mig_profile}}")).
			Description("GPUs and MIG instances several pods share (time-slicing or MPS), with how many pods.").
			Decimals(0).Thresholds(plain()),
	)
	return d
}
