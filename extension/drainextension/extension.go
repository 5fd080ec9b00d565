package drainextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/drainextension"

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.opentelemetry.io/collector/extension/extensionmiddleware"
	"go.uber.org/zap"
	"k8s.io/utils/clock"
)

var (
	_ extensioncapabilities.PipelineWatcher = (*drain)(nil)
	_ extensionmiddleware.HTTPClient        = (*drain)(nil)
)

// drain starts the flush deadline when shutdown begins and refuses requests once it has
// passed. One instance serves every exporter that names it.
type drain struct {
	cfg    *Config
	logger *zap.Logger
	clock  clock.WithDelayedExecution

	// expired is cancelled when the deadline passes: requests in flight are cancelled and
	// every later one is refused. It exists from the start, so requests before shutdown
	// (or without any) simply pass.
	expired context.Context
	expire  context.CancelFunc

	mu      sync.Mutex
	began   time.Time   // when shutdown began; zero before
	timer   clock.Timer // fires expire; nil before shutdown began
	stopped bool        // Shutdown ran: NotReady must not start a timer any more

	refusedRequests atomic.Int64
	refusedSamples  atomic.Int64
	// uncounted are refused requests whose samples could not be counted (not a
	// remote-write body, or an unreadable one).
	uncounted atomic.Int64
}

func newDrain(cfg *Config, logger *zap.Logger, clk clock.WithDelayedExecution) *drain {
	expired, expire := context.WithCancel(context.Background())
	return &drain{cfg: cfg, logger: logger, clock: clk, expired: expired, expire: expire}
}

func (*drain) Start(context.Context, component.Host) error { return nil }

// Ready: the pipelines run; nothing to do.
func (*drain) Ready() error { return nil }

// NotReady is the start of shutdown (the service calls it before it stops the receivers):
// the flush deadline starts now.
func (d *drain) NotReady() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil || d.stopped {
		return nil
	}
	d.began = d.clock.Now()
	d.timer = d.clock.AfterFunc(d.cfg.FlushTimeout, d.deadlinePassed)
	d.logger.Info("Shutdown began: sending what is buffered for up to the flush timeout, then dropping the rest",
		zap.Duration("flush_timeout", d.cfg.FlushTimeout), zap.Bool("on_disk", d.cfg.OnDisk))
	return nil
}

func (d *drain) deadlinePassed() {
	what := "dropping what is still buffered"
	if d.cfg.OnDisk {
		what = "what is not sent stays on disk"
	}
	d.logger.Warn("Flush timeout passed during shutdown: refusing every further request ("+what+")",
		zap.Duration("flush_timeout", d.cfg.FlushTimeout))
	d.expire()
}

// Shutdown runs after every pipeline has stopped, so every refusal has happened: it says
// what shutdown cost.
func (d *drain) Shutdown(context.Context) error {
	d.mu.Lock()
	d.stopped = true
	began := d.began
	if d.timer != nil {
		d.timer.Stop()
	}
	d.mu.Unlock()
	expiredAlready := d.expired.Err() != nil
	d.expire() // releases the contexts of requests that might still watch it

	requests, samples, uncounted := d.refusedRequests.Load(), d.refusedSamples.Load(), d.uncounted.Load()
	fields := []zap.Field{
		zap.Duration("flush_timeout", d.cfg.FlushTimeout),
		zap.Int64("requests", requests),
		zap.Int64("samples", samples),
	}
	if uncounted > 0 {
		fields = append(fields, zap.Int64("requests_not_counted", uncounted))
	}
	switch {
	case requests > 0 && d.cfg.OnDisk:
		// A write-ahead log retries what was refused, so these count attempts, not data.
		d.logger.Warn(fmt.Sprintf("Shutdown: %d send attempts refused after the flush timeout (%s); what they carried stays on disk and is sent after the restart",
			requests, d.cfg.FlushTimeout), fields...)
	case requests > 0:
		d.logger.Error(fmt.Sprintf("Shutdown: %d samples in %d requests dropped after the flush timeout (%s)",
			samples, requests, d.cfg.FlushTimeout), fields...)
	case expiredAlready:
		d.logger.Info("Shutdown: the flush timeout passed, but no request was refused")
	case !began.IsZero():
		d.logger.Info("Shutdown: everything buffered was sent within the flush timeout",
			zap.Duration("flush_timeout", d.cfg.FlushTimeout), zap.Duration("took", d.clock.Since(began)))
	}
	return nil
}

// FlushTimeoutPassed is closed once the flush timeout has passed; from then on every
// request is answered at once. An exporter that waits between retries of its own (the
// remote_write exporter's backoff, a Retry-After) stops waiting when it closes, so that a
// backoff of up to 30 s does not keep the stopping collector alive past the deadline.
func (d *drain) FlushTimeoutPassed() <-chan struct{} { return d.expired.Done() }

// GetHTTPRoundTripper makes the extension an HTTP client middleware (confighttp's
// `middlewares: [{id: drain}]`).
func (d *drain) GetHTTPRoundTripper(context.Context) (extensionmiddleware.WrapHTTPRoundTripperFunc, error) {
	return func(_ context.Context, next http.RoundTripper) (http.RoundTripper, error) {
		return &roundTripper{drain: d, next: next}, nil
	}, nil
}
