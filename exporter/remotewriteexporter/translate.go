package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"

import (
	"context"
	"errors"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	promconfig "github.com/prometheus/prometheus/config"
	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/storage/remote/otlptranslator/prometheusremotewrite"
	"github.com/prometheus/prometheus/util/annotations"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// labelCacheGeneration is how long a series' label set stays remembered after its last
// sample: between one and two generations. Longer than any collection interval, so a
// steady series is never translated twice; short enough that the label sets of ended
// processes and pods do not pile up.
const labelCacheGeneration = 10 * time.Minute

// translator turns pmetric.Metrics into remote-write series. Prometheus's translator
// names and labels each number data point the first time its series is seen; after
// that the series' label set is found by its seriesKey, and only the point's value and
// timestamp are read. Histograms, summaries and target_info (which needs every resource)
// always go through the translator. Not safe for concurrent use: the exporter calls it
// from its single queue consumer.
type translator struct {
	settings  prometheusremotewrite.Settings
	memoize   bool
	resources *resourceLabelSelector
	converter *prometheusremotewrite.PrometheusConverter
	batch     *batchAppender
	keys      *keyHasher
	labels    *labelMemo
	missed    []seriesKey
}

func newTranslator(cfg *Config, now func() time.Time) *translator {
	batch := &batchAppender{}
	return &translator{
		settings: prometheusremotewrite.Settings{
			ExternalLabels:       cfg.ExternalLabels,
			DisableTargetInfo:    !cfg.TargetInfo.Enabled,
			AddMetricSuffixes:    cfg.AddMetricSuffixes,
			PromoteScopeMetadata: cfg.PromoteScopeMetadata,
			// As Prometheus's default: target_info is re-sent within this window.
			LookbackDelta: 5 * time.Minute,
		},
		memoize:   !cfg.TargetInfo.Enabled,
		resources: newResourceLabelSelector(cfg.ResourceConstantLabels),
		// One converter for the exporter's life: it keeps sanitised label names
		// between batches.
		converter: prometheusremotewrite.NewPrometheusConverter(batch),
		batch:     batch,
		keys:      newKeyHasher(),
		labels:    newLabelMemo(now),
	}
}

// translate returns md's series, one sample (or histogram) each. What could not be
// translated is reported in err; the rest is returned all the same. The returned slice
// is valid until the next call.
func (t *translator) translate(ctx context.Context, md pmetric.Metrics) ([]prompb.TimeSeries, annotations.Annotations, error) {
	t.batch.reset()
	t.labels.startBatch()
	if !t.memoize {
		annots, err := t.convert(ctx, md)
		return t.batch.finish(), annots, err
	}
	var annots annotations.Annotations
	var errs []error
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		res := rms.At(i).Resource()
		sms := rms.At(i).ScopeMetrics()
		for j := range sms.Len() {
			resourceKey := t.keys.resourceKey(res, sms.At(j).Scope())
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				a, err := t.translateMetric(ctx, res, sms.At(j), ms.At(k), resourceKey)
				annots.Merge(a)
				if err != nil {
					errs = append(errs, err)
				}
			}
		}
	}
	return t.batch.finish(), annots, errors.Join(errs...)
}

// translateMetric appends one metric's series: the points whose label set is
// remembered directly, the others through Prometheus's translator.
func (t *translator) translateMetric(ctx context.Context, res pcommon.Resource, sm pmetric.ScopeMetrics, m pmetric.Metric, resourceKey seriesKey) (annotations.Annotations, error) {
	var points pmetric.NumberDataPointSlice
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		points = m.Gauge().DataPoints()
	case pmetric.MetricTypeSum:
		points = m.Sum().DataPoints()
	default:
		return t.convert(ctx, alone(res, sm, m, nil))
	}
	metricKey := t.keys.metricKey(resourceKey, m)
	t.missed = t.missed[:0]
	var missedAt []int
	for p := range points.Len() {
		pt := points.At(p)
		key := t.keys.pointKey(metricKey, pt.Attributes())
		if labels, ok := t.labels.get(key); ok {
			t.batch.appendSample(labels, pt)
			continue
		}
		t.missed = append(t.missed, key)
		missedAt = append(missedAt, p)
	}
	if len(t.missed) == 0 {
		return nil, nil
	}
	first := len(t.batch.series)
	annots, err := t.convert(ctx, alone(res, sm, m, missedAt))
	// A number point is one series. If the translator dropped or split any, nothing of
	// this metric is remembered: it is translated again next time, as now.
	if added := t.batch.series[first:]; err == nil && len(added) == len(t.missed) {
		for i := range added {
			t.labels.put(t.missed[i], added[i].Labels)
		}
	}
	return annots, err
}

func (t *translator) convert(ctx context.Context, md pmetric.Metrics) (annotations.Annotations, error) {
	t.settings.PromoteResourceAttributes = t.resources.forBatch(md)
	return t.converter.FromMetrics(ctx, md, t.settings)
}

// alone is m in a batch of its own, under copies of its resource and scope, with only
// the points at the given indexes (all when nil).
func alone(res pcommon.Resource, sm pmetric.ScopeMetrics, m pmetric.Metric, points []int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res.CopyTo(rm.Resource())
	out := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().CopyTo(out.Scope())
	out.SetSchemaUrl(sm.SchemaUrl())
	copied := out.Metrics().AppendEmpty()
	if points == nil {
		m.CopyTo(copied)
		return md
	}
	copied.SetName(m.Name())
	copied.SetUnit(m.Unit())
	copied.SetDescription(m.Description())
	var from, to pmetric.NumberDataPointSlice
	if m.Type() == pmetric.MetricTypeGauge {
		from, to = m.Gauge().DataPoints(), copied.SetEmptyGauge().DataPoints()
	} else {
		sum := copied.SetEmptySum()
		sum.SetAggregationTemporality(m.Sum().AggregationTemporality())
		sum.SetIsMonotonic(m.Sum().IsMonotonic())
		from, to = m.Sum().DataPoints(), sum.DataPoints()
	}
	for _, p := range points {
		from.At(p).CopyTo(to.AppendEmpty())
	}
	return md
}

// batchAppender is the storage.AppenderV2 the converter writes into, and where
// remembered series are added directly: it gathers one batch's series.
type batchAppender struct {
	series  []prompb.TimeSeries
	samples []prompb.Sample // samples[i] is series[i]'s, unless series[i] is a histogram
}

func (a *batchAppender) reset() {
	clear(a.series) // drop references to the previous batch's label sets and histograms
	a.series, a.samples = a.series[:0], a.samples[:0]
}

func (a *batchAppender) Append(_ storage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	built := make([]prompb.Label, 0, ls.Len())
	ls.Range(func(l labels.Label) { built = append(built, prompb.Label{Name: l.Name, Value: l.Value}) })
	ts := prompb.TimeSeries{Labels: built}
	switch {
	case fh != nil:
		ts.Histograms = []prompb.Histogram{prompb.FromFloatHistogram(t, fh)}
	case h != nil:
		ts.Histograms = []prompb.Histogram{prompb.FromIntHistogram(t, h)}
	}
	a.series = append(a.series, ts)
	a.samples = append(a.samples, prompb.Sample{Timestamp: t, Value: v})
	return 0, nil
}

// appendSample adds a number point of a remembered series, valued as Prometheus's
// translator values it: a point flagged "no recorded value" is a staleness marker.
func (a *batchAppender) appendSample(labels []prompb.Label, pt pmetric.NumberDataPoint) {
	var v float64
	switch pt.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		v = float64(pt.IntValue())
	case pmetric.NumberDataPointValueTypeDouble:
		v = pt.DoubleValue()
	}
	if pt.Flags().NoRecordedValue() {
		v = math.Float64frombits(value.StaleNaN)
	}
	a.series = append(a.series, prompb.TimeSeries{Labels: labels})
	a.samples = append(a.samples, prompb.Sample{Timestamp: int64(pt.Timestamp()) / int64(time.Millisecond), Value: v})
}

// finish points each float series at its sample; done once the batch is complete, as
// a.samples may move while it grows.
func (a *batchAppender) finish() []prompb.TimeSeries {
	for i := range a.series {
		if a.series[i].Histograms == nil {
			a.series[i].Samples = a.samples[i : i+1 : i+1]
		}
	}
	return a.series
}

// Commit and Rollback: the exporter sends or drops the batch itself.
func (*batchAppender) Commit() error   { return nil }
func (*batchAppender) Rollback() error { return nil }

// labelMemo remembers each series' remote-write label set by its seriesKey. Two
// generations: a label set used in the current one is kept; at the turn, what was not
// used since the previous turn is forgotten.
type labelMemo struct {
	now            func() time.Time
	current, older map[seriesKey][]prompb.Label
	turned         time.Time
}

func newLabelMemo(now func() time.Time) *labelMemo {
	return &labelMemo{now: now, current: map[seriesKey][]prompb.Label{}, older: map[seriesKey][]prompb.Label{}, turned: now()}
}

func (c *labelMemo) startBatch() {
	if now := c.now(); now.Sub(c.turned) >= labelCacheGeneration {
		c.older, c.current, c.turned = c.current, make(map[seriesKey][]prompb.Label, len(c.current)), now
	}
}

func (c *labelMemo) get(key seriesKey) ([]prompb.Label, bool) {
	if labels, ok := c.current[key]; ok {
		return labels, true
	}
	if labels, ok := c.older[key]; ok {
		c.current[key] = labels
		delete(c.older, key)
		return labels, true
	}
	return nil, false
}

func (c *labelMemo) put(key seriesKey, labels []prompb.Label) { c.current[key] = labels }

func (c *labelMemo) len() int { return len(c.current) + len(c.older) }

// resourceLabelSelector decides which resource attributes become labels, by the
// configured glob patterns. Prometheus's translator takes the attributes' names, so the
// names present in a batch are matched (each name once) and the resulting promotion is
// reused while the set of names does not change.
type resourceLabelSelector struct {
	included, excluded []*regexp.Regexp
	decided            map[string]bool
	keys               []string
	lastKeys           string
	last               *prometheusremotewrite.PromoteResourceAttributes
}

func newResourceLabelSelector(cfg ResourceLabelsConfig) *resourceLabelSelector {
	s := &resourceLabelSelector{decided: map[string]bool{}}
	for _, p := range cfg.Included {
		re, _ := globRegexp(p) // Validate has refused bad patterns
		s.included = append(s.included, re)
	}
	for _, p := range cfg.Excluded {
		re, _ := globRegexp(p)
		s.excluded = append(s.excluded, re)
	}
	return s
}

func (s *resourceLabelSelector) selected(name string) bool {
	if on, ok := s.decided[name]; ok {
		return on
	}
	on := slices.ContainsFunc(s.included, func(re *regexp.Regexp) bool { return re.MatchString(name) }) &&
		!slices.ContainsFunc(s.excluded, func(re *regexp.Regexp) bool { return re.MatchString(name) })
	s.decided[name] = on
	return on
}

// forBatch returns the promotion for md's resources: the selected attribute names.
func (s *resourceLabelSelector) forBatch(md pmetric.Metrics) *prometheusremotewrite.PromoteResourceAttributes {
	if len(s.included) == 0 {
		return nil
	}
	s.keys = s.keys[:0]
	rms := md.ResourceMetrics()
	for i := range rms.Len() {
		for name := range rms.At(i).Resource().Attributes().All() {
			if s.selected(name) && !slices.Contains(s.keys, name) {
				s.keys = append(s.keys, name)
			}
		}
	}
	slices.Sort(s.keys)
	if joined := strings.Join(s.keys, "\x00"); s.last == nil || joined != s.lastKeys {
		s.lastKeys = joined
		s.last = prometheusremotewrite.NewPromoteResourceAttributes(promconfig.OTLPConfig{PromoteResourceAttributes: slices.Clone(s.keys)})
	}
	return s.last
}
