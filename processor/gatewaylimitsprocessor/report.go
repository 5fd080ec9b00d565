package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/topcounts"
)

// Reasons a point is refused: the counter's `reason` attribute.
const (
	reasonUnknownMetric = iota // a name outside the metric contract
	reasonNewSeries            // a new series over max_new_series_per_minute
	reasonSeriesCap            // a new series over max_series_per_client
	reasonBuckets              // a histogram point over max_histogram_buckets
	reasonNameLength           // a name (plus unit) over max_metric_name_length
	reasonKeyLength            // an attribute key over max_attribute_key_length
	reasonRate                 // the request's points, over max_points_per_second (refused whole, retryable)
	numReasons
)

var reasonNames = [numReasons]string{"unknown_metric", "new_series", "series_cap", "buckets", "name_length", "key_length", "rate"}

// summaryClients bounds the clients counted between two summary lines; further ones are
// counted as "other". topClients is how many a summary line names.
const (
	summaryClients = 1000
	topClients     = 5
)

// reporter counts refused points per client and reason, and logs them rate-limited: the
// first refusal after a quiet log_interval at once, later ones in one line per interval.
type reporter struct {
	interval time.Duration
	now      func() time.Time
	logger   *zap.Logger
	refusals metric.Int64Counter
	reg      metric.Registration

	labelsMu  sync.Mutex
	labels    map[string]struct{} // clients with a label of their own
	maxLabels int

	mu         sync.Mutex
	since      time.Time
	byReason   map[string]int64
	byClient   map[string]int64
	lastLogged time.Time
	stop, done chan struct{}
}

func newReporter(cfg *Config, set component.TelemetrySettings, now func() time.Time, clients *clientTable) (*reporter, error) {
	meter := set.MeterProvider.Meter("github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor")
	refusals, err := meter.Int64Counter("otelcol_gateway_limited_points",
		metric.WithDescription("Data points the gateway_limits processor refused, by client and reason (unknown_metric, new_series, series_cap, buckets, name_length, key_length: dropped; rate: the whole request refused with a retryable error, so the client sends it again)."),
		metric.WithUnit("{point}"))
	if err != nil {
		return nil, err
	}
	series, err := meter.Int64ObservableGauge("otelcol_gateway_limits_tracked_series",
		metric.WithDescription("Prometheus series the gateway_limits processor tracks, over all clients (about 40 bytes of memory each)."),
		metric.WithUnit("{series}"))
	if err != nil {
		return nil, err
	}
	tracked, err := meter.Int64ObservableGauge("otelcol_gateway_limits_tracked_clients",
		metric.WithDescription("Clients the gateway_limits processor tracks (at most max_clients)."),
		metric.WithUnit("{client}"))
	if err != nil {
		return nil, err
	}
	reg, err := meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(series, clients.tracked.Load())
		o.ObserveInt64(tracked, clients.clients())
		return nil
	}, series, tracked)
	if err != nil {
		return nil, err
	}
	return &reporter{
		interval: cfg.LogInterval, now: now, logger: set.Logger, refusals: refusals, reg: reg,
		byReason: map[string]int64{}, byClient: map[string]int64{},
		labels: map[string]struct{}{}, maxLabels: cfg.MaxClients,
	}, nil
}

// attrs are the counter's attributes for one client and reason, made once (under c.mu).
func (c *clientState) attrs(r *reporter, reason int) metric.AddOption {
	if c.refusedBy[reason] == nil {
		c.refusedBy[reason] = metric.WithAttributeSet(attribute.NewSet(
			attribute.String("client", r.label(c.name)), attribute.String("reason", reasonNames[reason])))
	}
	return c.refusedBy[reason]
}

// label is the counter's client attribute for a client. The SDK keeps a counter's series
// for the process's life, forgotten clients' too: the first max_clients clients refused
// get their own label, any later one is "other".
func (r *reporter) label(client string) string {
	r.labelsMu.Lock()
	defer r.labelsMu.Unlock()
	if _, ok := r.labels[client]; ok {
		return client
	}
	if len(r.labels) < r.maxLabels {
		r.labels[client] = struct{}{}
		return client
	}
	return "other"
}

// refused counts n points of one client refused for reason; metricName is an example.
func (r *reporter) refused(client string, reason int, n int64, metricName string, attrs metric.AddOption) {
	r.refusals.Add(context.Background(), n, attrs)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.byReason) == 0 && now.Sub(r.lastLogged) >= r.interval {
		// The first refusal after a quiet interval: at once, with what it was about.
		r.lastLogged = now
		fields := []zap.Field{zap.String("client", client), zap.String("reason", reasonNames[reason]), zap.Int64("points", n)}
		if metricName != "" {
			fields = append(fields, zap.String("example_metric", metricName))
		}
		r.logger.Warn("Points refused by gateway limits", fields...)
		return
	}
	if len(r.byReason) == 0 {
		r.since = now
	}
	r.byReason[reasonNames[reason]] += n
	if _, ok := r.byClient[client]; ok || len(r.byClient) < summaryClients {
		r.byClient[client] += n
	} else {
		r.byClient["other"] += n
	}
}

func (r *reporter) start() {
	r.stop, r.done = make(chan struct{}), make(chan struct{})
	go r.summaries()
}

// shutdown writes what is not yet logged.
func (r *reporter) shutdown() error {
	if r.stop != nil {
		close(r.stop)
		<-r.done
		r.stop = nil
	}
	return r.reg.Unregister()
}

func (r *reporter) summaries() {
	defer close(r.done)
	ticker := time.NewTicker(r.interval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			r.flush()
		case <-r.stop:
			r.flush()
			return
		}
	}
}

func (r *reporter) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	var total int64
	for _, n := range r.byReason {
		total += n
	}
	if total == 0 {
		return
	}
	r.lastLogged = r.now()
	r.logger.Warn("Points refused by gateway limits (summary)",
		zap.Int64("points", total), zap.Time("since", r.since),
		zap.String("by_reason", topcounts.Format(r.byReason, len(r.byReason))),
		zap.String("top_clients", topcounts.Format(r.byClient, topClients)))
	r.byReason, r.byClient = map[string]int64{}, map[string]int64{}
}
