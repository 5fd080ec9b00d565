package remotewriteexporter

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// goldenScrape is one of the gpu receiver's committed scrapes of a simulated DGX.
func goldenScrape(t testing.TB, set, name string) pmetric.Metrics {
	t.Helper()
	md, err := golden.ReadMetrics(filepath.Join("..", "..", "receiver", "gpureceiver", "testdata", "golden", set, name+".yaml"))
	require.NoError(t, err)
	return md
}

// BenchmarkTranslate measures the translation of one DGX H100 scrape (8 GPUs and their
// processes, the default set) into remote-write series: with label sets remembered (the
// exporter as shipped) and through Prometheus's translator every time.
func BenchmarkTranslate(b *testing.B) {
	md := goldenScrape(b, "default", "dgxh100-shared-gpu")
	for _, tc := range []struct {
		name     string
		remember bool
	}{{"remembered", true}, {"translator-every-time", false}} {
		b.Run(tc.name, func(b *testing.B) {
			tr := newTranslator(testConfig(), time.Now)
			tr.memoize = tc.remember
			var n int
			b.ReportAllocs()
			for b.Loop() {
				batch, _, err := tr.translate(context.Background(), md)
				if err != nil {
					b.Fatal(err)
				}
				n = batch.len()
			}
			b.ReportMetric(float64(n), "series")
		})
	}
}
