package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"

import (
	"context"
	"fmt"
	"math"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor/internal/contractnames"
)

type limiter struct {
	cfg      *Config
	now      func() time.Time
	started  time.Time // the origin of seriesEntry.seen
	identity identity
	allowed  map[string]struct{} // nil: any name
	hash     hasher
	clients  *clientTable
	report   *reporter

	pointsRate, pointsBurst float64 // per second, tokens
	newRate, newBurst       float64 // per second, tokens
	idle                    uint32  // series_idle_timeout, seconds
	sweepEvery              time.Duration
}

func newLimiter(cfg *Config, set component.TelemetrySettings, now func() time.Time) (*limiter, error) {
	p := &limiter{
		cfg: cfg, now: now, started: now(),
		identity:    newIdentity(cfg.ClientIdentity),
		hash:        newHasher(),
		pointsRate:  float64(cfg.MaxPointsPerSecond),
		pointsBurst: float64(cfg.burst()),
		newRate:     float64(cfg.MaxNewSeriesPerMinute) / 60,
		newBurst:    float64(cfg.MaxNewSeriesPerMinute),
		idle:        uint32(cfg.SeriesIdleTimeout / time.Second),
		// Sweeping a client's series is a walk over its map: at most once a minute.
		sweepEvery: min(max(cfg.SeriesIdleTimeout/10, time.Second), time.Minute),
	}
	if cfg.AllowedMetricNames == AllowContract {
		p.allowed = map[string]struct{}{}
		for _, n := range contractnames.Names() {
			p.allowed[n] = struct{}{}
		}
	}
	p.clients = newClientTable(cfg.MaxClients, cfg.SeriesIdleTimeout, func(name string, now time.Time) *clientState {
		return &clientState{
			name:      name,
			points:    bucket{tokens: p.pointsBurst, last: now},
			newSeries: bucket{tokens: p.newBurst, last: now},
			series:    map[uint64]seriesEntry{},
			swept:     now,
		}
	})
	var err error
	p.report, err = newReporter(cfg, set, now, p.clients)
	return p, err
}

func (p *limiter) start(context.Context, component.Host) error {
	p.report.start()
	return nil
}

func (p *limiter) shutdown(context.Context) error {
	return p.report.shutdown()
}

// processMetrics holds one request to its client's limits: over the points rate the whole
// request is refused (retryable); otherwise each point over another limit is dropped and
// the rest goes on.
func (p *limiter) processMetrics(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	now := p.now()
	name := p.identity.of(ctx)
	var c *clientState
	for {
		c = p.clients.get(name, now)
		c.mu.Lock()
		if !c.gone {
			break
		}
		c.mu.Unlock() // forgotten meanwhile (the table was full): take the new one
	}

	n := md.DataPointCount()
	c.points.refill(now, p.pointsRate, p.pointsBurst)
	// A request larger than the bucket passes when the bucket is full, and leaves it in
	// debt: the rate holds on average, and an agent's largest batch is never refused for
	// good.
	if need := math.Min(float64(n), p.pointsBurst); c.points.tokens < need {
		wait := time.Duration((need - c.points.tokens) / p.pointsRate * float64(time.Second))
		attrs := c.attrs(p.report, reasonRate)
		c.mu.Unlock()
		p.report.refused(name, reasonRate, int64(n), "", attrs)
		return md, rateError(name, n, p.cfg.MaxPointsPerSecond, wait)
	}
	c.points.tokens -= float64(n)
	c.newSeries.refill(now, p.newRate, p.newBurst)
	p.sweep(c, now)

	w := walk{p: p, c: c, now: p.seconds(now)}
	md.ResourceMetrics().RemoveIf(w.resource)
	p.clients.tracked.Add(int64(w.added))
	var attrs [numReasons]metric.AddOption
	for r, k := range w.refused {
		if k > 0 {
			attrs[r] = c.attrs(p.report, r)
		}
	}
	c.mu.Unlock()

	for r, k := range w.refused {
		if k > 0 {
			p.report.refused(name, r, k, w.example[r], attrs[r])
		}
	}
	if md.ResourceMetrics().Len() == 0 {
		return md, processorhelper.ErrSkipProcessingData
	}
	return md, nil
}

// rateError is retryable: the OTLP receiver keeps a gRPC status as it is (Unavailable,
// HTTP 503), which every OTLP exporter retries; its RetryInfo tells the exporter when
// (gRPC: exporterhelper's throttle; HTTP: Retry-After, in whole seconds).
func rateError(client string, n, rate int, wait time.Duration) error {
	wait = max(time.Second, (wait + time.Second - 1).Truncate(time.Second)) // whole seconds, rounded up
	st := status.New(codes.Unavailable, fmt.Sprintf("gateway_limits: client %s is over %d points per second (request of %d points); retry in %s", client, rate, n, wait))
	if detailed, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(wait)}); err == nil {
		st = detailed
	}
	return st.Err()
}

// seconds is now as a seriesEntry.seen.
func (p *limiter) seconds(now time.Time) uint32 {
	d := now.Sub(p.started)
	if d <= 0 {
		return 0
	}
	return uint32(min(d/time.Second, math.MaxUint32))
}

// sweep forgets the client's series not seen for series_idle_timeout, and gives the map's
// memory back when most of it is empty (Go maps do not shrink).
func (p *limiter) sweep(c *clientState, now time.Time) {
	if now.Sub(c.swept) < p.sweepEvery {
		return
	}
	c.swept = now
	sec := p.seconds(now)
	if sec <= p.idle {
		return
	}
	cutoff := sec - p.idle
	removed := 0
	for h, e := range c.series {
		if e.seen < cutoff {
			delete(c.series, h)
			removed += int(e.weight)
		}
	}
	c.weight -= removed
	p.clients.tracked.Add(-int64(removed))
	if c.peak > 1024 && len(c.series) < c.peak/4 {
		m := make(map[uint64]seriesEntry, len(c.series))
		for h, e := range c.series {
			m[h] = e
		}
		c.series, c.peak = m, len(m)
	}
}

// walk is one request's pass over its points, under its client's lock.
type walk struct {
	p       *limiter
	c       *clientState
	now     uint32
	res     uint64 // the current resource's attributes hash
	added   int    // series weight added, for the gauge
	refused [numReasons]int64
	example [numReasons]string // a metric name per reason, for the log
}

func (w *walk) drop(reason int, n int, metric string) {
	w.refused[reason] += int64(n)
	if w.example[reason] == "" {
		w.example[reason] = metric
	}
}

func (w *walk) resource(rm pmetric.ResourceMetrics) bool {
	h, ok := w.p.hash.attributes(rm.Resource().Attributes(), w.p.cfg.MaxAttributeKeyLength)
	if !ok {
		sms := rm.ScopeMetrics()
		for i := range sms.Len() {
			ms := sms.At(i).Metrics()
			for j := range ms.Len() {
				w.drop(reasonKeyLength, pointCount(ms.At(j)), ms.At(j).Name())
			}
		}
		return true
	}
	w.res = h
	rm.ScopeMetrics().RemoveIf(func(sm pmetric.ScopeMetrics) bool {
		sm.Metrics().RemoveIf(w.metric)
		return sm.Metrics().Len() == 0
	})
	return rm.ScopeMetrics().Len() == 0
}

func (w *walk) metric(m pmetric.Metric) bool {
	name := m.Name()
	if len(name)+len(m.Unit()) > w.p.cfg.MaxMetricNameLength {
		w.drop(reasonNameLength, pointCount(m), truncateName(name))
		return true
	}
	if w.p.allowed != nil {
		if _, ok := w.p.allowed[name]; !ok {
			w.drop(reasonUnknownMetric, pointCount(m), name)
			return true
		}
	}
	mh := combine(w.res, w.p.hash.metric(m))
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		m.Gauge().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
			return w.point(mh, name, dp.Attributes(), 0, 1)
		})
		return m.Gauge().DataPoints().Len() == 0
	case pmetric.MetricTypeSum:
		m.Sum().DataPoints().RemoveIf(func(dp pmetric.NumberDataPoint) bool {
			return w.point(mh, name, dp.Attributes(), 0, 1)
		})
		return m.Sum().DataPoints().Len() == 0
	case pmetric.MetricTypeHistogram:
		m.Histogram().DataPoints().RemoveIf(func(dp pmetric.HistogramDataPoint) bool {
			buckets := max(dp.BucketCounts().Len(), dp.ExplicitBounds().Len()+1)
			return w.point(mh, name, dp.Attributes(), buckets, buckets+2)
		})
		return m.Histogram().DataPoints().Len() == 0
	case pmetric.MetricTypeExponentialHistogram:
		m.ExponentialHistogram().DataPoints().RemoveIf(func(dp pmetric.ExponentialHistogramDataPoint) bool {
			// One native-histogram series in Prometheus, however many buckets.
			buckets := dp.Positive().BucketCounts().Len() + dp.Negative().BucketCounts().Len()
			return w.point(mh, name, dp.Attributes(), buckets, 1)
		})
		return m.ExponentialHistogram().DataPoints().Len() == 0
	case pmetric.MetricTypeSummary:
		m.Summary().DataPoints().RemoveIf(func(dp pmetric.SummaryDataPoint) bool {
			q := dp.QuantileValues().Len()
			return w.point(mh, name, dp.Attributes(), q, q+2)
		})
		return m.Summary().DataPoints().Len() == 0
	}
	return true // no type, no points
}

// point says whether to drop one point: a key too long, too many buckets, or a series
// over the client's budgets. weight is the Prometheus series it makes.
func (w *walk) point(mh uint64, name string, attrs pcommon.Map, buckets, weight int) bool {
	cfg := w.p.cfg
	ah, ok := w.p.hash.attributes(attrs, cfg.MaxAttributeKeyLength)
	if !ok {
		w.drop(reasonKeyLength, 1, name)
		return true
	}
	if buckets > cfg.MaxHistogramBuckets {
		w.drop(reasonBuckets, 1, name)
		return true
	}
	h := combine(mh, ah)
	c := w.c
	if e, ok := c.series[h]; ok {
		if e.seen != w.now {
			e.seen = w.now
			c.series[h] = e
		}
		return false
	}
	if c.weight+weight > cfg.MaxSeriesPerClient {
		w.drop(reasonSeriesCap, 1, name)
		return true
	}
	if c.newSeries.tokens < float64(weight) {
		w.drop(reasonNewSeries, 1, name)
		return true
	}
	c.newSeries.tokens -= float64(weight)
	c.series[h] = seriesEntry{seen: w.now, weight: uint32(weight)}
	c.weight += weight
	c.peak = max(c.peak, len(c.series))
	w.added += weight
	return false
}

// pointCount is a metric's number of data points.
func pointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// truncateName keeps a log line short when the name is the problem.
func truncateName(name string) string {
	const keep = 64
	if len(name) <= keep {
		return name
	}
	return fmt.Sprintf("%s… (%d bytes)", name[:keep], len(name))
}
