package gpuenrichprocessor

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/collector/scraper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// simulatedSource scrapes simulated GPUs on demand, at the test's clock, through the gpu
// receiver's own scraper: the processor's input exactly as the receiver produces it.
type simulatedSource struct {
	sim     *gpusim.Simulator
	scraper scraper.Metrics
}

// newSimulatedSource scrapes with the receiver's configuration rcfg (nil: its defaults).
func newSimulatedSource(system, scenario string, now func() time.Time, rcfg *gpureceiver.Config) (*simulatedSource, error) {
	sim, err := gpusim.New(gpusim.Options{System: system, Scenario: scenario, Seed: 1, Now: now})
	if err != nil {
		return nil, err
	}
	sc, err := gpureceiver.NewScraper(rcfg, receivertest.NewNopSettings(receivertest.NopType), sim, now)
	if err != nil {
		return nil, err
	}
	if err := sc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		return nil, err
	}
	return &simulatedSource{sim: sim, scraper: sc}, nil
}

// Scrape returns one scrape at the clock's time (a lost GPU's partial error comes with
// the metrics).
func (s *simulatedSource) Scrape() (pmetric.Metrics, error) {
	return s.scraper.ScrapeMetrics(context.Background())
}

// UUIDs are the simulated GPUs' UUIDs by index.
func (s *simulatedSource) UUIDs() []string { return s.sim.UUIDs() }

func (s *simulatedSource) Shutdown() error { return s.scraper.Shutdown(context.Background()) }
