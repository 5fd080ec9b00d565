package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper/scrapererror"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// rediscoverAfter is how long a GPU must be lost before NVML is re-initialised to find it
// again (handles are not revalidated by the driver), and the least time between two
// re-initialisations.
const rediscoverAfter = time.Minute

// gpuScraper reads every GPU once per collection interval.
type gpuScraper struct {
	cfg     *Config
	logger  *zap.Logger
	now     func() time.Time
	session *nvmlclient.Session
	mb      *metadata.MetricsBuilder

	host         component.Host
	hostName     string
	hostResource pcommon.Resource
	devices      []*gpuDevice
	xids         *xidWatcher
	gpm          *nvmlGPM
	lastReinit   time.Time
	// procNames caches process names by PID; procSeen marks the PIDs of this scrape.
	procNames map[uint32]string
	procSeen  map[uint32]bool
	// nvmlDown remembers the last reported state so that logs and component status change
	// only when the state does, not on every scrape.
	nvmlDown     bool
	lastInitFail nvml.Return
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
		mb:        metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set, metadata.WithStartTime(pcommon.NewTimestampFromTime(now()))),
		gpm:       newNVMLGPM(lib),
		procNames: map[uint32]string{},
		procSeen:  map[uint32]bool{},
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

// startWatchers starts what runs beside the scrapes once GPUs are known: the XID stream.
func (s *gpuScraper) startWatchers() {
	lib := s.session.Lib()
	if lib == nil || !s.cfg.Metrics.NvidiaGpuXidErrors.Enabled && !s.cfg.Metrics.HwStatus.Enabled {
		return
	}
	old := s.xids
	s.xids = startXIDWatcher(lib, s.devices, s.logger, s.now)
	if s.xids != nil {
		s.xids.carryCounts(old)
	}
}

// stopWatchers stops the XID goroutine and releases GPM samples; it must run before NVML
// is shut down.
func (s *gpuScraper) stopWatchers() {
	if s.xids != nil {
		s.xids.close()
	}
	s.gpm.Close()
}

// maybeRediscover re-initialises NVML when a GPU has been lost for a while: after a GPU
// falls off the bus and is reset, only a fresh Init finds it again.
func (s *gpuScraper) maybeRediscover() {
	now := s.now()
	if now.Sub(s.lastReinit) < rediscoverAfter {
		return
	}
	lost := false
	for _, d := range s.devices {
		if d.gone && now.Sub(d.goneSince) >= rediscoverAfter {
			lost = true
		}
	}
	if !lost {
		return
	}
	s.lastReinit = now
	s.logger.Info("A GPU has been lost for a while; re-initialising NVML to find it again")
	old := s.xids
	s.stopWatchers()
	s.xids = old // keep the counters; a new watcher takes them over
	s.session.Shutdown()
	s.session.ResetBackoff()
	s.ensureNVML()
}

// ensureNVML initialises NVML when needed and reports state changes once.
func (s *gpuScraper) ensureNVML() {
	outcome, err := s.session.EnsureInitialized()
	switch outcome {
	case nvmlclient.JustInitialized:
		if s.nvmlDown {
			s.logger.Info("NVML is available again")
		}
		s.nvmlDown = false
		s.lastInitFail = nvml.SUCCESS
		s.discoverDevices()
		s.startWatchers()
		s.reportStatus(componentstatus.NewEvent(componentstatus.StatusOK))
	case nvmlclient.Failed:
		ret := nvmlclient.ReturnOf(err)
		if !s.nvmlDown || ret != s.lastInitFail {
			s.logger.Warn("NVML cannot be initialised; GPU metrics are paused and initialisation is retried with back-off",
				zap.String("nvml_error", nvmlclient.ReturnName(ret)), zap.String("backend", s.cfg.Backend),
				zap.String("hint", initFailureHint(ret)))
			s.reportStatus(componentstatus.NewRecoverableErrorEvent(err))
		}
		s.nvmlDown = true
		s.lastInitFail = ret
		s.devices = nil
	}
}

func initFailureHint(ret nvml.Return) string {
	switch ret {
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return "libnvidia-ml.so.1 is not on the library path: install the NVIDIA driver, or run the container with the NVIDIA runtime and NVIDIA_DRIVER_CAPABILITIES=utility, or set nvml.library_path"
	case nvml.ERROR_DRIVER_NOT_LOADED:
		return "the NVIDIA kernel driver is not loaded"
	case nvml.ERROR_NO_PERMISSION:
		return "no permission to open /dev/nvidia*: run with access to the NVIDIA device nodes"
	case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
		return "libnvidia-ml and the kernel driver have different versions: reboot or reload the driver"
	}
	return ""
}

func (s *gpuScraper) reportStatus(ev *componentstatus.Event) {
	if s.host != nil {
		componentstatus.ReportStatus(s.host, ev)
	}
}

func (s *gpuScraper) scrape(context.Context) (pmetric.Metrics, error) {
	s.ensureNVML()
	now := pcommon.NewTimestampFromTime(s.now())

	var errs []error
	failed := 0
	lib := s.session.Lib()
	if lib != nil {
		if len(s.devices) == 0 {
			s.discoverDevices()
			s.startWatchers()
		}
		for _, d := range s.devices {
			r := newDeviceRead(s, lib, d, now)
			r.recordAll()
			// The GPU's own metrics first, then its MIG instances and processes, each
			// on a resource of its own.
			s.mb.EmitForResource(metadata.WithResource(d.resource))
			migs := s.recordMIG(r)
			s.recordProcesses(r, migs)
			if err := r.err(); err != nil {
				errs = append(errs, err)
				failed += r.failed
			}
		}
		s.forgetProcesses()
		s.maybeRediscover()
	}
	s.recordReceiverHealth(now, lib != nil)

	md := s.mb.Emit()
	if len(errs) > 0 {
		return md, scrapererror.NewPartialScrapeError(errors.Join(errs...), failed)
	}
	return md, nil
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
