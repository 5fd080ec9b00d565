package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulator"
)

// libraryFactory opens the NVML implementation a config asks for. Nothing is called on it
// here; the scraper initialises it.
type libraryFactory func(cfg *Config, now func() time.Time) (nvml.Interface, error)

// openLibrary is the production libraryFactory.
func openLibrary(cfg *Config, now func() time.Time) (nvml.Interface, error) {
	switch cfg.Backend {
	case BackendNVML:
		var opts []nvml.LibraryOption
		if cfg.NVML.LibraryPath != "" {
			opts = append(opts, nvml.WithLibraryPath(cfg.NVML.LibraryPath))
		}
		return nvml.New(opts...), nil
	case BackendSimulated:
		return simulator.New(simulator.Options{
			System:   cfg.Simulated.System,
			Scenario: cfg.Simulated.Scenario,
			Seed:     cfg.Simulated.Seed,
			Now:      now,

			NVMLMissingFor: cfg.Simulated.NVMLMissingFor,
		})
	}
	return nil, fmt.Errorf("unknown backend %q", cfg.Backend)
}

// NewFactory creates the `gpu` receiver factory.
func NewFactory() receiver.Factory {
	return newFactory(openLibrary, time.Now)
}

// newFactory lets tests inject the NVML implementation and the clock.
func newFactory(open libraryFactory, now func() time.Time) receiver.Factory {
	return receiver.NewFactory(
		metadata.Type,
		createDefaultConfig,
		receiver.WithMetrics(func(ctx context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
			return createMetricsReceiver(ctx, set, cfg, next, open, now)
		}, metadata.MetricsStability),
	)
}

func createDefaultConfig() component.Config {
	cc := scraperhelper.NewDefaultControllerConfig()
	cc.CollectionInterval = 10 * time.Second
	return &Config{
		ControllerConfig:     cc,
		MetricsBuilderConfig: metadata.DefaultMetricsBuilderConfig(),
		Backend:              BackendNVML,
		NVML: NVMLConfig{
			InitRetry: InitRetryConfig{InitialInterval: 5 * time.Second, MaxInterval: 5 * time.Minute},
		},
		Simulated: SimulatedConfig{System: "dgxh100", Scenario: "steady-training", Seed: 1},
	}
}

func createMetricsReceiver(_ context.Context, set receiver.Settings, baseCfg component.Config, next consumer.Metrics, open libraryFactory, now func() time.Time) (receiver.Metrics, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errors.New("gpu receiver: wrong config type")
	}
	lib, err := open(cfg, now)
	if err != nil {
		return nil, err
	}
	s := newGPUScraper(cfg, set, lib, now)
	sc, err := scraper.NewMetrics(s.scrape, scraper.WithStart(s.start), scraper.WithShutdown(s.shutdown))
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&cfg.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, sc))
}
