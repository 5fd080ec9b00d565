package gpuenrichprocessor

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
)

// BenchmarkProcessBatch measures gpu_enrich over one batch: a DGX H100's scrape (8 GPUs,
// their processes) attributed through a kubelet snapshot, with every derived signal on,
// once the derived signals' windows are full (15 minutes of batches, as on a node that
// has run that long): at the shipped 10 s and at 1 s collections.
func BenchmarkProcessBatch(b *testing.B) {
	for _, c := range []struct {
		name     string
		scenario string
		interval time.Duration
	}{
		{"steady-training", "steady-training", 10 * time.Second},
		{"shared-gpu", "shared-gpu", 10 * time.Second},
		{"shared-gpu-1s", "shared-gpu", time.Second},
	} {
		b.Run(c.name, func(b *testing.B) {
			clock := newFakeClock()
			src, err := newSimulatedSource("dgxh100", c.scenario, clock.Now)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = src.Shutdown() }()
			cfg := testConfig()
			shipped := createDefaultConfig().(*Config)
			cfg.Idle.Window, cfg.Leak.Window = shipped.Idle.Window, shipped.Leak.Window
			p := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), clock.Now, sharedSources(src.UUIDs(), clock))
			batch := func() {
				clock.Step(c.interval)
				md, _ := src.Scrape()
				if _, err := p.processMetrics(context.Background(), md); err != nil {
					b.Fatal(err)
				}
			}
			for range int(max(cfg.Idle.Window, cfg.Leak.Window) / c.interval) {
				batch()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				clock.Step(c.interval)
				md, _ := src.Scrape()
				b.StartTimer()
				if _, err := p.processMetrics(context.Background(), md); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
