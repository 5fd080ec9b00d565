package gpuenrichprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
)

// BenchmarkProcessBatch measures gpu_enrich over one batch: a DGX H100's scrape (8 GPUs,
// their processes) attributed through a kubelet snapshot, with every derived signal on.
func BenchmarkProcessBatch(b *testing.B) {
	for _, scenario := range []string{"steady-training", "shared-gpu"} {
		b.Run(scenario, func(b *testing.B) {
			clock := newFakeClock()
			src, err := newSimulatedSource("dgxh100", scenario, clock.Now)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = src.Shutdown() }()
			p := newProcessor(testConfig(), processortest.NewNopSettings(metadata.Type), clock.Now, sharedSources(src.UUIDs(), clock))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				clock.Step(10 * time.Second)
				md, _ := src.Scrape()
				b.StartTimer()
				if _, err := p.processMetrics(context.Background(), md); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
