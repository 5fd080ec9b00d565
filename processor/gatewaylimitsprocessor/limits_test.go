package gatewaylimitsprocessor

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The issue: one token created 200,000 series in 4.9 s. Only max_new_series_per_minute of
// them pass; the budget refills over the minute; another client has its own budget.
func TestNewSeriesPerMinute(t *testing.T) {
	cfg := generous()
	cfg.MaxNewSeriesPerMinute = 1000
	f := newFixture(t, cfg)
	a := node("node-a", "10.0.0.1")

	passed := 0
	for i := range 40 { // 200,000 series in 40 requests over 4.9 s
		if i > 0 {
			f.step(4900 * time.Millisecond / 39)
		}
		out, err := f.send(a, gauges("node-a", "hw.gpu.utilization", i*5000, 5000))
		require.NoError(t, err)
		passed += out.DataPointCount()
	}
	// The bucket holds 1,000 and regains 1,000 a minute: 4.9 s of it is 81 more.
	assert.Equal(t, 1000+81, passed)
	assert.Equal(t, map[string]map[string]int64{"node-a": {"new_series": 200000 - 1081}}, f.refusals(t))

	// Series it already has keep passing, budget or not.
	out, err := f.send(a, gauges("node-a", "hw.gpu.utilization", 0, 1000))
	require.NoError(t, err)
	assert.Equal(t, 1000, out.DataPointCount())

	// Another client is not affected.
	out, err = f.send(node("node-b", "10.0.0.2"), gauges("node-b", "hw.gpu.utilization", 0, 1000))
	require.NoError(t, err)
	assert.Equal(t, 1000, out.DataPointCount())
	assert.NotContains(t, f.refusals(t), "node-b")

	// A minute later, another 1,000.
	f.step(time.Minute)
	out, err = f.send(a, gauges("node-a", "hw.gpu.utilization", 500000, 5000))
	require.NoError(t, err)
	assert.Equal(t, 1000, out.DataPointCount())
}

// A client holds at most max_series_per_client live series; one not seen for
// series_idle_timeout is forgotten and makes room.
func TestSeriesCapAndIdleTimeout(t *testing.T) {
	cfg := generous()
	cfg.MaxSeriesPerClient = 500
	cfg.SeriesIdleTimeout = 10 * time.Minute
	f := newFixture(t, cfg)
	a := from("10.0.0.1")

	out, err := f.send(a, gauges("h", "hw.gpu.utilization", 0, 800))
	require.NoError(t, err)
	assert.Equal(t, 500, out.DataPointCount())
	assert.Equal(t, int64(300), f.refusals(t)["10.0.0.1"]["series_cap"])
	assert.Equal(t, int64(500), f.gauge(t, "otelcol_gateway_limits_tracked_series"))

	// The first 100 keep reporting; the other 400 stop.
	for range 11 {
		f.step(time.Minute)
		out, err = f.send(a, gauges("h", "hw.gpu.utilization", 0, 100))
		require.NoError(t, err)
		assert.Equal(t, 100, out.DataPointCount())
	}
	assert.Equal(t, int64(100), f.gauge(t, "otelcol_gateway_limits_tracked_series"))
	out, err = f.send(a, gauges("h", "hw.gpu.utilization", 1000, 500))
	require.NoError(t, err)
	assert.Equal(t, 400, out.DataPointCount(), "room for 400 new series")
}

// The issue: one histogram point with 50,000 buckets became 50,001 series. It is dropped;
// a histogram of ordinary size, the request's other points, pass. Exponential histograms
// and summaries are bounded too.
func TestHistogramBuckets(t *testing.T) {
	cfg := generous()
	cfg.AllowedMetricNames = AllowAny // the contract has no histograms
	f := newFixture(t, cfg)

	md := gauges("h", "hw.gpu.utilization", 0, 3)
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	huge := ms.AppendEmpty()
	huge.SetName("request.duration")
	dp := huge.SetEmptyHistogram().DataPoints().AppendEmpty()
	for i := range 50000 {
		dp.ExplicitBounds().Append(float64(i))
	}
	dp.BucketCounts().EnsureCapacity(50001)
	for range 50001 {
		dp.BucketCounts().Append(1)
	}
	ok := huge.Histogram().DataPoints().AppendEmpty()
	ok.Attributes().PutStr("route", "/")
	ok.ExplicitBounds().FromRaw([]float64{0.1, 1, 10})
	ok.BucketCounts().FromRaw([]uint64{1, 2, 3, 4})

	exp := ms.AppendEmpty()
	exp.SetName("request.size")
	edp := exp.SetEmptyExponentialHistogram().DataPoints().AppendEmpty()
	edp.Positive().BucketCounts().FromRaw(make([]uint64, 150))
	edp.Negative().BucketCounts().FromRaw(make([]uint64, 11))

	sum := ms.AppendEmpty()
	sum.SetName("request.latency")
	sdp := sum.SetEmptySummary().DataPoints().AppendEmpty()
	for range 161 {
		sdp.QuantileValues().AppendEmpty()
	}

	out, err := f.send(from("10.0.0.1"), md)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"hw.gpu.utilization": 3, "request.duration": 1}, names(out))
	assert.Equal(t, map[string]map[string]int64{"10.0.0.1": {"buckets": 3}}, f.refusals(t))
	// The histogram that passed counts for its 4 buckets + _sum + _count.
	assert.Equal(t, int64(3+6), f.gauge(t, "otelcol_gateway_limits_tracked_series"))
}

// The issue: a 100,007-character metric name and a 100,003-character label key passed.
func TestNameAndKeyLength(t *testing.T) {
	cfg := generous()
	cfg.AllowedMetricNames = AllowAny // so that the name's length is what refuses it
	f := newFixture(t, cfg)

	md := gauges("h", "hw.gpu.utilization", 0, 2)
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	long := ms.AppendEmpty()
	long.SetName("hw." + strings.Repeat("x", 100004))
	long.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	require.Len(t, long.Name(), 100007)
	longUnit := ms.AppendEmpty()
	longUnit.SetName("hw.power")
	longUnit.SetUnit(strings.Repeat("W", 1000)) // it would become part of the Prometheus name
	longUnit.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	// One point of the first metric gets a long key: that point goes, its neighbour stays.
	ms.At(0).Gauge().DataPoints().At(1).Attributes().PutStr(strings.Repeat("k", 100003), "v")
	// A resource with a long key: all its points go.
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(strings.Repeat("r", 65), "v")
	rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetName("hw.status")
	rm.ScopeMetrics().At(0).Metrics().At(0).SetEmptySum().DataPoints().AppendEmpty().SetIntValue(1)

	out, err := f.send(from("10.0.0.1"), md)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"hw.gpu.utilization": 1}, names(out))
	assert.Equal(t, map[string]map[string]int64{"10.0.0.1": {"name_length": 2, "key_length": 2}}, f.refusals(t))

	// Keys and names at the limits pass.
	md = gauges("h", "hw.gpu.utilization", 10, 1)
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Attributes().PutStr(strings.Repeat("k", 64), "v")
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName(strings.Repeat("n", 127))
	out, err = f.send(from("10.0.0.1"), md)
	require.NoError(t, err)
	assert.Equal(t, 1, out.DataPointCount())
}

// Exactly the contract's names pass, not every hw.* / nvidia.* name.
func TestContractNames(t *testing.T) {
	for _, c := range []struct {
		allowed string
		want    map[string]int
	}{
		{AllowContract, map[string]int{"hw.gpu.utilization": 2}},
		{AllowAny, map[string]int{"hw.gpu.utilization": 2, "nvidia.gpu.probe": 2}},
	} {
		t.Run(c.allowed, func(t *testing.T) {
			cfg := generous()
			cfg.AllowedMetricNames = c.allowed
			f := newFixture(t, cfg)
			md := gauges("h", "hw.gpu.utilization", 0, 2)
			gauges("h", "nvidia.gpu.probe", 0, 2).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
			out, err := f.send(node("node-a", "10.0.0.1"), md)
			require.NoError(t, err)
			assert.Equal(t, c.want, names(out))
			if c.allowed == AllowContract {
				assert.Equal(t, map[string]map[string]int64{"node-a": {"unknown_metric": 2}}, f.refusals(t))
			} else {
				assert.Empty(t, f.refusals(t))
			}
		})
	}
}

// Over max_points_per_second the whole request is refused with a retryable error that
// says when to retry; nothing of it is dropped or counted as series. Once the bucket has
// refilled, the same request passes.
func TestPointsPerSecond(t *testing.T) {
	cfg := generous()
	cfg.MaxPointsPerSecond = 1000
	f := newFixture(t, cfg)
	a := node("node-a", "10.0.0.1")

	out, err := f.send(a, gauges("h", "hw.gpu.utilization", 0, 800))
	require.NoError(t, err)
	assert.Equal(t, 800, out.DataPointCount())

	req := gauges("h", "hw.gpu.utilization", 800, 800)
	_, err = f.send(a, req)
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err), "retryable: the agent's queue sends it again")
	st, ok := status.FromError(err)
	require.True(t, ok, "a gRPC status the OTLP receiver passes on as it is")
	assert.Equal(t, codes.Unavailable, st.Code())
	assert.Contains(t, st.Message(), "node-a")
	require.Len(t, st.Details(), 1)
	assert.Equal(t, time.Second, st.Details()[0].(*errdetails.RetryInfo).GetRetryDelay().AsDuration())
	assert.Equal(t, 800, req.DataPointCount(), "the request is left whole")
	assert.Equal(t, map[string]map[string]int64{"node-a": {"rate": 800}}, f.refusals(t))

	// Another client has its own bucket.
	_, err = f.send(node("node-b", "10.0.0.2"), gauges("h", "hw.gpu.utilization", 0, 800))
	require.NoError(t, err)

	f.step(time.Second)
	out, err = f.send(a, req)
	require.NoError(t, err)
	assert.Equal(t, 800, out.DataPointCount())

	// A request larger than the bucket passes when the bucket is full (an agent's largest
	// batch is never refused for good), and the debt is paid by waiting.
	f.step(10 * time.Second)
	_, err = f.send(a, gauges("h", "hw.gpu.utilization", 0, 2500))
	require.NoError(t, err)
	_, err = f.send(a, gauges("h", "hw.gpu.utilization", 0, 10))
	require.Error(t, err)
	st, _ = status.FromError(err)
	assert.Equal(t, 2*time.Second, st.Details()[0].(*errdetails.RetryInfo).GetRetryDelay().AsDuration(), "1.5 s of debt + 10 points, rounded up")
	f.step(1510 * time.Millisecond)
	_, err = f.send(a, gauges("h", "hw.gpu.utilization", 0, 10))
	require.NoError(t, err)
}

// The client is the node its token names, wherever it connects from; without that claim
// (a shared bearer token, no auth) it is the client's IP address.
func TestClientIdentity(t *testing.T) {
	id := newIdentity(defaultClientIdentity)
	assert.Equal(t, "node-a", id.of(node("node-a", "10.0.0.1")))
	assert.Equal(t, "node-a", id.of(node("node-a", "10.0.9.9")))
	assert.Equal(t, "10.0.0.1", id.of(from("10.0.0.1")))
	assert.Equal(t, "2001:db8::1", id.of(from("2001:db8::1")))
	assert.Equal(t, "unknown", id.of(context.Background()))

	withAuth := func(a authData) context.Context {
		ctx := from("10.0.0.3")
		info := clientInfo(ctx)
		info.Auth = a
		return clientContext(info)
	}
	assert.Equal(t, "10.0.0.3", id.of(withAuth(authData{"subject": "agent"})), "no such claim")
	assert.Equal(t, "10.0.0.3", id.of(withAuth(authData{"claims.kubernetes.io": map[string]any{"node": "flat"}})), "not an object")
	assert.Equal(t, "10.0.0.3", id.of(withAuth(authData{"claims.kubernetes.io": map[string]any{"node": map[string]any{"name": ""}}})), "empty")
	assert.Equal(t, "10.0.0.3", id.of(withAuth(authData{"claims.kubernetes.io": map[string]any{"node": map[string]any{"name": []any{"a"}}}})), "a list")
	assert.Equal(t, "agent", newIdentity("subject").of(withAuth(authData{"subject": "agent"})))
	assert.Equal(t, "42", newIdentity("claims.tenant").of(withAuth(authData{"claims.tenant": float64(42)})))
	assert.Len(t, newIdentity("subject").of(withAuth(authData{"subject": strings.Repeat("s", 1000)})), maxIdentityLength)
	assert.Equal(t, "10.0.0.1", newIdentity("").of(node("node-a", "10.0.0.1")), "client_identity empty: always the address")

	// Through the limiter: two addresses, one node, one budget and one count.
	cfg := generous()
	cfg.MaxSeriesPerClient = 10
	f := newFixture(t, cfg)
	_, err := f.send(node("node-a", "10.0.0.1"), gauges("h", "hw.gpu.utilization", 0, 8))
	require.NoError(t, err)
	out, err := f.send(node("node-a", "10.0.0.9"), gauges("h", "hw.gpu.utilization", 100, 8))
	require.NoError(t, err)
	assert.Equal(t, 2, out.DataPointCount())
	out, err = f.send(from("10.0.0.1"), gauges("h", "hw.gpu.utilization", 100, 8))
	require.NoError(t, err)
	assert.Equal(t, 8, out.DataPointCount(), "the bare address is another client")
	assert.Equal(t, map[string]map[string]int64{"node-a": {"series_cap": 6}}, f.refusals(t))
}

// At most max_clients are tracked; the least recently seen is forgotten first.
func TestMaxClients(t *testing.T) {
	cfg := generous()
	cfg.MaxClients = 2
	cfg.MaxSeriesPerClient = 5
	f := newFixture(t, cfg)
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.3"} {
		_, err := f.send(from(ip), gauges("h", "hw.gpu.utilization", 0, 5))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(2), f.gauge(t, "otelcol_gateway_limits_tracked_clients"))
	assert.Equal(t, int64(10), f.gauge(t, "otelcol_gateway_limits_tracked_series"))
	// 10.0.0.1 was kept (seen after .2): its series are known, a sixth one is over its cap.
	out, err := f.send(from("10.0.0.1"), gauges("h", "hw.gpu.utilization", 0, 6))
	require.NoError(t, err)
	assert.Equal(t, 5, out.DataPointCount())
	// 10.0.0.2 was forgotten: it starts afresh.
	out, err = f.send(from("10.0.0.2"), gauges("h", "hw.gpu.utilization", 100, 5))
	require.NoError(t, err)
	assert.Equal(t, 5, out.DataPointCount())
}

// The same series sent again (a backlog replayed: several points of each series in one
// request) is one series; a resource attribute that differs makes another.
func TestSeriesIdentity(t *testing.T) {
	cfg := generous()
	cfg.MaxSeriesPerClient = 3
	f := newFixture(t, cfg)
	md := gauges("h", "hw.gpu.utilization", 0, 3)
	gauges("h", "hw.gpu.utilization", 0, 3).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	out, err := f.send(from("10.0.0.1"), md)
	require.NoError(t, err)
	assert.Equal(t, 6, out.DataPointCount())

	other := gauges("h", "hw.gpu.utilization", 0, 3)
	other.ResourceMetrics().At(0).Resource().Attributes().PutStr("k8s.pod.name", "p")
	out, err = f.send(from("10.0.0.1"), other)
	require.NoError(t, err)
	assert.Zero(t, out.DataPointCount())

	// Attribute order does not matter; the unit does (it is part of the Prometheus name).
	reordered := pmetric.NewMetrics()
	rm := reordered.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("hw.id", "GPU-0")
	rm.Resource().Attributes().PutStr("host.name", "h")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("hw.gpu.utilization")
	m.SetUnit("1")
	m.SetEmptyGauge().DataPoints().AppendEmpty().Attributes().PutStr("hw.gpu.task", "s1")
	out, err = f.send(from("10.0.0.1"), reordered)
	require.NoError(t, err)
	assert.Equal(t, 1, out.DataPointCount())
	m.SetUnit("%")
	out, err = f.send(from("10.0.0.1"), reordered)
	require.NoError(t, err)
	assert.Zero(t, out.DataPointCount())
}

// Refusals are logged at once the first time, then summed into one line per interval.
func TestRefusalsLoggedRateLimited(t *testing.T) {
	cfg := generous()
	cfg.MaxSeriesPerClient = 1
	f := newFixture(t, cfg)
	_, err := f.send(from("10.0.0.1"), gauges("h", "nvidia.gpu.probe", 0, 2))
	require.NoError(t, err)
	first := f.logs.TakeAll()
	require.Len(t, first, 1)
	assert.Equal(t, "Points refused by gateway limits", first[0].Message)
	assert.Equal(t, map[string]any{"client": "10.0.0.1", "reason": "unknown_metric", "points": int64(2), "example_metric": "nvidia.gpu.probe"}, first[0].ContextMap())

	for range 100 {
		_, err = f.send(from("10.0.0.2"), gauges("h", "hw.gpu.utilization", 0, 3))
		require.NoError(t, err)
	}
	assert.Zero(t, f.logs.Len(), "no line per refusal")
	f.l.report.flush()
	sum := f.logs.TakeAll()
	require.Len(t, sum, 1)
	assert.Equal(t, "200", sum[0].ContextMap()["by_reason"].(string)[len("series_cap="):])
	assert.Equal(t, "10.0.0.2=200", sum[0].ContextMap()["top_clients"])
}

// Requests of many clients at once (the OTLP receiver calls consumers concurrently),
// clients forgotten meanwhile: run with -race.
func TestConcurrentClients(t *testing.T) {
	cfg := generous()
	cfg.MaxClients = 4
	cfg.MaxSeriesPerClient = 50
	f := newFixture(t, cfg)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				ip := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"}[(g+i)%6]
				_, err := f.l.processMetrics(from(ip), gauges("h", "hw.gpu.utilization", i, 20))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, f.gauge(t, "otelcol_gateway_limits_tracked_series"), int64(4*50))
}

// The counter's client label takes at most max_clients values over the process's life:
// clients forgotten and new ones (addresses that rotate) are counted as "other" beyond.
func TestClientLabelsBounded(t *testing.T) {
	cfg := generous()
	cfg.MaxClients = 2
	f := newFixture(t, cfg)
	for _, ip := range []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.1"} {
		_, err := f.send(from(ip), gauges("h", "nvidia.gpu.probe", 0, 1))
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]map[string]int64{
		"10.0.0.1": {"unknown_metric": 2}, "10.0.0.2": {"unknown_metric": 1}, "other": {"unknown_metric": 2},
	}, f.refusals(t))
}

// Retry-After is in whole seconds: the delay is rounded up, never to 0.
func TestRateErrorRoundsUp(t *testing.T) {
	for wait, want := range map[time.Duration]time.Duration{
		0: time.Second, time.Millisecond: time.Second, time.Second: time.Second,
		1001 * time.Millisecond: 2 * time.Second, 2500 * time.Millisecond: 3 * time.Second,
	} {
		st, _ := status.FromError(rateError("c", 10, 1, wait))
		assert.Equal(t, want, st.Details()[0].(*errdetails.RetryInfo).GetRetryDelay().AsDuration(), wait)
	}
}
