// Package staleness ends series whose subject is gone. Remote-write has no scrape
// staleness: a series that stops (a GPU fell off the bus, a process exited, a pod ended, a
// MIG instance was destroyed) would keep answering queries with its last value for
// Prometheus's 5-minute lookback. Each batch is compared with the previous one of the same
// origin (host); every series missing from it gets one point flagged "no recorded value",
// which remote_write, prometheus_remote_write (and Prometheus's own OTLP endpoint) turn into a
// Prometheus stale marker, so the series ends within one collection interval.
package staleness // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/staleness"

import (
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
}

// origin is what one origin's last batch held.
type origin struct {
	series    map[id]*series
	resources map[id]pcommon.Map
}

func newOrigin() *origin {
	return &origin{series: map[id]*series{}, resources: map[id]pcommon.Map{}}
}

// Tracker remembers, per origin, the series of its last batch. Not safe for concurrent use:
// the processor serialises batches.
type Tracker struct {
	origins map[string]*origin
	// spare holds, per origin, the maps of the batch before the last, emptied: reusing them
	// saves growing two maps of every series per batch (at 1 s that was a fifth of the
	// tracker's cost).
	spare map[string]*origin
	hash  hasher
}

// New returns an empty Tracker.
func New() *Tracker { return &Tracker{origins: map[string]*origin{}, spare: map[string]*origin{}} }

// EndMissing appends to md a no-recorded-value point, at ts, for every series that an
// origin present in md had in its previous batch and lacks in this one, and remembers
// md's series for the next batch.
func (t *Tracker) EndMissing(md pmetric.Metrics, ts pcommon.Timestamp) {
	now := map[string]*origin{}
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		name := ""
		if v, ok := rm.Resource().Attributes().Get(originKey); ok {
			name = v.AsString()
		}
		cur := now[name]
		if cur == nil {
			if cur = t.spare[name]; cur == nil {
				cur = newOrigin()
			}
			delete(t.spare, name)
			now[name] = cur
		}
		t.collect(rm, t.origins[name], cur)
	}
	for name, cur := range now {
		if prev := t.origins[name]; prev != nil {
			end(md, prev, cur, ts)
			// What prev kept and cur still has, cur points to; prev's maps are free.
			clear(prev.series)
			clear(prev.resources)
			t.spare[name] = prev
		}
		t.origins[name] = cur
	}
}

// collect records a resource's series in cur, reusing what prev already kept.
func (t *Tracker) collect(rm pmetric.ResourceMetrics, prev, cur *origin) {
	resAttrs := rm.Resource().Attributes()
	// The resource's hash stands for its attributes in every point's key: hashing the
	// attributes again per point cost more than the rest of this walk.
	resID := t.hash.attributes(resAttrs)
	// Its attributes, kept once per batch (not per point): the copy prev kept, if it had
	// this resource.
	if _, ok := cur.resources[resID]; !ok {
		if kept, ok := lookupResource(prev, resID); ok {
			cur.resources[resID] = kept
		} else {
			r := pcommon.NewMap()
			resAttrs.CopyTo(r)
			cur.resources[resID] = r
		}
	}
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		sm := rm.ScopeMetrics().At(i)
		for j := 0; j < sm.Metrics().Len(); j++ {
			m := sm.Metrics().At(j)
			var dps pmetric.NumberDataPointSlice
			s := series{resource: resID, scopeName: sm.Scope().Name(), scopeVer: sm.Scope().Version(), name: m.Name(), unit: m.Unit()}
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
				s.sum, s.monotonic, s.temporality = true, m.Sum().IsMonotonic(), m.Sum().AggregationTemporality()
			default:
				continue // the GPU components write number points only
			}
			for k := 0; k < dps.Len(); k++ {
				dp := dps.At(k)
				if dp.Flags().NoRecordedValue() {
					continue // an end marker itself: the series is already gone
				}
				key := t.hash.point(resID, s.scopeName, s.name, dp.Attributes())
				if cur.series[key] != nil {
					continue
				}
				if kept := lookup(prev, key); kept != nil {
					cur.series[key] = kept
					continue
				}
				ns := s
				ns.attrs = pcommon.NewMap()
				dp.Attributes().CopyTo(ns.attrs)
				cur.series[key] = &ns
			}
		}
	}
}

func lookup(o *origin, key id) *series {
	if o == nil {
		return nil
	}
	return o.series[key]
}

func lookupResource(o *origin, key id) (pcommon.Map, bool) {
	if o == nil {
		return pcommon.Map{}, false
	}
	r, ok := o.resources[key]
	return r, ok
}

// end writes the end markers of the series prev had and cur lacks.
func end(md pmetric.Metrics, prev, cur *origin, ts pcommon.Timestamp) {
	type scopeKey struct {
		resource  id
		name, ver string
	}
	scopes := map[scopeKey]pmetric.ScopeMetrics{}
	metrics := map[scopeKey]map[string]pmetric.Metric{}
	for key, s := range prev.series {
		if cur.series[key] != nil {
			continue
		}
		sk := scopeKey{s.resource, s.scopeName, s.scopeVer}
		sm, ok := scopes[sk]
		if !ok {
			rm := md.ResourceMetrics().AppendEmpty()
			prev.resources[s.resource].CopyTo(rm.Resource().Attributes())
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
}
