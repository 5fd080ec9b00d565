package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
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
		inHost, err := pidNamespaceOf(cfg)()
		if err != nil {
			return nil, fmt.Errorf("simulated.pid_namespace is auto: %w", err)
		}
		ns := gpusim.PIDNamespaceContainer
		if inHost {
			ns = gpusim.PIDNamespaceHost
		}
		return gpusim.New(gpusim.Options{
			System:   cfg.Simulated.System,
			Scenario: cfg.Simulated.Scenario,
			Seed:     cfg.Simulated.Seed,
			Now:      now,

			NVMLMissingFor: cfg.Simulated.NVMLMissingFor,
			Driver:         cfg.Simulated.DriverVersion,
			PIDNamespace:   ns,
			NoMIGMonitor:   !cfg.Simulated.MIGMonitor,
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
		Simulated: SimulatedConfig{System: "dgxh100", Scenario: "steady-training", Seed: 1, PIDNamespace: pidNamespaceAuto, MIGMonitor: true},
		Profiling: ProfilingConfig{Activities: slices.Clone(defaultActivities)},
		Processes: ProcessesConfig{Engines: slices.Clone(defaultProcessEngines)},
		// Sub-10 s collection intervals send what changes fast at full rate and the steady
		// series at the shipped default's 10 s, a quarter of the samples at 1 s.
		SteadySeriesInterval: gpuschema.SteadyResendMax,
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
	sc, err := NewScraper(cfg, set, lib, now)
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&cfg.ControllerConfig, set, next, scraperhelper.AddMetricsScraper(metadata.Type, sc))
}

// NewScraper returns the receiver's scraper over lib: what the factory's receiver runs
// every collection interval, for callers that drive scrapes themselves on a clock of their
// own (tests of downstream components over simulated time, benchmarks). cfg nil means the
// default configuration; its backend settings are not used. Start it before the first
// scrape and shut it down after the last.
func NewScraper(cfg *Config, set receiver.Settings, lib nvml.Interface, now func() time.Time) (scraper.Metrics, error) {
	if cfg == nil {
		cfg = createDefaultConfig().(*Config)
	}
	s := newGPUScraper(cfg, set, lib, now)
	return scraper.NewMetrics(s.scrape, scraper.WithStart(s.start), scraper.WithShutdown(s.shutdown))
}
