package gpuenrichprocessor

import (
	"bytes"
	"compress/gzip"
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
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
			var rcfg *gpureceiver.Config // the receiver's defaults
			if c.interval < 10*time.Second {
				rcfg = receiverEverySecond() // which holds back steady series at 1 s
			}
			src, err := newSimulatedSource("dgxh100", c.scenario, clock.Now, rcfg)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = src.Shutdown() }()
			cfg := testConfig()
			shipped := createDefaultConfig().(*Config)
			cfg.Idle.Window, cfg.Leak.Window = shipped.Idle.Window, shipped.Leak.Window
			cfg.SteadySeriesInterval = shipped.SteadySeriesInterval
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

// BenchmarkOTLPRequest is what an OTLP exporter does with gpu_enrich's output for one DGX
// H100 scrape (shared-gpu: 8 GPUs and their processes), with and without the metrics'
// descriptions: marshal the request and gzip it, as otlp_http does towards Prometheus 3.
// It reports the request's bytes before and after gzip.
func BenchmarkOTLPRequest(b *testing.B) {
	for _, c := range []struct {
		name         string
		descriptions bool
	}{{"descriptions", true}, {"no-descriptions", false}} {
		b.Run(c.name, func(b *testing.B) {
			clock := newFakeClock()
			src, err := newSimulatedSource("dgxh100", "shared-gpu", clock.Now, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = src.Shutdown() }()
			cfg := testConfig()
			cfg.Descriptions = c.descriptions
			p := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), clock.Now, sharedSources(src.UUIDs(), clock))
			var req pmetricotlp.ExportRequest
			for range 3 {
				clock.Step(time.Second)
				md, _ := src.Scrape()
				out, err := p.processMetrics(context.Background(), md)
				if err != nil {
					b.Fatal(err)
				}
				req = pmetricotlp.NewExportRequestFromMetrics(out)
			}
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			var raw []byte
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				raw, err = req.MarshalProto()
				if err != nil {
					b.Fatal(err)
				}
				buf.Reset()
				zw.Reset(&buf)
				_, _ = zw.Write(raw)
				_ = zw.Close()
			}
			b.ReportMetric(float64(len(raw)), "request-bytes")
			b.ReportMetric(float64(buf.Len()), "gzip-bytes")
		})
	}
}
