package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulator"
)

// SimulatedSource scrapes simulated GPUs on demand, at whatever time `now` says: the
// receiver's production code path on a deterministic simulated machine. It exists for
// the tests of downstream components (gpu_enrich, the testbed), which need the receiver's
// exact output over simulated minutes without waiting for them.
type SimulatedSource struct {
	scraper *gpuScraper
	sim     *simulator.Simulator
}

// NewSimulatedSource starts a scraper over a simulated system. cfg may be nil for the
// defaults; its backend settings are replaced by system, scenario and seed.
func NewSimulatedSource(cfg *Config, set receiver.Settings, system, scenario string, seed int64, now func() time.Time) (*SimulatedSource, error) {
	if cfg == nil {
		cfg = createDefaultConfig().(*Config)
	}
	c := *cfg
	c.Backend = BackendSimulated
	c.Simulated = SimulatedConfig{System: system, Scenario: scenario, Seed: seed}
	sim, err := simulator.New(simulator.Options{System: system, Scenario: scenario, Seed: seed, Now: now})
	if err != nil {
		return nil, err
	}
	s := newGPUScraper(&c, set, sim, now)
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		return nil, err
	}
	return &SimulatedSource{scraper: s, sim: sim}, nil
}

// Scrape returns one scrape at the current simulated time (partial errors, e.g. of a lost
// GPU, are returned with the metrics).
func (s *SimulatedSource) Scrape() (pmetric.Metrics, error) {
	return s.scraper.scrape(context.Background())
}

// UUIDs are the simulated GPUs' UUIDs by index.
func (s *SimulatedSource) UUIDs() []string {
	out := make([]string, len(s.scraper.devices))
	for i, d := range s.scraper.devices {
		out[i] = d.uuid
	}
	return out
}

// MIGUUIDs are the UUIDs of the simulated MIG instances (scenario "mig"), by GPU index.
func (s *SimulatedSource) MIGUUIDs() map[int][]string {
	out := map[int][]string{}
	for i, d := range s.sim.MIGDevices() {
		out[i] = d
	}
	return out
}

// Shutdown stops the scraper.
func (s *SimulatedSource) Shutdown() error {
	return s.scraper.shutdown(context.Background())
}
