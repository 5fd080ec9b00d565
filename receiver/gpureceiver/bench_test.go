package gpureceiver

import (
	"context"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/stretchr/testify/require"
)

// BenchmarkScrape8GPUs measures one full scrape of a DGX H100 (eight GPUs) with the
// default configuration, and reports the NVML calls it makes per GPU (counted by the
// simulator) and the series per GPU it sends (the GPU's own, without its processes and MIG
// instances).
func BenchmarkScrape8GPUs(b *testing.B) {
	for _, scenario := range []string{"steady-training", "shared-gpu", "mig"} {
		b.Run(scenario, func(b *testing.B) { benchScrape(b, testConfig(), scenario) })
	}
}

// BenchmarkScrape8GPUsEverySecond is the default configuration collecting every second,
// where the steady series (steady.go) are sent when they change or every 10 s: series/gpu
// is then the points a GPU sends per scrape, on average.
func BenchmarkScrape8GPUsEverySecond(b *testing.B) {
	for name, steady := range map[string]time.Duration{"steady-held": 10 * time.Second, "every-collection": 0} {
		b.Run(name, func(b *testing.B) {
			cfg := testConfig()
			cfg.CollectionInterval, cfg.SteadySeriesInterval = time.Second, steady
			benchScrape(b, cfg, "shared-gpu")
		})
	}
}

// BenchmarkScrape8GPUsFull is the same with the full overlay (every metric and attribute).
func BenchmarkScrape8GPUsFull(b *testing.B) {
	for _, scenario := range []string{"steady-training", "mig"} {
		b.Run(scenario, func(b *testing.B) { benchScrape(b, fullTestConfig(b), scenario) })
	}
}

func benchScrape(b *testing.B, cfg *Config, scenario string) {
	clock := newFakeClock()
	sim := newSimB(b, "dgxh100", scenario, clock)
	s := newGPUScraperB(b, cfg, sim, clock)
	defer func() { _ = s.shutdown(context.Background()) }()
	every := cfg.CollectionInterval
	for range 2 { // prime interval state and caches
		clock.Step(every)
		_, _ = s.scrape(context.Background())
	}

	before := sim.TotalCalls() - sim.Calls()["EventSetWait"]
	series, gpus := 0, 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		clock.Step(every)
		md, err := s.scrape(context.Background())
		require.NoError(b, err)
		b.StopTimer()
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			if resourceKind(rm.Resource().Attributes()) == "gpu" {
				series += pdatawalk.Total(pdatawalk.SeriesPerMetric(rm))
				gpus++
			}
		}
		b.StartTimer()
	}
	b.StopTimer()
	calls := sim.TotalCalls() - sim.Calls()["EventSetWait"] - before
	b.ReportMetric(float64(calls)/float64(b.N)/8, "nvml-calls/gpu/scrape")
	b.ReportMetric(float64(series)/float64(max(1, gpus)), "series/gpu")
}
