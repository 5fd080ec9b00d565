package gpureceiver

import (
	"context"
	"testing"
	"time"
)

// BenchmarkScrape8GPUs measures one full scrape of a DGX (eight GPUs, all metrics on),
// and reports the NVML calls it makes per GPU, counted by the simulator.
func BenchmarkScrape8GPUs(b *testing.B) {
	for _, scenario := range []string{"steady-training", "shared-gpu", "mig"} {
		b.Run(scenario, func(b *testing.B) {
			clock := newFakeClock()
			sim := newSimB(b, "dgxh100", scenario, clock)
			s := newGPUScraperB(b, sim, clock)
			defer func() { _ = s.shutdown(context.Background()) }()
			clock.Advance(30 * time.Second)
			_, _ = s.scrape(context.Background()) // prime interval state and caches

			before := sim.TotalCalls() - sim.Calls()["EventSetWait"]
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				clock.Advance(10 * time.Second)
				if _, err := s.scrape(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			calls := sim.TotalCalls() - sim.Calls()["EventSetWait"] - before
			b.ReportMetric(float64(calls)/float64(b.N)/8, "nvml-calls/gpu/scrape")
		})
	}
}
