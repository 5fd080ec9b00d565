package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// gpuScraper reads every GPU once per collection interval.
type gpuScraper struct {
	cfg     *Config
	logger  *zap.Logger
	now     func() time.Time
	session *nvmlclient.Session
	mb      *metadata.MetricsBuilder

	host           component.Host
	hostName       string
	hostResource   pcommon.Resource
	devices        []*gpuDevice
	xids           *xidWatcher
	gpm            *nvmlGPM
	activities     []gpmActivity
	processEngines engineSelection
	procNames      *processNames
	steady         steadyPolicy
	// reinitDelay and nextReinit are the back-off of re-initialising NVML while no GPU
	// answers (maybeRediscover).
	reinitDelay time.Duration
	nextReinit  time.Time
	// nvmlDown remembers the last reported state so that logs and component status change
	// only when the state does, not on every scrape.
	nvmlDown     bool
	lastInitFail nvml.Return
	// xidWait is how long the XID watcher blocks inside NVML per wait, and so how long
	// shutdown may wait for it (defaultXIDWait).
	xidWait time.Duration
	// inHostPIDNamespace tells whether the agent runs in the host's PID namespace (it
	// decides what the driver lists; driver_facts.go).
	inHostPIDNamespace func() (bool, error)
	// driverFacts is what the driver release means for reading it (driver_facts.go).
	driverFacts driverFacts
}

func newGPUScraper(cfg *Config, set receiver.Settings, lib nvml.Interface, now func() time.Time) *gpuScraper {
	return &gpuScraper{
		cfg:    cfg,
		logger: set.Logger,
		now:    now,
		session: nvmlclient.NewSession(lib, now, nvmlclient.RetryPolicy{
			Initial: cfg.NVML.InitRetry.InitialInterval,
			Max:     cfg.NVML.InitRetry.MaxInterval,
		}),
		mb:             metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set, metadata.WithStartTime(pcommon.NewTimestampFromTime(now()))),
		gpm:            newNVMLGPM(lib, newGPMRequest(&cfg.Metrics, cfg.Profiling.Activities)),
		activities:     selectedActivities(cfg.Profiling.Activities),
		processEngines: selectedProcessEngines(cfg.Processes.Engines),
		procNames:      newProcessNames(),
		steady:         newSteadyPolicy(cfg),
		xidWait:        defaultXIDWait,

		inHostPIDNamespace: pidNamespaceOf(cfg),
	}
}

// gpmUsable reports whether the driver has the GPM entry points.
func (s *gpuScraper) gpmUsable() bool {
	for _, sym := range gpmSymbols {
		if !s.session.HasSymbol(sym) {
			return false
		}
	}
	return true
}

func (s *gpuScraper) start(_ context.Context, host component.Host) error {
	s.host = host
	s.hostName = s.cfg.HostName
	if s.hostName == "" {
		name, err := os.Hostname()
		if err != nil {
			s.logger.Warn("Cannot read the host name; set host_name in the gpu receiver's config", zap.Error(err))
		}
		s.hostName = name
	}
	rb := s.mb.NewResourceBuilder()
	rb.SetHostName(s.hostName)
	s.hostResource = rb.Emit()
	// A failed Init is not a start failure: the receiver keeps retrying with back-off while
	// the rest of the collector runs.
	s.ensureNVML()
	return nil
}

func (s *gpuScraper) shutdown(context.Context) error {
	s.stopWatchers()
	s.session.Shutdown()
	return nil
}

func (s *gpuScraper) scrape(context.Context) (pmetric.Metrics, error) {
	s.ensureNVML()
	now := pcommon.NewTimestampFromTime(s.now())

	lib := s.session.Lib()
	if lib != nil {
		if len(s.devices) == 0 {
			s.discoverDevices()
			s.startWatchers()
		}
		deps := s.readDeps()
		for _, d := range s.devices {
			r := newDeviceRead(deps, lib, d, now)
			r.recordAll()
		}
		s.procNames.forgetUnseen()
		s.maybeRediscover()
	}
	s.recordReceiverHealth(now, lib != nil)

	// A GPU's failures are reported in its metrics (hw.status, nvidia.nvml.errors) and
	// logged once, never as a scrape error (deviceRead.ok).
	return s.mb.Emit(), nil
}

// readDeps hands a GPU read what it needs of the scraper.
func (s *gpuScraper) readDeps() readDeps {
	return readDeps{
		logger:         s.logger,
		clock:          s.now,
		metrics:        &s.cfg.Metrics,
		mb:             s.mb,
		symbols:        s.session,
		xids:           s.xids,
		gpm:            s.gpm,
		activities:     s.activities,
		processEngines: s.processEngines,
		hostName:       s.hostName,
		procNames:      s.procNames,
		steady:         s.steady,

		migModeAttribute:     s.cfg.ResourceAttributes.NvidiaGpuMigEnabled.Enabled,
		processListUnsafe:    s.driverFacts.processListUnsafe,
		hiddenProcessesCause: s.driverFacts.hiddenProcessesCause,
	}
}

// recordReceiverHealth emits the receiver's own health on a host-level resource, so that
// "NVML is down on this node" reaches the backend even when no GPU can be read.
func (s *gpuScraper) recordReceiverHealth(now pcommon.Timestamp, up bool) {
	available := int64(0)
	if up {
		available = 1
		s.mb.RecordNvidiaGpuCountDataPoint(now, int64(len(s.devices)))
	}
	s.mb.RecordNvidiaNvmlAvailableDataPoint(now, available)
	for ret, n := range s.session.InitFailures() {
		s.mb.RecordNvidiaNvmlInitErrorsDataPoint(now, n, nvmlclient.ReturnName(ret))
	}
	s.mb.EmitForResource(metadata.WithResource(s.hostResource))
}
