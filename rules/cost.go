package rules

import (
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pricing"
	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
)

// Prices come from internal/pricing/prices.yaml, written into their own rule file,
// gpu-prices.yaml, so that the cost rules of gpu-recording.yaml (and their tests, which
// give prices as input series) do not change with them.
const (
	pricePerHour    = "hw_model:gpu_price_per_hour:config"
	pricePerKWh     = "cluster:gpu_price_per_kwh:config"
	priceConfigured = "cluster:gpu_price_configured:config"
)

// PriceSeries are the series gpu-prices.yaml records only for the prices that are set
// (none by default); every other series a rule reads is recorded or in the metric
// contract.
var PriceSeries = []string{pricePerHour, pricePerKWh}

// priceGroup turns the prices into recording rules.
func priceGroup(p pricing.Prices) Group {
	var rules []Rule
	if models := p.Models(); len(models) > 0 {
		var branches []string
		for _, m := range models {
			branches = append(branches, `label_replace(vector(`+num(p.GPUHour[m])+`), "hw_model", "`+m+`", "", "")`)
		}
		rules = append(rules, Rule{
			Comment: "Price of one whole GPU for one hour, per GPU model (" + pricing.File + ").",
			Record:  pricePerHour,
			Expr:    oneOrMore(branches),
		})
	}
	if p.EnergyKWh != nil {
		rules = append(rules, Rule{
			Comment: "Price of one kWh (" + pricing.File + ").",
			Record:  pricePerKWh,
			Expr:    "vector(" + num(*p.EnergyKWh) + ")",
		})
	}
	energy := 0
	if p.EnergyKWh != nil {
		energy = 1
	}
	configured := `  label_replace(vector(` + strconv.Itoa(len(p.GPUHour)) + `), "price", "gpu_hour", "", "")
or
  label_replace(vector(` + strconv.Itoa(energy) + `), "price", "energy_kwh", "", "")`
	if p.Currency != "" {
		configured = `  label_replace(
` + indent(configured, "    ") + `,
    "currency", "` + p.Currency + `", "", ""
  )`
	}
	rules = append(rules, Rule{
		Comment: "What " + pricing.File + " sets: price=\"gpu_hour\", the number of GPU models with a price; price=\"energy_kwh\", 1 if a kWh price is set. 0: no price set, and the cost rules are empty (a dashboard says \"no price set\" instead of a figure).",
		Record:  priceConfigured,
		Expr:    configured,
	})
	return Group{Name: "gpu-price.rules", Rules: rules}
}

// oneOrMore joins alternatives with or, one per line.
func oneOrMore(alternatives []string) string {
	if len(alternatives) == 1 {
		return alternatives[0]
	}
	return "  " + strings.Join(alternatives, "\nor\n  ")
}

// costLevels are the owners costs are written for.
var costLevels = []string{"namespace_workload", "namespace", "slurm_job"}

// costKinds: GPU time allocated, used (effective) and idle, and energy.
var costKinds = []string{"allocated", "effective", "idle", "energy"}

func cost() Group {
	rules := []Rule{{
		Comment: "Energy each workload used on GPUs over the trailing hour, in kWh (its pods' share of each GPU's energy; none under MIG, where NVML has no per-process figures).",
		Record:  "namespace_workload:gpu_energy_kwh:sum",
		Expr:    `sum by (` + byWorkload + `) (increase(nvidia_gpu_pod_energy_joules_total[1h])) / 3.6e6`,
	}}
	for i, t := range tiers {
		if t == "active" {
			continue
		}
		r := Rule{
			Record: "namespace_workload:gpu_cost_" + t + ":sum1h",
			Expr: `  sum by (` + byWorkload + `) (
    namespace_workload_model:gpu_hours_` + t + `:sum1h * on (hw_model) group_left () ` + pricePerHour + `
  )`,
		}
		if i == 0 {
			r.Comment = "Cost over the trailing hour of the GPU-hours allocated, used (effective) and idle (allocated - effective), each GPU model at its price (gpu-prices.yaml): a model without a price adds nothing, and with no price set there is no cost series at all. In the currency of the price file."
		}
		rules = append(rules, r, Rule{
			Record: "slurm_job:gpu_cost_" + t + ":sum1h",
			Expr: `  sum by (` + byJob + `) (
    slurm_job_model:gpu_hours_` + t + `:sum1h * on (hw_model) group_left () ` + pricePerHour + `
  )`,
		})
	}
	rules = append(rules,
		Rule{
			Comment: "Cost of the energy used over the trailing hour, at the kWh price.",
			Record:  "namespace_workload:gpu_cost_energy:sum1h",
			Expr:    `namespace_workload:gpu_energy_kwh:sum * on () group_left () ` + pricePerKWh,
		},
		Rule{
			Record: "slurm_job:gpu_cost_energy:sum1h",
			Expr:   `slurm_job:gpu_energy_kwh:sum * on () group_left () ` + pricePerKWh,
		},
	)
	for i, k := range costKinds {
		r := Rule{
			Record: "namespace:gpu_cost_" + k + ":sum1h",
			Expr:   `sum by (cluster, k8s_namespace_name) (namespace_workload:gpu_cost_` + k + `:sum1h)`,
		}
		if i == 0 {
			r.Comment = "Per namespace, the sum of its workloads (bare pods included)."
		}
		rules = append(rules, r)
	}
	rules = append(rules, Rule{
		Comment: "GPUs of each model that has no price: the cost rules leave them out.",
		Record:  "hw_model:gpus_unpriced:count",
		Expr:    `hw_model:gpu_count:count unless on (hw_model) ` + pricePerHour,
	})
	return Group{Name: "gpu-cost.rules", Rules: rules}
}

// costPeriods: the trailing day and 30 days, as the sum of the hourly costs sampled once an
// hour (24 and 720 samples; the range a second short, as in hourly).
var costPeriods = []struct{ op, window string }{
	{"sum1d", "23h59m59s"},
	{"sum30d", "29d23h59m59s"},
}

func costPeriod() Group {
	var rules []Rule
	for _, l := range costLevels {
		for _, k := range costKinds {
			for _, p := range costPeriods {
				r := Rule{
					Record: l + ":gpu_cost_" + k + ":" + p.op,
					Expr:   `sum_over_time(` + l + `:gpu_cost_` + k + `:sum1h[` + p.window + `:1h])`,
				}
				if len(rules) == 0 {
					r.Comment = "Cost over the trailing day and 30 days: the hourly costs sampled once an hour and summed. The group runs every 2 minutes, not at every evaluation: the 30-day sums read a month of each hourly series; 2 minutes stays under Prometheus's 5-minute lookback, so the series never lapse between evaluations (an alert's for: would restart)."
				}
				rules = append(rules, r)
			}
		}
	}
	return Group{Name: "gpu-cost-period.rules", Interval: "2m", Rules: rules}
}

func costAlerts() Group {
	return Group{Name: "gpu-cost", Rules: []Rule{{
		Alert:       "GPUIdleCostHigh",
		Comment:     "Needs gpu-recording.yaml and gpu-prices.yaml (a GPU price set). Value: the namespace's idle GPU cost over the last 24 hours (allocated - effective GPU-hours, each GPU model at its price), in the price file's currency.",
		Expr:        `namespace:gpu_cost_idle:sum1d > ` + num(thresholds.IdleCostPerDay),
		For:         "1h",
		Severity:    "info",
		Summary:     "Namespace {{ $labels.k8s_namespace_name }}{{ with $labels.cluster }} in cluster {{ . }}{{ end }} paid {{ $value | printf \"%.2f\" }} for idle GPUs over the last 24 hours.",
		Description: "Over the last 24 hours namespace {{ $labels.k8s_namespace_name }}{{ with $labels.cluster }} in cluster {{ . }}{{ end }} was allocated GPUs it did not use worth {{ $value | printf \"%.2f\" }} (allocated minus effective, utilization-weighted GPU-hours, each GPU model at its price in " + pricing.File + "), more than " + num(thresholds.IdleCostPerDay) + ". Allocated: {{ with printf \"namespace:gpu_cost_allocated:sum1d{k8s_namespace_name=%q,cluster=%q}\" $labels.k8s_namespace_name $labels.cluster | query }}{{ . | first | value | printf \"%.2f\" }}{{ end }}; used: {{ with printf \"namespace:gpu_cost_effective:sum1d{k8s_namespace_name=%q,cluster=%q}\" $labels.k8s_namespace_name $labels.cluster | query }}{{ . | first | value | printf \"%.2f\" }}{{ end }}. namespace_workload:gpu_cost_idle:sum1d names the workloads: release idle GPUs, scale down, or move light workloads to MIG instances or shared GPUs.",
	}}}
}
