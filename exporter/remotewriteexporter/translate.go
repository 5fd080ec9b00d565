package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"time"

	promconfig "github.com/prometheus/prometheus/config"
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
	batch     *encodedBatch
	keys      *keyHasher
	labels    *labelMemo
	missed    []seriesKey
}

func newTranslator(cfg *Config, now func() time.Time) *translator {
	batch := &encodedBatch{}
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

// translate returns md's series, one sample (or histogram) each, encoded as remote-write
// requests. What could not be translated is reported in err; the rest is returned all
// the same. The returned batch is valid until the next call.
func (t *translator) translate(ctx context.Context, md pmetric.Metrics) (*encodedBatch, annotations.Annotations, error) {
	t.batch.reset()
	t.labels.startBatch()
	if !t.memoize {
		annots, err := t.convert(ctx, md)
		return t.batch, annots, err
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
	return t.batch, annots, errors.Join(errs...)
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
		if encodedLabels, ok := t.labels.get(key); ok {
			t.batch.appendRemembered(encodedLabels, pt)
			continue
		}
		t.missed = append(t.missed, key)
		missedAt = append(missedAt, p)
	}
	if len(t.missed) == 0 {
		return nil, nil
	}
	first := t.batch.len()
	annots, err := t.convert(ctx, alone(res, sm, m, missedAt))
	// A number point is one series. If the translator dropped or split any, nothing of
	// this metric is remembered: it is translated again next time, as now.
	if added := t.batch.labels[first:]; err == nil && len(added) == len(t.missed) {
		for i, encodedLabels := range added {
			t.labels.put(t.missed[i], encodedLabels)
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

// labelMemo remembers each series' remote-write label set, encoded, by its seriesKey. Two
// generations: a label set used in the current one is kept; at the turn, what was not
// used since the previous turn is forgotten.
type labelMemo struct {
	now            func() time.Time
	current, older map[seriesKey][]byte
	turned         time.Time
}

func newLabelMemo(now func() time.Time) *labelMemo {
	return &labelMemo{now: now, current: map[seriesKey][]byte{}, older: map[seriesKey][]byte{}, turned: now()}
}

func (c *labelMemo) startBatch() {
	if now := c.now(); now.Sub(c.turned) >= labelCacheGeneration {
		c.older, c.current, c.turned = c.current, make(map[seriesKey][]byte, len(c.current)), now
	}
}

func (c *labelMemo) get(key seriesKey) ([]byte, bool) {
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

func (c *labelMemo) put(key seriesKey, encodedLabels []byte) { c.current[key] = encodedLabels }

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
