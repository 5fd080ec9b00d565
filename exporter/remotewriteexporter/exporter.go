package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/golang/snappy"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
)

// rwExporter translates and sends. push runs under mu: the queue has one consumer, and
// the translator's batch and the compressed request are reused from one batch to the next.
type rwExporter struct {
	cfg       *Config
	settings  component.TelemetrySettings
	userAgent string
	client    *http.Client
	// flushTimeoutPassed is closed when a middleware that bounds shutdown (extension
	// drain) starts refusing every request; nil (never closed) without one.
	flushTimeoutPassed <-chan struct{}

	mu         sync.Mutex
	translator *translator
	compressed []byte // a request's snappy encoding, reused
}

func newExporter(cfg *Config, settings component.TelemetrySettings, buildInfo component.BuildInfo, now func() time.Time) *rwExporter {
	return &rwExporter{
		cfg:        cfg,
		settings:   settings,
		userAgent:  fmt.Sprintf("%s/%s", buildInfo.Command, buildInfo.Version),
		translator: newTranslator(cfg, now),
	}
}

func (e *rwExporter) start(ctx context.Context, host component.Host) error {
	client, err := e.cfg.ClientConfig.ToClient(ctx, host.GetExtensions(), e.settings)
	if err != nil {
		return fmt.Errorf("remote_write: building the HTTP client: %w", err)
	}
	e.client = client
	for _, m := range e.cfg.ClientConfig.Middlewares {
		if bound, ok := host.GetExtensions()[m.ID].(shutdownBound); ok {
			e.flushTimeoutPassed = bound.FlushTimeoutPassed()
			break
		}
	}
	return nil
}

// shutdownBound is an HTTP client middleware that bounds shutdown (extension drain): once
// its flush timeout has passed it answers every request at once, itself, and counts what
// it refused.
type shutdownBound interface {
	FlushTimeoutPassed() <-chan struct{}
}

func (e *rwExporter) push(ctx context.Context, md pmetric.Metrics) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	batch, annots, err := e.translator.translate(ctx, md)
	if err != nil {
		// As contrib's exporter: what translated is sent; what did not is dropped, and
		// retrying would not change that.
		e.settings.Logger.Warn("some points could not be translated to remote-write and are dropped", zap.Error(err))
	}
	if len(annots) > 0 {
		warnings, _ := annots.AsStrings("", 10, 0)
		e.settings.Logger.Debug("remote-write translation warnings", zap.Strings("warnings", warnings))
	}
	// A request refused for good (one out-of-order sample) costs only its own series: the
	// batch's other requests are still sent. One that failed after its retries (the
	// backend is down) ends the batch.
	var refused []error
	for from := 0; from < batch.len(); from += e.cfg.MaxSeriesPerRequest {
		to := min(batch.len(), from+e.cfg.MaxSeriesPerRequest)
		if err := e.sendRetrying(ctx, batch.request(from, to), to-from); err != nil {
			if !consumererror.IsPermanent(err) {
				return errors.Join(append(refused, err)...)
			}
			refused = append(refused, err)
		}
	}
	if len(refused) > 0 {
		return consumererror.NewPermanent(errors.Join(refused...))
	}
	return nil
}

// sendRetrying sends one request, retrying what can succeed later (5xx, 429, a connection
// refused) by retry_on_failure's backoff, and a Retry-After when the endpoint gives one.
// The retries are the exporter's own, as contrib's exporter does them, not the
// exporterhelper's: those end at shutdown, dropping the queue at once, where these go on
// while the queue drains, until the drain extension's flush timeout refuses the requests
// (extension/drainextension) — a backend back within it loses nothing. When that timeout
// passes, the wait for the next attempt ends at once: the attempt is the middleware's to
// refuse, and a backoff of up to max_interval or a long Retry-After would otherwise keep a
// stopping collector alive past its grace period.
func (e *rwExporter) sendRetrying(ctx context.Context, request []byte, series int) error {
	retry := e.cfg.RetryConfig
	if !retry.Enabled {
		return e.send(ctx, request, series)
	}
	b := &backoff.ExponentialBackOff{
		InitialInterval:     retry.InitialInterval,
		RandomizationFactor: retry.RandomizationFactor,
		Multiplier:          retry.Multiplier,
		MaxInterval:         retry.MaxInterval,
	}
	b.Reset()
	start := time.Now()
	lastAttempt := false
	for attempt := 1; ; attempt++ {
		err := e.send(ctx, request, series)
		if err == nil || consumererror.IsPermanent(err) {
			return err
		}
		if lastAttempt {
			return fmt.Errorf("%w (retries ended: the flush timeout passed during shutdown)", err)
		}
		wait := b.NextBackOff()
		var throttled *retryAfterError
		if errors.As(err, &throttled) {
			wait = throttled.delay
		}
		if retry.MaxElapsedTime > 0 && time.Since(start)+wait > retry.MaxElapsedTime {
			return fmt.Errorf("%w (gave up after %d attempts in %s: retry_on_failure::max_elapsed_time)", err, attempt, time.Since(start).Round(time.Millisecond))
		}
		e.settings.Logger.Warn("Remote-write failed; retrying.", zap.Error(err), zap.Int("attempt", attempt), zap.Duration("interval", wait))
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-e.flushTimeoutPassed:
			timer.Stop()
			lastAttempt = true
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("%w (retries ended: %w)", err, context.Cause(ctx))
		}
	}
}

// retryAfterError is a refusal that says when to try again.
type retryAfterError struct {
	err   error
	delay time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// send writes one remote-write 1.0 request (an encoded WriteRequest of the given number
// of series) once. A 5xx, a 429 or a failed connection is an error to retry (with the
// endpoint's Retry-After, if any); any other refusal is permanent: the same body would be
// refused again.
func (e *rwExporter) send(ctx context.Context, request []byte, series int) error {
	e.compressed = snappy.Encode(e.compressed[:cap(e.compressed)], request)

	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.ClientConfig.Endpoint, bytes.NewReader(e.compressed))
	if err != nil {
		return consumererror.NewPermanent(fmt.Errorf("remote_write: %w", err))
	}
	httpReq.Header.Set("Content-Encoding", "snappy")
	httpReq.Header.Set("Content-Type", "application/x-protobuf")
	httpReq.Header.Set("User-Agent", e.userAgent)
	httpReq.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")

	resp, err := e.client.Do(httpReq)
	if err != nil {
		return fmt.Errorf("remote_write: sending %d series: %w", series, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	_, _ = io.Copy(io.Discard, resp.Body) // lets the connection be reused
	if resp.StatusCode/100 == 2 {
		return nil
	}
	err = fmt.Errorf("remote_write: %s refused %d series: %s: %s", e.cfg.ClientConfig.Endpoint, series, resp.Status, bytes.TrimSpace(msg))
	if resp.StatusCode/100 == 5 || resp.StatusCode == http.StatusTooManyRequests {
		if delay, ok := retryAfter(resp.Header.Get("Retry-After")); ok {
			return &retryAfterError{err: err, delay: delay}
		}
		return err
	}
	return consumererror.NewPermanent(err)
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
