package gatewaylimitsprocessor

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// BenchmarkGatewayLimits is the gateway's cost per agent request: one scrape of an 8-GPU
// DGX H100 agent (the gpu receiver's default set, shared-gpu scenario: 350 points; the
// receiver's golden file), alone and with gpu_enrich's output for the same node appended
// (118 more points; gpu_enrich's golden file). Identity from a token's node claim.
//   - known-client: the steady state, the client's series already tracked;
//   - new-client: every request from a client the gateway does not know (all its series
//     new, and the least recently seen client forgotten to make room).
func BenchmarkGatewayLimits(b *testing.B) {
	scrape := func(b *testing.B, withEnrich bool) pmetric.Metrics {
		md, err := golden.ReadMetrics(filepath.Join("..", "..", "receiver", "gpureceiver", "testdata", "golden", "default", "dgxh100-shared-gpu.yaml"))
		require.NoError(b, err)
		if withEnrich {
			enrich, err := golden.ReadMetrics(filepath.Join("..", "gpuenrichprocessor", "testdata", "golden", "shared-gpu.yaml"))
			require.NoError(b, err)
			enrich.ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
		}
		return md
	}
	for _, c := range []struct {
		name       string
		withEnrich bool
		newClients bool
	}{
		{"receiver/known-client", false, false},
		{"receiver+gpu_enrich/known-client", true, false},
		{"receiver/new-client", false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			md := scrape(b, c.withEnrich)
			cfg := createDefaultConfig().(*Config)
			ctxs := []context.Context{node("node-a", "10.0.0.1")}
			if c.newClients {
				cfg.MaxClients = 512
				ctxs = make([]context.Context, 2*cfg.MaxClients)
				for i := range ctxs {
					ctxs[i] = node(fmt.Sprintf("node-%d", i), "10.0.0.1")
				}
			}
			f := newFixture(b, cfg)
			points := md.DataPointCount()
			out, err := f.l.processMetrics(ctxs[0], md)
			require.NoError(b, err)
			require.Equal(b, points, out.DataPointCount(), "an agent's request passes whole")
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := f.l.processMetrics(ctxs[(i+1)%len(ctxs)], md); err != nil {
					b.Fatal(err)
				}
				// Keep the points bucket full, as an agent sending every 10 s finds it.
				f.step(time.Second)
			}
			b.ReportMetric(float64(points), "points/op")
		})
	}
}
