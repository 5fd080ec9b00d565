// Package staleness ends series whose subject is gone. Remote-write has no scrape
// staleness: a series that stops (a GPU fell off the bus, a process exited, a pod ended, a
// MIG instance was destroyed) would keep answering queries with its last value for
// Prometheus's 5-minute lookback. Each batch is compared with the previous one of the same
// origin (host); every series missing from it gets one point flagged "no recorded value",
// which remote_write, prometheus_remote_write (and Prometheus's own OTLP endpoint) turn into a
// Prometheus stale marker, so the series ends within one collection interval.
//
// A steady series (the gpu receiver's error counters, limits and link state, gpu_enrich's
// window flags: a predicate the caller gives) may skip batches while its value does not
// change; it ends
// once it has gone a grace period without a point while its resource is still there, and
// at once when its resource is gone.
package staleness // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/staleness"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// originKey is the resource attribute that tells batches of different origins apart: a
// pipeline may carry several receivers (several hosts), each scraping on its own.
const originKey = "host.name"

// id is a series' or a resource's identity hash (see hasher).
type id = uint64

// series is what it takes to write one more point of a series: its resource, scope,
// metric and point attributes, kept from the batch that first had it.
type series struct {
	resource            id
	scopeName, scopeVer string
	name, unit          string
	sum, monotonic      bool
	temporality         pmetric.AggregationTemporality
	attrs               pcommon.Map
	seen                uint64            // the last batch that had it
	last                pcommon.Timestamp // its newest point's time
	steady              bool              // it may skip batches (Tracker.steady)
}

// resource is a resource's attributes, kept for its series' end markers.
type resource struct {
	attrs pcommon.Map
	seen  uint64
	now   pcommon.Timestamp // its newest point's time in the current batch
}

// origin is what one origin's batches hold, as of its last one.
type origin struct {
	series    map[id]*series
	resources map[id]*resource
	seen      uint64
	// marked counts the series and resources the current batch marked: when they are all
	// of them, nothing is missing and end has nothing to look through (most batches).
	markedSeries, markedResources int
}

// Tracker remembers, per origin, the series of its last batch. Not safe for concurrent use:
// the processor serialises batches.
type Tracker struct {
	origins map[string]*origin
	// batch counts the batches: a series or resource whose seen is not the current batch
	// was missing from it. Marking what a batch has, in the maps that already hold it,
	// costs one lookup per point; building each batch's set anew cost an insertion more.
	batch uint64
	// touched are the origins of the current batch.
	touched []*origin
	hash    hasher
	// steady tells the metrics whose series may skip batches for up to grace.
	steady func(metric string) bool
	grace  pcommon.Timestamp
}

// New returns an empty Tracker. A series of a metric steady reports true for is ended
// only once it has been grace without a point (measured in its resource's point times), or
// with its resource; steady may be nil (every series ends at the first batch without it).
func New(steady func(metric string) bool, grace time.Duration) *Tracker {
	if steady == nil {
		steady = func(string) bool { return false }
	}
	return &Tracker{origins: map[string]*origin{}, steady: steady, grace: pcommon.Timestamp(grace)}
}

// EndMissing appends to md a no-recorded-value point, at ts, for every series that an
// origin present in md had in its previous batch and lacks in this one, and remembers
// md's series for the next batch.
func (t *Tracker) EndMissing(md pmetric.Metrics, ts pcommon.Timestamp) {
	t.batch++
	t.touched = t.touched[:0]
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		name := ""
		if v, ok := rm.Resource().Attributes().Get(originKey); ok {
			name = v.AsString()
		}
		o := t.origins[name]
		if o == nil {
			o = &origin{series: map[id]*series{}, resources: map[id]*resource{}}
			t.origins[name] = o
		}
		if o.seen != t.batch {
			o.seen, o.markedSeries, o.markedResources = t.batch, 0, 0
			t.touched = append(t.touched, o)
		}
		t.collect(rm, o)
	}
	for _, o := range t.touched {
		t.end(md, o, ts)
	}
}

// collect marks a resource's series as seen in this batch, remembering those it did not
// have yet.
func (t *Tracker) collect(rm pmetric.ResourceMetrics, o *origin) {
	resAttrs := rm.Resource().Attributes()
	// The resource's hash stands for its attributes in every point's key: hashing the
	// attributes again per point cost more than the rest of this walk.
	resID := t.hash.attributes(resAttrs)
	r := o.resources[resID]
	if r == nil {
		r = &resource{attrs: pcommon.NewMap(), seen: t.batch}
		resAttrs.CopyTo(r.attrs)
		o.resources[resID] = r
		o.markedResources++
	} else if r.seen != t.batch {
		r.seen, r.now = t.batch, 0
		o.markedResources++
	}
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		sm := rm.ScopeMetrics().At(i)
		for j := 0; j < sm.Metrics().Len(); j++ {
			m := sm.Metrics().At(j)
			var dps pmetric.NumberDataPointSlice
			s := series{resource: resID, scopeName: sm.Scope().Name(), scopeVer: sm.Scope().Version(), name: m.Name(), unit: m.Unit(), seen: t.batch, steady: t.steady(m.Name())}
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
				s.sum, s.monotonic, s.temporality = true, m.Sum().IsMonotonic(), m.Sum().AggregationTemporality()
			default:
				continue // the GPU components write number points only
			}
			metricID := t.hash.metric(resID, s.scopeName, s.name)
			for k := 0; k < dps.Len(); k++ {
				dp := dps.At(k)
				if dp.Flags().NoRecordedValue() {
					continue // an end marker itself: the series is already gone
				}
				key := t.hash.point(metricID, dp.Attributes())
				r.now = max(r.now, dp.Timestamp())
				if kept := o.series[key]; kept != nil {
					kept.last = dp.Timestamp()
					if kept.seen != t.batch {
						kept.seen = t.batch
						o.markedSeries++
					}
					continue
				}
				ns := s
				ns.last = dp.Timestamp()
				ns.attrs = pcommon.NewMap()
				dp.Attributes().CopyTo(ns.attrs)
				o.series[key] = &ns
				o.markedSeries++
			}
		}
	}
}

// end writes the end markers of the series o had and this batch lacks (a steady series
// only once its grace has passed or its resource is gone), and forgets them and the
// resources no series of the batch had.
func (t *Tracker) end(md pmetric.Metrics, o *origin, ts pcommon.Timestamp) {
	batch := t.batch
	type scopeKey struct {
		resource  id
		name, ver string
	}
	if o.markedSeries == len(o.series) && o.markedResources == len(o.resources) {
		return // the batch had every series and resource the origin had
	}
	var scopes map[scopeKey]pmetric.ScopeMetrics
	var metrics map[scopeKey]map[string]pmetric.Metric
	for key, s := range o.series {
		if s.seen == batch || t.held(o, s) {
			continue
		}
		delete(o.series, key)
		if scopes == nil {
			scopes, metrics = map[scopeKey]pmetric.ScopeMetrics{}, map[scopeKey]map[string]pmetric.Metric{}
		}
		sk := scopeKey{s.resource, s.scopeName, s.scopeVer}
		sm, ok := scopes[sk]
		if !ok {
			rm := md.ResourceMetrics().AppendEmpty()
			o.resources[s.resource].attrs.CopyTo(rm.Resource().Attributes())
			sm = rm.ScopeMetrics().AppendEmpty()
			sm.Scope().SetName(s.scopeName)
			sm.Scope().SetVersion(s.scopeVer)
			scopes[sk], metrics[sk] = sm, map[string]pmetric.Metric{}
		}
		m, ok := metrics[sk][s.name]
		var dp pmetric.NumberDataPoint
		if !ok {
			m = sm.Metrics().AppendEmpty()
			m.SetName(s.name)
			m.SetUnit(s.unit)
			if s.sum {
				sum := m.SetEmptySum()
				sum.SetIsMonotonic(s.monotonic)
				sum.SetAggregationTemporality(s.temporality)
			} else {
				m.SetEmptyGauge()
			}
			metrics[sk][s.name] = m
		}
		if s.sum {
			dp = m.Sum().DataPoints().AppendEmpty()
		} else {
			dp = m.Gauge().DataPoints().AppendEmpty()
		}
		s.attrs.CopyTo(dp.Attributes())
		dp.SetStartTimestamp(ts)
		dp.SetTimestamp(ts)
		dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	}
	for key, r := range o.resources {
		if r.seen != batch {
			delete(o.resources, key)
		}
	}
}

// held reports whether a series missing from the batch is a steady one still within its
// grace: its resource is in the batch, and the resource's points are less than grace newer
// than the series' last one.
func (t *Tracker) held(o *origin, s *series) bool {
	if !s.steady {
		return false
	}
	r := o.resources[s.resource]
	return r != nil && r.seen == t.batch && r.now < s.last+t.grace
}
