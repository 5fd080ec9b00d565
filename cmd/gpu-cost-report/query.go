package main

import (
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// The series the report reads: the allocation funnel's gauges per workload (or Slurm
// job) and GPU model, the per-owner energy counters the energy rules read, the prices
// of rules/gpu-prices.yaml and the GPUs the agents read (rules/funnel.go, rules/cost.go).
const (
	pricePerHour    = "hw_model:gpu_price_per_hour:config"
	pricePerKWh     = "cluster:gpu_price_per_kwh:config"
	priceConfigured = "cluster:gpu_price_configured:config"
	gpusTotal       = "cluster:gpus_total:count"
)

// tiers of the funnel, in column order.
var tiers = []string{"allocated", "active", "effective", "idle"}

// costTiers are the tiers the cost rules price.
var costTiers = map[string]int{"allocated": costAllocated, "effective": costEffective, "idle": costIdle}

// source is one kind of owner the rules attribute GPUs to: pods (with their namespace and
// workload) or Slurm jobs.
type source struct {
	name   string
	gauge  string   // the tier's gauge, %s the tier
	labels []string // the gauge's labels the report keeps (the rules' own grouping, less the node pool)
	energy string   // the owner's energy counter, in joules
}

var (
	pods = source{
		name:   "pods",
		gauge:  "namespace_workload_model:gpus_%s:sum",
		labels: []string{"cluster", "k8s_namespace_name", "k8s_deployment_name", "k8s_statefulset_name", "k8s_daemonset_name", "k8s_job_name", "k8s_cronjob_name", "hw_model"},
		energy: "nvidia_gpu_pod_energy_joules_total",
	}
	jobs = source{
		name:   "jobs",
		gauge:  "slurm_job_model:gpus_%s:sum",
		labels: []string{"cluster", "slurm_job_id", "slurm_job_sluid", "hw_model"},
		energy: "nvidia_gpu_job_energy_joules_total",
	}
)

// Column indexes of figures.
const (
	hoursAllocated = iota
	hoursActive
	hoursEffective
	hoursIdle
	energyKWh
	costAllocated
	costEffective
	costIdle
	costEnergy
	nFigures
)

var figureNames = [nFigures]string{
	"gpu_hours_allocated", "gpu_hours_active", "gpu_hours_effective", "gpu_hours_idle", "energy_kwh",
	"cost_allocated", "cost_effective", "cost_idle", "cost_energy",
}

// figure is a value that may be absent (nothing measured it: an empty cell, never 0).
type figure struct {
	V  float64
	OK bool
}

type figures [nFigures]figure

func (f *figures) add(i int, v float64) { f[i].V += v; f[i].OK = true }

func (f *figures) addAll(o figures) {
	for i, x := range o {
		if x.OK {
			f.add(i, x.V)
		}
	}
}

// owner is one series of a source's gauges: its labels and what it added up to.
type owner struct {
	src    *source
	labels map[string]string
	f      figures
}

// chunk is one query span of the period, [start, end).
type chunk struct{ start, end time.Time }

func (c chunk) minutes() int { return int(c.end.Sub(c.start) / time.Minute) }

// window is the subquery range of a chunk evaluated at its end: a second short of the
// chunk, so that it holds the minutes start+1m … end whether ranges are closed at the
// start (Prometheus 2) or left-open (3), as the rules' hourly integrals do
// ([59m59s:1m]). Minute m stands for the minute that ends at m.
func (c chunk) window() string { return model.Duration(c.end.Sub(c.start) - time.Second).String() }

func (c chunk) full() string { return model.Duration(c.end.Sub(c.start)).String() }

func chunks(start, end time.Time, span time.Duration) []chunk {
	var out []chunk
	for s := start; s.Before(end); s = s.Add(span) {
		out = append(out, chunk{s, minTime(s.Add(span), end)})
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// tierQuery: GPU-hours of a tier, the gauge integrated once a minute (as the rules'
// …:gpu_hours_…:sum1h), per owner and GPU model.
func tierQuery(s source, tier string, c chunk) string {
	return fmt.Sprintf("sum by (%s) (sum_over_time(%s[%s:1m])) / 60",
		strings.Join(s.labels, ", "), fmt.Sprintf(s.gauge, tier), c.window())
}

// costQuery: the same with each minute at its GPU model's price of that minute (the
// cost rules multiply GPU-hours by hw_model:gpu_price_per_hour:config the same way). A
// model without a price gives no series.
func costQuery(s source, tier string, c chunk) string {
	return fmt.Sprintf("sum by (%s) (sum_over_time((%s * on (hw_model) group_left () %s)[%s:1m])) / 60",
		strings.Join(s.labels, ", "), fmt.Sprintf(s.gauge, tier), pricePerHour, c.window())
}

// energyQuery: kWh, as the energy rules compute it for the trailing hour
// (increase of the per-owner energy counters / 3.6e6), over the chunk.
func energyQuery(s source, c chunk) string {
	return fmt.Sprintf("sum by (%s) (increase(%s[%s])) / 3.6e6", strings.Join(s.labels, ", "), s.energy, c.full())
}

// prices is what the price rules said over the period.
type prices struct {
	modelMinutes map[string]int // minutes each GPU model had a price
	kwhMinutes   int            // minutes a kWh price was set
	configured   bool           // cluster:gpu_price_configured:config above 0 at some point
	currencies   map[string]bool
}

// coverage is which minutes of the period the funnel had data for.
type coverage struct {
	minutes     int // minutes with data
	first, last time.Time
}

// collected is everything the queries returned, summed over the chunks.
type collected struct {
	mu       sync.Mutex
	owners   map[string]*owner // by source and labels
	prices   prices
	coverage coverage
	warnings []string // Prometheus's own (partial answers), with --allow-partial
}

// queryAPI is the part of Prometheus's client the report uses.
type queryAPI interface {
	Query(ctx context.Context, query string, ts time.Time, opts ...v1.Option) (model.Value, v1.Warnings, error)
	QueryRange(ctx context.Context, query string, r v1.Range, opts ...v1.Option) (model.Value, v1.Warnings, error)
}

// collect queries the period chunk by chunk, o.Parallel chunks at a time, and sums the
// results. The first error stops it.
func collect(ctx context.Context, api queryAPI, o options, srcs []*source) (*collected, error) {
	res := &collected{owners: map[string]*owner{}, prices: prices{modelMinutes: map[string]int{}, currencies: map[string]bool{}}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan chunk)
	errs := make(chan error, o.Parallel)
	var wg sync.WaitGroup
	for range o.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := res.chunk(ctx, api, o, srcs, c); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		}()
	}
feed:
	for _, c := range chunks(o.Start, o.End, o.Span) {
		select {
		case work <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return res, nil
}

// chunkResult is one chunk's answers, merged into collected at the end.
type chunkResult struct {
	owners   map[string]*owner
	prices   prices
	coverage coverage
	warnings []string
}

// chunk runs a chunk's queries one after the other.
func (res *collected) chunk(ctx context.Context, api queryAPI, o options, srcs []*source, c chunk) error {
	r := chunkResult{owners: map[string]*owner{}, prices: prices{modelMinutes: map[string]int{}, currencies: map[string]bool{}}}
	q := func(query string, each func(model.Metric, float64)) error {
		return instant(ctx, api, o, query, c.end, &r.warnings, each)
	}

	// What was priced: minutes per GPU model, the kWh price's minutes and their sum, and
	// what cluster:gpu_price_configured:config said (with the currency).
	var kwhPriceSum float64
	kwhSeries := 0
	steps := []struct {
		query string
		each  func(model.Metric, float64)
	}{
		{fmt.Sprintf("count_over_time(%s[%s:1m])", pricePerHour, c.window()), func(m model.Metric, v float64) {
			r.prices.modelMinutes[string(m["hw_model"])] += int(v)
		}},
		{fmt.Sprintf("count_over_time(%s[%s:1m])", pricePerKWh, c.window()), func(_ model.Metric, v float64) {
			r.prices.kwhMinutes += int(v)
			kwhSeries++
		}},
		{fmt.Sprintf("sum_over_time(%s[%s:1m])", pricePerKWh, c.window()), func(_ model.Metric, v float64) { kwhPriceSum += v }},
		{fmt.Sprintf("max_over_time(%s[%s:1m])", priceConfigured, c.window()), func(m model.Metric, v float64) {
			if v > 0 {
				r.prices.configured = true
				r.prices.currencies[string(m["currency"])] = true
			}
		}},
	}
	for _, st := range steps {
		if err := q(st.query, st.each); err != nil {
			return err
		}
	}
	if kwhSeries > 1 {
		return fmt.Errorf("%d series of %s in %s to %s (one price per kWh expected: are the rules evaluated in several places with different labels?)", kwhSeries, pricePerKWh, c.start.Format(time.RFC3339), c.end.Format(time.RFC3339))
	}

	for _, s := range srcs {
		for i, t := range tiers {
			if err := q(tierQuery(*s, t, c), func(m model.Metric, v float64) { r.owner(s, m).f.add(hoursAllocated+i, v) }); err != nil {
				return err
			}
			if ci, ok := costTiers[t]; ok {
				if err := q(costQuery(*s, t, c), func(m model.Metric, v float64) { r.owner(s, m).f.add(ci, v) }); err != nil {
					return err
				}
			}
		}
		// Energy cost: the chunk's kWh at the kWh price prorated over the chunk's minutes
		// (a price set for part of the chunk counts for that part).
		if err := q(energyQuery(*s, c), func(m model.Metric, v float64) {
			ow := r.owner(s, m)
			ow.f.add(energyKWh, v)
			if r.prices.kwhMinutes > 0 {
				ow.f.add(costEnergy, v*kwhPriceSum/float64(c.minutes()))
			}
		}); err != nil {
			return err
		}
	}

	// Which minutes the funnel had data for: the GPUs the agents read, once a minute.
	v, warnings, err := api.QueryRange(ctx, "count("+gpusTotal+")", v1.Range{Start: c.start.Add(time.Minute), End: c.end, Step: time.Minute}, v1.WithTimeout(o.Timeout))
	if err = checkAnswer("count("+gpusTotal+")", warnings, err, o.AllowPartial, &r.warnings); err != nil {
		return err
	}
	if m, ok := v.(model.Matrix); ok {
		for _, series := range m {
			for _, p := range series.Values {
				t := p.Timestamp.Time().UTC()
				if r.coverage.minutes == 0 || t.Before(r.coverage.first) {
					r.coverage.first = t
				}
				if t.After(r.coverage.last) {
					r.coverage.last = t
				}
				r.coverage.minutes++
			}
		}
	}
	res.merge(r)
	return nil
}

// instant runs an instant query at ts and calls each for every sample of its vector.
func instant(ctx context.Context, api queryAPI, o options, query string, ts time.Time, warnings *[]string, each func(model.Metric, float64)) error {
	v, w, err := api.Query(ctx, query, ts, v1.WithTimeout(o.Timeout))
	if err := checkAnswer(query, w, err, o.AllowPartial, warnings); err != nil {
		return err
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return fmt.Errorf("query %s: the answer is a %s, not a vector", query, v.Type())
	}
	for _, s := range vec {
		f := float64(s.Value)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("query %s: %v for %s", query, f, s.Metric)
		}
		each(s.Metric, f)
	}
	return nil
}

// checkAnswer maps a query's error and Prometheus's warnings (a partial answer: a store
// or a querier down behind Thanos or Mimir, a limit hit) to one error.
func checkAnswer(query string, warnings v1.Warnings, err error, allowPartial bool, kept *[]string) error {
	if err != nil {
		return fmt.Errorf("query %s: %w", query, err)
	}
	if len(warnings) == 0 {
		return nil
	}
	if !allowPartial {
		return fmt.Errorf("query %s: Prometheus answered with warnings, the answer may be partial (--allow-partial writes the report anyway): %s", query, strings.Join(warnings, "; "))
	}
	for _, w := range warnings {
		*kept = append(*kept, "Prometheus: "+w+" (query "+query+")")
	}
	return nil
}

func ownerKey(s *source, m model.Metric) (string, map[string]string) {
	labels := make(map[string]string, len(s.labels))
	var b strings.Builder
	b.WriteString(s.name)
	for _, l := range s.labels {
		v := string(m[model.LabelName(l)])
		labels[l] = v
		b.WriteByte(0xff)
		b.WriteString(v)
	}
	return b.String(), labels
}

func (r *chunkResult) owner(s *source, m model.Metric) *owner {
	key, labels := ownerKey(s, m)
	ow := r.owners[key]
	if ow == nil {
		ow = &owner{src: s, labels: labels}
		r.owners[key] = ow
	}
	return ow
}

func (res *collected) merge(r chunkResult) {
	res.mu.Lock()
	defer res.mu.Unlock()
	for key, ow := range r.owners {
		if have := res.owners[key]; have != nil {
			have.f.addAll(ow.f)
		} else {
			res.owners[key] = ow
		}
	}
	for m, n := range r.prices.modelMinutes {
		res.prices.modelMinutes[m] += n
	}
	res.prices.kwhMinutes += r.prices.kwhMinutes
	res.prices.configured = res.prices.configured || r.prices.configured
	for c := range r.prices.currencies {
		res.prices.currencies[c] = true
	}
	if r.coverage.minutes > 0 {
		if res.coverage.minutes == 0 || r.coverage.first.Before(res.coverage.first) {
			res.coverage.first = r.coverage.first
		}
		if r.coverage.last.After(res.coverage.last) {
			res.coverage.last = r.coverage.last
		}
		res.coverage.minutes += r.coverage.minutes
	}
	res.warnings = append(res.warnings, r.warnings...)
}
