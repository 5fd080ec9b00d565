package authauditextension

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/extension/extensionauth"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

var audited = component.MustNewIDWithName("bearertokenauth", "agents")

// tokenAuth accepts "Bearer good" and refuses anything else, as bearertokenauth does.
type tokenAuth struct {
	component.StartFunc
	component.ShutdownFunc
}

type principalKey struct{}

func (tokenAuth) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	for k, v := range sources {
		if strings.EqualFold(k, "authorization") && len(v) > 0 && v[0] == "Bearer good" {
			return context.WithValue(ctx, principalKey{}, "agent"), nil
		}
	}
	if len(sources["authorization"]) == 0 {
		return ctx, errors.New("missing or empty authorization header: authorization")
	}
	return ctx, errors.New("provided authorization does not match expected scheme or token")
}

type host struct {
	exts map[component.ID]component.Component
}

func (h host) GetExtensions() map[component.ID]component.Component { return h.exts }

// fixture is an auditor over tokenAuth with a manual clock, observed logs and metrics.
type fixture struct {
	a     *auditor
	logs  *observer.ObservedLogs
	tel   *componenttest.Telemetry
	clock *time.Time
}

func newFixture(t *testing.T, interval time.Duration) fixture {
	t.Helper()
	core, logs := observer.New(zap.InfoLevel)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	clock := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	cfg := createDefaultConfig().(*Config)
	cfg.Authenticator = audited
	cfg.LogInterval = interval
	cfg.TopClients = 2
	require.NoError(t, cfg.Validate())
	a, err := newAuditor(cfg, component.MustNewID(typeStr), zap.New(core), tel.NewTelemetrySettings().MeterProvider, func() time.Time { return clock })
	require.NoError(t, err)
	require.NoError(t, a.Start(context.Background(), host{exts: map[component.ID]component.Component{audited: tokenAuth{}}}))
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })
	return fixture{a: a, logs: logs, tel: tel, clock: &clock}
}

func from(ip string) context.Context {
	return client.NewContext(context.Background(), client.Info{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

func (f fixture) refusals(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	m, err := f.tel.GetMetric("otelcol_auth_refusals")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		auth, _ := dp.Attributes.Value("authenticator")
		assert.Equal(t, audited.String(), auth.AsString())
		reason, _ := dp.Attributes.Value("reason")
		out[reason.AsString()] = dp.Value
	}
	return out
}

// The audited authenticator's answer is the answer, context included; an accepted request
// leaves no trace.
func TestAnswersAsTheAuditedAuthenticator(t *testing.T) {
	f := newFixture(t, time.Minute)
	ctx, err := f.a.Authenticate(from("10.0.0.1"), map[string][]string{"authorization": {"Bearer good"}})
	require.NoError(t, err)
	assert.Equal(t, "agent", ctx.Value(principalKey{}))
	_, err = f.a.Authenticate(from("10.0.0.2"), map[string][]string{"authorization": {"Bearer stale"}})
	assert.ErrorContains(t, err, "does not match expected scheme or token")
	assert.Equal(t, map[string]int64{reasonRefused: 1}, f.refusals(t))
}

// A refusal is counted and logged at once with its client; a storm of them within the
// interval is one summary line (count, reasons, top clients), not a line each; an aborted
// request is counted apart.
func TestRefusalsAreCountedAndLoggedRateLimited(t *testing.T) {
	f := newFixture(t, time.Minute)
	_, _ = f.a.Authenticate(from("10.0.0.9"), map[string][]string{})
	first := f.logs.TakeAll()
	require.Len(t, first, 1)
	assert.Equal(t, "Authentication refused", first[0].Message)
	fields := first[0].ContextMap()
	assert.Equal(t, "10.0.0.9", fields["client"])
	assert.Equal(t, audited.String(), fields["authenticator"])
	assert.Contains(t, fields["error"], "missing or empty authorization header")

	for i := range 300 {
		ip := "192.0.2.1"
		if i%3 == 0 {
			ip = "192.0.2.2"
		}
		_, _ = f.a.Authenticate(from(ip), map[string][]string{"authorization": {"Bearer guess"}})
	}
	aborted, cancel := context.WithCancel(from("192.0.2.3"))
	cancel()
	_, _ = f.a.Authenticate(aborted, map[string][]string{"authorization": {"Bearer guess"}})
	assert.Empty(t, f.logs.TakeAll(), "within the interval, nothing more is logged")
	assert.Equal(t, map[string]int64{reasonRefused: 301, reasonAborted: 1}, f.refusals(t))

	f.a.flush()
	summary := f.logs.TakeAll()
	require.Len(t, summary, 1)
	assert.Equal(t, "Authentication refusals", summary[0].Message)
	fields = summary[0].ContextMap()
	assert.EqualValues(t, 301, fields["count"])
	assert.Equal(t, "refused=300, aborted=1", fields["by_reason"])
	assert.Equal(t, "192.0.2.1=200, 192.0.2.2=100", fields["top_clients"], "the two clients that caused most")
	assert.Contains(t, fields["last_error"], "does not match")

	// Quiet for an interval: the next refusal is logged at once again.
	*f.clock = f.clock.Add(2 * time.Minute)
	_, _ = f.a.Authenticate(from("10.0.0.9"), map[string][]string{})
	assert.Len(t, f.logs.FilterMessage("Authentication refused").TakeAll(), 1)
}

// What is pending when the collector stops is logged, not lost.
func TestShutdownLogsWhatIsPending(t *testing.T) {
	f := newFixture(t, time.Hour)
	for range 3 {
		_, _ = f.a.Authenticate(from("10.0.0.5"), map[string][]string{})
	}
	require.NoError(t, f.a.Shutdown(context.Background()))
	lines := f.logs.FilterMessage("Authentication refusals").TakeAll()
	require.Len(t, lines, 1)
	assert.EqualValues(t, 2, lines[0].ContextMap()["count"], "the first was logged on its own")
}

// A client scanning from many addresses cannot grow the auditor's memory without bound.
func TestClientCountsAreBounded(t *testing.T) {
	f := newFixture(t, time.Hour)
	for i := range maxClients + 500 {
		ip := net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).String()
		_, _ = f.a.Authenticate(from(ip), map[string][]string{})
	}
	f.a.mu.Lock()
	defer f.a.mu.Unlock()
	assert.LessOrEqual(t, len(f.a.byClient), maxClients+1)
	assert.Equal(t, 500, f.a.byClient["other"]+1, "every address beyond the bound counted under other (the first was logged on its own)")
}

func TestStartNamesAMissingOrWrongAuthenticator(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.Authenticator = audited
	a, err := newAuditor(cfg, component.MustNewID(typeStr), zap.NewNop(), componenttest.NewNopTelemetrySettings().MeterProvider, time.Now)
	require.NoError(t, err)
	err = a.Start(context.Background(), host{exts: map[component.ID]component.Component{}})
	assert.ErrorContains(t, err, "authenticator bearertokenauth/agents is not an extension of this collector")
	notAuth := struct {
		component.StartFunc
		component.ShutdownFunc
	}{}
	err = a.Start(context.Background(), host{exts: map[component.ID]component.Component{audited: notAuth}})
	assert.ErrorContains(t, err, "bearertokenauth/agents is not a server authenticator")
	assert.Equal(t, []component.ID{audited}, a.Dependencies())
	var _ extensionauth.Server = a
}

func TestConfigValidation(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	assert.ErrorContains(t, cfg.Validate(), "authenticator: required")
	cfg.Authenticator = audited
	assert.NoError(t, cfg.Validate())
	cfg.LogInterval = 0
	cfg.TopClients = 0
	err := cfg.Validate()
	assert.ErrorContains(t, err, "log_interval")
	assert.ErrorContains(t, err, "top_clients")
}

// oidcLike answers as contrib's oidc extension does: the token's claims become the
// identity, "subject" its sub and "claims.<name>" each top-level claim (nested claims are
// maps). Tokens here are keys of a table.
type oidcLike struct {
	component.StartFunc
	component.ShutdownFunc
	tokens map[string]map[string]any
}

type claimsData map[string]any

func (c claimsData) GetAttribute(name string) any {
	if name == "subject" {
		return c["sub"]
	}
	if claim, ok := strings.CutPrefix(name, "claims."); ok {
		return c[claim]
	}
	return nil
}

func (c claimsData) GetAttributeNames() []string { return []string{"subject"} }

func (o oidcLike) Authenticate(ctx context.Context, sources map[string][]string) (context.Context, error) {
	token, _ := strings.CutPrefix(strings.Join(sources["authorization"], ""), "Bearer ")
	claims, ok := o.tokens[token]
	if !ok {
		return ctx, errors.New("failed to verify token")
	}
	info := client.FromContext(ctx)
	info.Auth = claimsData(claims)
	return client.NewContext(ctx, info), nil
}

func podToken(sub, node string) map[string]any {
	k8s := map[string]any{"namespace": "otelcol-gpu", "pod": map[string]any{"name": "agent-x"}}
	if node != "" {
		k8s["node"] = map[string]any{"name": node, "uid": "0d9c"}
	}
	return map[string]any{"sub": sub, "kubernetes.io": k8s}
}

// With require_attributes, an identity the authenticator accepted is refused unless it is
// the agents' ServiceAccount with a node in its token: another workload's token, or the
// agents' own minted without a pod on a node, cannot speak for a node. The refusal is
// counted and logged as "identity" and names the attribute, never the value.
func TestRequiredIdentityAttributes(t *testing.T) {
	const agentSA = "system:serviceaccount:otelcol-gpu:otelcol-gpu-agent"
	core, logs := observer.New(zap.InfoLevel)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	oidcID := component.MustNewIDWithName("oidc", "agents")
	cfg := createDefaultConfig().(*Config)
	cfg.Authenticator = oidcID
	cfg.RequireAttributes = map[string]string{
		"subject":                        agentSA,
		"claims.kubernetes.io/node/name": ".+",
	}
	require.NoError(t, cfg.Validate())
	a, err := newAuditor(cfg, component.MustNewID(typeStr), zap.New(core), tel.NewTelemetrySettings().MeterProvider, time.Now)
	require.NoError(t, err)
	authn := oidcLike{tokens: map[string]map[string]any{
		"agent-on-a":     podToken(agentSA, "node-a"),
		"other-sa":       podToken("system:serviceaccount:team-x:default", "node-a"),
		"agent-nodeless": podToken(agentSA, ""),
		"sub-only":       {"sub": agentSA},
	}}
	require.NoError(t, a.Start(context.Background(), host{exts: map[component.ID]component.Component{oidcID: authn}}))
	t.Cleanup(func() { _ = a.Shutdown(context.Background()) })

	bearer := func(tok string) map[string][]string { return map[string][]string{"authorization": {"Bearer " + tok}} }
	ctx, err := a.Authenticate(from("10.0.0.1"), bearer("agent-on-a"))
	require.NoError(t, err)
	node, ok := lookup(client.FromContext(ctx).Auth.GetAttribute("claims.kubernetes.io"), []string{"node", "name"})
	assert.True(t, ok)
	assert.Equal(t, "node-a", node, "the accepted identity reaches the pipeline unchanged")

	for tok, want := range map[string]string{
		"other-sa":       "identity's subject is not one this gateway accepts",
		"agent-nodeless": "identity has no claims.kubernetes.io/node/name",
		"sub-only":       "identity has no claims.kubernetes.io/node/name",
	} {
		_, err := a.Authenticate(from("10.0.0.2"), bearer(tok))
		require.Error(t, err, tok)
		assert.Contains(t, err.Error(), want, tok)
		assert.NotContains(t, err.Error(), "team-x", "a refusal never echoes the identity's values")
	}
	_, err = a.Authenticate(from("10.0.0.3"), bearer("forged"))
	require.Error(t, err)

	m, err := tel.GetMetric("otelcol_auth_refusals")
	require.NoError(t, err)
	got := map[string]int64{}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		reason, _ := dp.Attributes.Value("reason")
		got[reason.AsString()] = dp.Value
	}
	assert.Equal(t, map[string]int64{"identity": 3, "refused": 1}, got)
	require.NotZero(t, logs.Len())
	assert.Equal(t, "identity", logs.All()[0].ContextMap()["reason"])
}

func TestRequireAttributesValidation(t *testing.T) {
	for want, attrs := range map[string]map[string]string{
		"claims.kubernetes.io//name": {"claims.kubernetes.io//name": ".+"},
		"error parsing regexp":       {"subject": "system:serviceaccount:(ns"},
	} {
		cfg := createDefaultConfig().(*Config)
		cfg.Authenticator = audited
		cfg.RequireAttributes = attrs
		err := cfg.Validate()
		require.Error(t, err)
		assert.Contains(t, err.Error(), want)
	}
}
