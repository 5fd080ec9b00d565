//go:build e2e

package testbed

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc/codes"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestGatewayCountsAndLogsRefusedAgents: every request configs/gateway.yaml refuses for
// its token is counted in otelcol_auth_refusals (extension auth_audit) and the first
// is logged with the client's address; a burst is not a log line per request.
func TestGatewayCountsAndLogsRefusedAgents(t *testing.T) {
	p := prom.Start(t, "")
	a := newGatewayAuth(t)
	otlp, telemetry, gw := startGatewayWithTelemetry(t, p.RemoteWriteURL(), a, nil)
	if got := export(t, otlp, probe("good", "nvidia.gpu.throttled"), a.dialOptions(a.token)...); got != codes.OK {
		t.Fatalf("the agents' token: %s", got)
	}
	const refused = 12
	for i := range refused {
		token := randomToken(t)
		if i%4 == 0 {
			token = "" // no token at all
		}
		if got := export(t, otlp, probe("stale", "nvidia.gpu.throttled"), a.dialOptions(token)...); got != codes.Unauthenticated {
			t.Errorf("request %d: %s, want Unauthenticated", i, got)
		}
	}
	if got := selfMetric(t, telemetry, "otelcol_auth_refusals"); got != refused {
		t.Errorf("otelcol_auth_refusals = %v, want %d", got, refused)
	}
	out := gw.Output()
	if n := strings.Count(out, "Authentication refused"); n != 1 {
		t.Errorf("%d \"Authentication refused\" lines, want 1 (the rest summed once a minute):\n%s", n, out)
	}
	if !strings.Contains(out, `"client": "127.0.0.1"`) {
		t.Errorf("the refusal's log line does not name the client:\n%s", out)
	}
}

// TestGatewayDropsPointsFarFromNow: a point timestamped far ahead can make a backend
// refuse every later sample of its series (out of order; the issue saw it with 30 minutes
// against Prometheus), and the exporter then drops whole batches, other agents' data with
// them. The gateway drops (and counts) points more than a minute ahead or an hour back
// before they reach the exporter: the same series' current points and a second agent's
// keep arriving. (This testbed's Prometheus 3 itself refuses the far point without
// stalling the series, so the count is what fails without the filter.)
func TestGatewayDropsPointsFarFromNow(t *testing.T) {
	p := prom.Start(t, "")
	a := newGatewayAuth(t)
	otlp, telemetry, _ := startGatewayWithTelemetry(t, p.RemoteWriteURL(), a, nil, "processors::batch::timeout=1s")
	at := func(host string, ts time.Time) pmetric.Metrics {
		md := probe(host, "nvidia.gpu.throttled")
		md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).SetTimestamp(pcommon.NewTimestampFromTime(ts))
		return md
	}
	for _, md := range []pmetric.Metrics{at("skewed", time.Now().Add(2*time.Hour)), at("skewed", time.Now().Add(-2*time.Hour))} {
		if got := export(t, otlp, md, a.dialOptions(a.token)...); got != codes.OK {
			t.Fatalf("export: %s", got)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, host := range []string{"skewed", "other-agent"} {
			if got := export(t, otlp, at(host, time.Now()), a.dialOptions(a.token)...); got != codes.OK {
				t.Fatalf("export: %s", got)
			}
		}
		// Had the point 2 hours ahead been stored, every current sample of the same
		// series would be refused as out of order: "skewed" would stay at 0.
		got, err := p.Query(`count_over_time(nvidia_gpu_throttled[5m])`)
		if err == nil {
			counts := map[string]float64{}
			for _, s := range got {
				counts[s.Labels["host_name"]] = s.Value
			}
			if counts["skewed"] >= 3 && counts["other-agent"] >= 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("samples stored in the last 5 minutes: %v, want the skewed agent's current ones and the other agent's", counts)
			}
		}
		time.Sleep(time.Second)
	}
	if got := selfMetric(t, telemetry, "otelcol_processor_filter_datapoints_filtered"); got < 2 {
		t.Errorf("otelcol_processor_filter_datapoints_filtered = %v, want the two points far from now counted", got)
	}
}
