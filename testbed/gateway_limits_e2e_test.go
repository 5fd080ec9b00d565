//go:build e2e

package testbed

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/agentsim"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// manySeries is n series of nvidia.gpu.throttled from host, one per hw.id.
func manySeries(host string, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("host.name", host)
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("nvidia.gpu.throttled")
	dps := m.SetEmptyGauge().DataPoints()
	now := pcommon.NewTimestampFromTime(time.Now())
	for i := range n {
		dp := dps.AppendEmpty()
		dp.Attributes().PutStr("hw.id", fmt.Sprintf("GPU-%08d", i))
		dp.SetIntValue(0)
		dp.SetTimestamp(now)
	}
	return md
}

// limitedPoints reads otelcol_gateway_limited_points_total by client and reason.
func limitedPoints(t *testing.T, telemetry string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + telemetry + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "otelcol_gateway_limited_points") || strings.HasPrefix(line, "#") {
			continue
		}
		labels := map[string]string{}
		open, end := strings.Index(line, "{"), strings.LastIndex(line, "}")
		for _, kv := range strings.Split(line[open+1:end], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[labels["client"]+" "+labels["reason"]] += v
	}
	return out
}

// TestGatewayLimitsEachClient: one authenticated client cannot fill Prometheus or starve
// the others. Through configs/gateway.yaml (its limits lowered so the test is quick), a
// client sending 20,000 new series gets the minute's budget stored and the rest dropped
// and counted under its own address, while a second client's series keep arriving; a
// histogram point of 50,000 buckets, a 100,007-character metric name, a 100,003-character
// attribute key and a name outside the contract are dropped and counted; a client over
// its points per second is refused as retryable (Unavailable: its agent's queue keeps the
// data) while another is not.
func TestGatewayLimitsEachClient(t *testing.T) {
	p := prom.Start(t, "")
	a := newGatewayAuth(t)
	const newSeriesPerMinute = 500
	otlp, telemetry, _ := startGatewayWithTelemetry(t, p.RemoteWriteURL(), a, nil,
		"processors::batch::timeout=1s",
		fmt.Sprintf("processors::gateway_limits::max_new_series_per_minute=%d", newSeriesPerMinute),
		"processors::gateway_limits::max_points_per_second=30000")
	from := func(i int) []grpc.DialOption {
		return append(a.dialOptions(a.token), grpc.WithContextDialer(agentsim.DialFrom(agentsim.SourceAddress(i))))
	}
	greedy, other := agentsim.SourceAddress(0).String(), agentsim.SourceAddress(1).String()

	if got := export(t, otlp, manySeries("greedy", 20000), from(0)...); got != codes.OK {
		t.Fatalf("20,000 series: %s, want OK (accepted, the excess dropped)", got)
	}
	if got := export(t, otlp, probe("other", "nvidia.gpu.throttled"), from(1)...); got != codes.OK {
		t.Fatalf("the other client: %s, want OK", got)
	}

	buckets := probe("buckets", "hw.gpu.utilization")
	h := buckets.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := h.DataPoints().AppendEmpty()
	hp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	bounds := make([]float64, 49999)
	counts := make([]uint64, 50000)
	for i := range bounds {
		bounds[i] = float64(i)
	}
	hp.ExplicitBounds().FromRaw(bounds)
	hp.BucketCounts().FromRaw(counts)
	longName := probe("long-name", "nvidia.gpu."+strings.Repeat("x", 100007-len("nvidia.gpu.")))
	longKey := probe("long-key", "nvidia.gpu.throttled")
	longKey.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).Attributes().
		PutStr("nvidia."+strings.Repeat("k", 100003-len("nvidia.")), "v")
	for what, md := range map[string]pmetric.Metrics{
		"50,000 buckets":              buckets,
		"100,007-character name":      longName,
		"100,003-character key":       longKey,
		"a name outside the contract": probe("foreign", "nvidia.gpu.probe"),
	} {
		if got := export(t, otlp, md, from(2)...); got != codes.OK {
			t.Errorf("%s: %s, want OK (accepted, then dropped)", what, got)
		}
	}

	prom.Eventually(t, 60*time.Second, "the greedy client's budget and the other client's series", func() error {
		got, err := p.Query(`count by (host_name) (nvidia_gpu_throttled)`)
		if err != nil {
			return err
		}
		byHost := map[string]float64{}
		for _, s := range got {
			byHost[s.Labels["host_name"]] = s.Value
		}
		if byHost["greedy"] != newSeriesPerMinute || byHost["other"] != 1 {
			return fmt.Errorf("series stored by host: %v, want greedy=%d (its minute's budget of new series), other=1", byHost, newSeriesPerMinute)
		}
		return nil
	})
	for _, q := range []string{`{host_name=~"buckets|long-name|long-key|foreign"}`, `count({__name__=~"nvidia_gpu_x{100,}.*"})`} {
		if got, err := p.Query(q); err != nil || len(got) != 0 {
			t.Errorf("%s: %v (%v), want nothing stored", q, got, err)
		}
	}
	counted := limitedPoints(t, telemetry)
	third := agentsim.SourceAddress(2).String()
	for key, want := range map[string]float64{
		greedy + " new_series":    20000 - newSeriesPerMinute,
		third + " buckets":        1,
		third + " name_length":    1,
		third + " key_length":     1,
		third + " unknown_metric": 1,
	} {
		if counted[key] != want {
			t.Errorf("otelcol_gateway_limited_points{client, reason} %q = %v, want %v (all: %v)", key, counted[key], want, counted)
		}
	}
	for key := range counted {
		if strings.HasPrefix(key, other+" ") {
			t.Errorf("the other client had points refused: %v", counted)
		}
	}

	// Points per second: 30,000 a second; the greedy client's next 20,000 (its known
	// series) leave its bucket in debt, so the request after is refused as retryable.
	// The other client is not affected.
	if got := export(t, otlp, manySeries("greedy", 20000), from(0)...); got != codes.OK {
		t.Fatalf("a second request within the rate: %s, want OK", got)
	}
	if got := export(t, otlp, manySeries("greedy", 20000), from(0)...); got != codes.Unavailable {
		t.Errorf("over its points per second: %s, want Unavailable (retryable: the agent keeps the data)", got)
	}
	if got := export(t, otlp, probe("other", "nvidia.gpu.throttled"), from(1)...); got != codes.OK {
		t.Errorf("the other client while the greedy one is over its rate: %s, want OK", got)
	}
	if counted := limitedPoints(t, telemetry); counted[greedy+" rate"] != 20000 {
		t.Errorf("rate refusals counted %v, want %s rate = 20000", counted, greedy)
	}
}
