package authauditextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/authauditextension"

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/topcounts"
)

// Reasons a request is refused, the metric's `reason` attribute.
const (
	// reasonRefused: the authenticator refused the credentials (or their absence).
	reasonRefused = "refused"
	// reasonAborted: the request's context ended before the authenticator answered.
	reasonAborted = "aborted"
	// reasonIdentity: the authenticator accepted the credentials, but the identity they
	// carry is not one require_attributes allows.
	reasonIdentity = "identity"
)

// maxClients bounds the per-client counts kept between two summary lines (a scan from many
// addresses); further addresses are counted under "other".
const maxClients = 1000

// auditor wraps a server authenticator: its answer is the wrapped one's, and each refusal
// is counted and logged.
type auditor struct {
	cfg      *Config
	id       component.ID
	logger   *zap.Logger
	now      func() time.Time
	refusals metric.Int64Counter
	attrs    map[string]metric.AddOption // reason → the counter's attributes
	required []requirement               // require_attributes, compiled

	next extensionauth.Server // set by Start

	mu         sync.Mutex
	since      time.Time      // start of the counts below
	byReason   map[string]int // refusals not yet logged, by reason
	byClient   map[string]int // the same, by client host
	lastError  string         // the last refusal's error, for the summary line
	lastLogged time.Time      // the last line written
	stop       chan struct{}  // closed by Shutdown
	done       chan struct{}  // closed when the summary loop ends
}

var (
	_ extensionauth.Server = (*auditor)(nil)
)

func newAuditor(cfg *Config, id component.ID, logger *zap.Logger, meters metric.MeterProvider, now func() time.Time) (*auditor, error) {
	refusals, err := meters.Meter("github.com/otelcol-gpu/otelcol-gpu/extension/authauditextension").Int64Counter(
		"otelcol_auth_refusals",
		metric.WithDescription("Requests a server authenticator refused, by authenticator and reason (refused: bad or missing credentials; aborted: the request ended first)."),
		metric.WithUnit("{request}"),
	)
	if err != nil {
		return nil, err
	}
	required, err := cfg.requirements()
	if err != nil {
		return nil, err
	}
	a := &auditor{
		cfg: cfg, id: id, logger: logger, now: now, refusals: refusals,
		attrs: map[string]metric.AddOption{}, required: required,
		byReason: map[string]int{}, byClient: map[string]int{},
	}
	for _, reason := range []string{reasonRefused, reasonAborted, reasonIdentity} {
		a.attrs[reason] = metric.WithAttributeSet(attribute.NewSet(
			attribute.String("authenticator", cfg.Authenticator.String()),
			attribute.String("reason", reason)))
	}
	return a, nil
}

// Dependencies makes the collector start the audited authenticator first.
func (a *auditor) Dependencies() []component.ID { return []component.ID{a.cfg.Authenticator} }

// Start finds the audited authenticator among the collector's extensions.
func (a *auditor) Start(_ context.Context, host component.Host) error {
	ext, ok := host.GetExtensions()[a.cfg.Authenticator]
	if !ok {
		return fmt.Errorf("%s: authenticator %s is not an extension of this collector: configure it under extensions and list it in service::extensions", a.id, a.cfg.Authenticator)
	}
	srv, ok := ext.(extensionauth.Server)
	if !ok {
		return fmt.Errorf("%s: %s is not a server authenticator", a.id, a.cfg.Authenticator)
	}
	a.next = srv
	a.stop, a.done = make(chan struct{}), make(chan struct{})
	go a.summaries()
	return nil
}

// Shutdown writes what is not yet logged.
func (a *auditor) Shutdown(context.Context) error {
	if a.stop == nil {
		return nil
	}
	close(a.stop)
	<-a.done
	a.stop = nil
	return nil
}

// Authenticate answers as the audited authenticator does, and records a refusal.
func (a *auditor) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	if a.next == nil {
		return ctx, errors.New("auth_audit: not started")
	}
	out, err := a.next.Authenticate(ctx, sources)
	if err != nil {
		reason := reasonRefused
		if ctx.Err() != nil {
			reason = reasonAborted
		}
		a.record(ctx, reason, err)
		return out, err
	}
	if err := a.checkIdentity(out); err != nil {
		a.record(ctx, reasonIdentity, err)
		return ctx, err
	}
	return out, nil
}

// checkIdentity holds the identity the authenticator put in ctx to require_attributes.
// The error names the attribute, never its value (a claim can hold anything).
func (a *auditor) checkIdentity(ctx context.Context) error {
	if len(a.required) == 0 {
		return nil
	}
	auth := client.FromContext(ctx).Auth
	if auth == nil {
		return fmt.Errorf("%s: the authenticator returned no identity to check", a.id)
	}
	for _, r := range a.required {
		value, ok := lookup(auth.GetAttribute(r.attribute), r.path)
		if !ok {
			return fmt.Errorf("%s: the identity has no %s", a.id, r.name)
		}
		if !r.pattern.MatchString(value) {
			return fmt.Errorf("%s: the identity's %s is not one this gateway accepts", a.id, r.name)
		}
	}
	return nil
}

// lookup follows path through nested maps (JSON claims decode to map[string]any) and
// returns a string found at its end.
func lookup(v any, path []string) (string, bool) {
	for _, key := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = m[key]; !ok {
			return "", false
		}
	}
	s, ok := v.(string)
	return s, ok
}

func (a *auditor) record(ctx context.Context, reason string, err error) {
	a.refusals.Add(context.Background(), 1, a.attrs[reason])
	clientHost := clientOf(ctx)
	now := a.now()

	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.byReason) == 0 && now.Sub(a.lastLogged) >= a.cfg.LogInterval {
		// The first refusal after a quiet interval: at once, with everything about it.
		a.lastLogged = now
		a.logger.Warn("Authentication refused",
			zap.String("authenticator", a.cfg.Authenticator.String()),
			zap.String("client", clientHost), zap.String("reason", reason), zap.Error(err))
		return
	}
	if len(a.byReason) == 0 {
		a.since = now
	}
	a.byReason[reason]++
	if _, ok := a.byClient[clientHost]; ok || len(a.byClient) < maxClients {
		a.byClient[clientHost]++
	} else {
		a.byClient["other"]++
	}
	a.lastError = err.Error()
}

// summaries writes, once per log_interval, one line for the refusals not yet logged.
func (a *auditor) summaries() {
	defer close(a.done)
	ticker := time.NewTicker(a.cfg.LogInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
			a.flush()
		case <-a.stop:
			a.flush()
			return
		}
	}
}

func (a *auditor) flush() {
	a.mu.Lock()
	defer a.mu.Unlock()
	total := 0
	for _, n := range a.byReason {
		total += n
	}
	if total == 0 {
		return
	}
	a.lastLogged = a.now()
	a.logger.Warn("Authentication refusals",
		zap.String("authenticator", a.cfg.Authenticator.String()),
		zap.Int("count", total), zap.Time("since", a.since),
		zap.String("by_reason", topcounts.Format(a.byReason, len(a.byReason))),
		zap.String("top_clients", topcounts.Format(a.byClient, a.cfg.TopClients)),
		zap.String("last_error", a.lastError))
	a.byReason, a.byClient = map[string]int{}, map[string]int{}
}

// clientOf is the request's client host (without its port), as the collector's HTTP and
// gRPC servers record it.
func clientOf(ctx context.Context) string {
	addr := client.FromContext(ctx).Addr
	if addr == nil {
		return "unknown"
	}
	s := addr.String()
	if host, _, err := net.SplitHostPort(s); err == nil {
		return host
	}
	return s
}
