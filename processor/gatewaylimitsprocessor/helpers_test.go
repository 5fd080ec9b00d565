package gatewaylimitsprocessor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/client"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fixture is a limiter with a manual clock, observed logs and metrics.
type fixture struct {
	l     *limiter
	logs  *observer.ObservedLogs
	tel   *componenttest.Telemetry
	clock *time.Time
}

// generous is a config whose limits the tests below do not reach unless they lower one.
func generous() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.MaxNewSeriesPerMinute = 1 << 30
	cfg.MaxSeriesPerClient = 1 << 30
	cfg.MaxPointsPerSecond = 1 << 30
	return cfg
}

func newFixture(t testing.TB, cfg *Config) fixture {
	t.Helper()
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zap.InfoLevel)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	clock := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	set := tel.NewTelemetrySettings()
	set.Logger = zap.New(core)
	l, err := newLimiter(cfg, set, func() time.Time { return clock })
	require.NoError(t, err)
	return fixture{l: l, logs: logs, tel: tel, clock: &clock}
}

func (f fixture) step(d time.Duration) { *f.clock = f.clock.Add(d) }

// send runs one request through the limiter and returns what passed (empty when the
// limiter skipped the whole request) and the error.
func (f fixture) send(ctx context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	out, err := f.l.processMetrics(ctx, md)
	if errors.Is(err, processorhelper.ErrSkipProcessingData) {
		return pmetric.NewMetrics(), nil
	}
	return out, err
}

// refusals reads otelcol_gateway_limited_points: client → reason → points.
func (f fixture) refusals(t testing.TB) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	m, err := f.tel.GetMetric("otelcol_gateway_limited_points")
	if err != nil {
		return out
	}
	for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
		c, _ := dp.Attributes.Value("client")
		r, _ := dp.Attributes.Value("reason")
		if out[c.AsString()] == nil {
			out[c.AsString()] = map[string]int64{}
		}
		out[c.AsString()][r.AsString()] = dp.Value
	}
	return out
}

func (f fixture) gauge(t testing.TB, name string) int64 {
	t.Helper()
	m, err := f.tel.GetMetric(name)
	require.NoError(t, err)
	return m.Data.(metricdata.Gauge[int64]).DataPoints[0].Value
}

// from is a request from ip without authentication data.
func from(ip string) context.Context {
	return client.NewContext(context.Background(), client.Info{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}})
}

// authData is what contrib's oidc authenticator gives: claims under "claims.<name>".
type authData map[string]any

func (a authData) GetAttribute(name string) any { return a[name] }
func (a authData) GetAttributeNames() []string {
	names := make([]string, 0, len(a))
	for k := range a {
		names = append(names, k)
	}
	return names
}

// node is a request from an agent whose service-account token names its node, as a
// projected Kubernetes token does (claim "kubernetes.io": {"node": {"name": …}}).
func node(name, ip string) context.Context {
	return client.NewContext(context.Background(), client.Info{
		Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000},
		Auth: authData{
			"subject": "system:serviceaccount:otelcol-gpu:otelcol-gpu",
			"claims.kubernetes.io": map[string]any{
				"namespace":      "otelcol-gpu",
				"node":           map[string]any{"name": name, "uid": "8b2c"},
				"pod":            map[string]any{"name": "otelcol-gpu-x7k2p", "uid": "1f3a"},
				"serviceaccount": map[string]any{"name": "otelcol-gpu", "uid": "77aa"},
			},
		},
	})
}

// gauges is one resource (a GPU of host) with a gauge metric of n series (distinct
// values of one point attribute), starting at first.
func gauges(host, metricName string, first, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", host)
	rm.Resource().Attributes().PutStr("hw.id", "GPU-0")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName(metricName)
	m.SetUnit("1")
	dps := m.SetEmptyGauge().DataPoints()
	dps.EnsureCapacity(n)
	for i := first; i < first+n; i++ {
		dp := dps.AppendEmpty()
		dp.Attributes().PutStr("hw.gpu.task", fmt.Sprintf("s%d", i))
		dp.SetDoubleValue(0.5)
	}
	return md
}

// names returns the metric names that md holds, with their point counts.
func names(md pmetric.Metrics) map[string]int {
	out := map[string]int{}
	for i := range md.ResourceMetrics().Len() {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				out[ms.At(k).Name()] += pointCount(ms.At(k))
			}
		}
	}
	return out
}

func clientInfo(ctx context.Context) client.Info { return client.FromContext(ctx) }

func clientContext(info client.Info) context.Context {
	return client.NewContext(context.Background(), info)
}
