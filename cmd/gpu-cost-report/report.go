package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Row levels.
const (
	levelNamespace = "namespace"
	levelWorkload  = "workload"
	levelJob       = "job"
)

// row is one line of the report.
type row struct {
	Level         string
	Cluster       string
	Namespace     string
	WorkloadKind  string // Deployment, StatefulSet, DaemonSet, Job, CronJob; empty for bare pods
	Workload      string
	SlurmJobID    string
	SlurmJobSLUID string
	GPUModel      string
	Figures       figures
}

// report is what is written.
type report struct {
	Start, End time.Time
	Currency   string
	Rows       []row
	Warnings   []string
}

// build turns what the queries returned into rows at the levels asked for, and says what
// the figures cannot tell (no price, data missing from part of the period).
func build(c *collected, o options) (*report, error) {
	r := &report{Start: o.Start, End: o.End, Warnings: slices.Clone(c.warnings)}
	if o.EndClamped {
		r.Warnings = append(r.Warnings, fmt.Sprintf("the period ended in the future: reported up to %s", o.End.Format(time.RFC3339)))
	}
	if c.coverage.minutes == 0 {
		return nil, fmt.Errorf("Prometheus holds no otelcol-gpu data for %s to %s (%s is absent): are rules/gpu-recording.yaml loaded, do the agents write to it, and is the period within its retention?",
			o.Start.Format(time.RFC3339), o.End.Format(time.RFC3339), gpusTotal)
	}
	r.Warnings = append(r.Warnings, coverageWarnings(c.coverage, o)...)

	if len(c.prices.currencies) > 1 {
		var cs []string
		for cur := range c.prices.currencies {
			cs = append(cs, fmt.Sprintf("%q", cur))
		}
		sort.Strings(cs)
		return nil, fmt.Errorf("the currency of the prices changed within the period (%s): report the parts on either side of the change apart", strings.Join(cs, ", "))
	}
	for cur := range c.prices.currencies {
		r.Currency = cur
	}

	owners := make([]*owner, 0, len(c.owners))
	for _, ow := range c.owners {
		// The rules record the active share only while it is active: an allocated owner
		// with no active series was active 0 hours (effective, by contrast, is absent
		// where nothing measures it, and stays empty).
		if ow.f[hoursAllocated].OK && !ow.f[hoursActive].OK {
			ow.f[hoursActive] = figure{OK: true}
		}
		owners = append(owners, ow)
	}
	r.Warnings = append(r.Warnings, priceCosts(owners, c.prices, c.coverage)...)

	for _, level := range o.Levels {
		r.Rows = append(r.Rows, rowsAt(level, owners)...)
	}
	return r, nil
}

// coverageWarnings says where the period has no data: before the first sample (retention,
// or the rules loaded later), after the last, or gaps.
func coverageWarnings(cv coverage, o options) []string {
	var out []string
	// Minutes stand for the minute that ends at them: the first is start+1m. Prometheus
	// looks back 5 minutes, so a few minutes' slack.
	const slack = 5 * time.Minute
	first, last := o.Start.Add(time.Minute), o.End
	if cv.first.Sub(first) > slack {
		out = append(out, fmt.Sprintf("no data before %s, %s after the period starts (%s is absent: older than the retention, or before the agents or rules/gpu-recording.yaml were there): the figures cover the rest",
			cv.first.Format(time.RFC3339), cv.first.Sub(o.Start).Round(time.Minute), gpusTotal))
	}
	if last.Sub(cv.last) > slack {
		out = append(out, fmt.Sprintf("no data after %s, %s before the period ends: the figures stop there", cv.last.Format(time.RFC3339), o.End.Sub(cv.last).Round(time.Minute)))
	}
	span := int(cv.last.Sub(cv.first)/time.Minute) + 1
	if missing := span - cv.minutes; missing > 5 {
		out = append(out, fmt.Sprintf("data missing for %d minutes between %s and %s (Prometheus, the rules or the agents down?): those minutes count nothing", missing, cv.first.Format(time.RFC3339), cv.last.Format(time.RFC3339)))
	}
	return out
}

// priceCosts empties the cost figures nothing priced, and warns about each: no price at
// all, GPU models without a price, no kWh price, prices set for part of the period only.
func priceCosts(owners []*owner, p prices, cv coverage) []string {
	var warnings []string
	if !p.configured {
		for _, ow := range owners {
			for _, i := range []int{costAllocated, costEffective, costIdle, costEnergy} {
				ow.f[i] = figure{}
			}
		}
		return []string{"no price set: internal/pricing/prices.yaml (" + priceConfigured + " is 0 or absent over the period): the cost columns are empty; set prices there, regenerate rules/gpu-prices.yaml (make generate) and load it into Prometheus"}
	}
	unpriced, partial := map[string]bool{}, map[string]int{}
	energyUsed := false
	for _, ow := range owners {
		model := ow.labels["hw_model"]
		switch n := p.modelMinutes[model]; {
		case n == 0:
			unpriced[model] = true
			for _, i := range []int{costAllocated, costEffective, costIdle} {
				ow.f[i] = figure{}
			}
		default:
			if n < cv.minutes {
				partial[model] = n
			}
			// A priced model's tier that was measured costs something, if only 0 (its
			// hours fell in minutes without a price).
			for t, ci := range costTiers {
				if ow.f[hoursAllocated+slices.Index(tiers, t)].OK && !ow.f[ci].OK {
					ow.f[ci] = figure{OK: true}
				}
			}
		}
		if ow.f[energyKWh].OK {
			energyUsed = true
			if p.kwhMinutes == 0 {
				ow.f[costEnergy] = figure{}
			} else if !ow.f[costEnergy].OK {
				ow.f[costEnergy] = figure{OK: true}
			}
		}
	}
	if len(unpriced) > 0 {
		warnings = append(warnings, fmt.Sprintf("no price for GPU model(s) %s in internal/pricing/prices.yaml: their GPU cost columns are empty", quoteSorted(unpriced)))
	}
	for _, m := range sortedKeys(partial) {
		warnings = append(warnings, fmt.Sprintf("GPU model %q had a price for %d of the %d minutes with data: its cost counts the priced minutes only", m, partial[m], cv.minutes))
	}
	switch {
	case energyUsed && p.kwhMinutes == 0:
		warnings = append(warnings, "no kWh price set (energy_kwh in internal/pricing/prices.yaml): cost_energy is empty")
	case energyUsed && p.kwhMinutes < cv.minutes:
		warnings = append(warnings, fmt.Sprintf("the kWh price was set for %d of the %d minutes with data: cost_energy counts those only", p.kwhMinutes, cv.minutes))
	}
	return warnings
}

// workload names a pod's workload from k8s_attributes' owner names: a cron job's pods
// count under the cron job (its jobs come and go), a bare pod under none.
func workload(l map[string]string) (kind, name string) {
	for _, w := range []struct{ label, kind string }{
		{"k8s_cronjob_name", "CronJob"},
		{"k8s_deployment_name", "Deployment"},
		{"k8s_statefulset_name", "StatefulSet"},
		{"k8s_daemonset_name", "DaemonSet"},
		{"k8s_job_name", "Job"},
	} {
		if v := l[w.label]; v != "" {
			return w.kind, v
		}
	}
	return "", ""
}

// rowsAt sums the owners into rows of a level, sorted.
func rowsAt(level string, owners []*owner) []row {
	byKey := map[string]*row{}
	for _, ow := range owners {
		r := row{Level: level, Cluster: ow.labels["cluster"], GPUModel: ow.labels["hw_model"]}
		switch {
		case ow.src == &jobs && level == levelJob:
			r.SlurmJobID, r.SlurmJobSLUID = ow.labels["slurm_job_id"], ow.labels["slurm_job_sluid"]
		case ow.src == &pods && level == levelNamespace:
			r.Namespace = ow.labels["k8s_namespace_name"]
		case ow.src == &pods && level == levelWorkload:
			r.Namespace = ow.labels["k8s_namespace_name"]
			r.WorkloadKind, r.Workload = workload(ow.labels)
		default:
			continue
		}
		key := strings.Join([]string{r.Cluster, r.Namespace, r.WorkloadKind, r.Workload, r.SlurmJobID, r.SlurmJobSLUID, r.GPUModel}, "\xff")
		if have := byKey[key]; have != nil {
			have.Figures.addAll(ow.f)
		} else {
			r.Figures = ow.f
			byKey[key] = &r
		}
	}
	out := make([]row, 0, len(byKey))
	for _, r := range byKey {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		for _, p := range [][2]string{{a.Cluster, b.Cluster}, {a.Namespace, b.Namespace}, {a.WorkloadKind, b.WorkloadKind}, {a.Workload, b.Workload}, {a.SlurmJobID, b.SlurmJobID}, {a.SlurmJobSLUID, b.SlurmJobSLUID}, {a.GPUModel, b.GPUModel}} {
			if p[0] != p[1] {
				return p[0] < p[1]
			}
		}
		return false
	})
	return out
}

// round keeps 4 decimals: a ten-thousandth of a GPU-hour (0.36 s), a kWh or a currency
// unit; the integrals' floating-point noise goes.
func round(v float64) float64 {
	r := math.Round(v*1e4) / 1e4
	if r == 0 {
		return 0 // no -0
	}
	return r
}

func quoteSorted(set map[string]bool) string {
	var out []string
	for _, k := range sortedKeys(set) {
		out = append(out, fmt.Sprintf("%q", k))
	}
	return strings.Join(out, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
