package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// The NVML session over the receiver's life: initialised at start and retried with
// back-off while it fails (no other NVML call is made then), lost GPUs looked up again by
// UUID (re-initialised only when no GPU answers at all), and the XID watcher and GPM
// samples kept in step with it.

// rediscoverAfter is how long a GPU must be lost before it is looked up again, and the
// first back-off step; each failed look-up doubles the wait up to rediscoverMax.
const (
	rediscoverAfter = time.Minute
	rediscoverMax   = 32 * time.Minute
)

// startWatchers starts what runs beside the scrapes once GPUs are known: the XID stream.
func (s *gpuScraper) startWatchers() {
	lib := s.session.Lib()
	if lib == nil || !s.cfg.Metrics.NvidiaGpuXidErrors.Enabled && !s.cfg.Metrics.HwStatus.Enabled {
		return
	}
	old := s.xids
	fresh := startXIDWatcher(lib, s.devices, s.logger, s.now, s.xidWait)
	if fresh == nil {
		// No GPU to watch now (all lost): the stopped watcher keeps the counters until a
		// later one takes them over.
		return
	}
	fresh.carryCounts(old)
	s.xids = fresh
}

// stopWatchers stops the XID goroutine and releases GPM samples; it must run before NVML
// is shut down.
func (s *gpuScraper) stopWatchers() {
	if s.xids != nil {
		s.xids.close()
	}
	s.gpm.Close()
}

// maybeRediscover looks for GPUs that have been lost (fallen off the bus, XID 79) for a
// while, each with its own back-off (1, 2, 4 … 32 minutes).
//
// A lost GPU is looked up by its UUID: if it answers again (it was reset), it is read from
// the next scrape on, and nothing else is touched. NVML is re-initialised only when no GPU
// answers at all (a driver reload leaves every handle stale), with the same back-off:
// re-initialising while healthy GPUs answer would blank them for a collection, end their
// GPM interval and drop the XIDs raised while the event set is rebuilt.
func (s *gpuScraper) maybeRediscover() {
	now := s.now()
	lib := s.session.Lib()
	answering := 0
	for _, d := range s.devices {
		if !d.gone {
			answering++
		}
	}
	if answering == 0 && len(s.devices) > 0 {
		if now.Before(s.nextReinit) || !allLostFor(s.devices, now, rediscoverAfter) {
			return
		}
		s.reinitDelay = nextDelay(s.reinitDelay)
		s.nextReinit = now.Add(s.reinitDelay)
		s.logger.Info("No GPU answers; re-initialising NVML to find them again",
			zap.Duration("next_attempt_in", s.reinitDelay))
		old := s.xids
		s.stopWatchers()
		s.xids = old // keep the counters; a new watcher takes them over
		s.session.Shutdown()
		s.session.ResetBackoff()
		s.ensureNVML()
		return
	}
	s.reinitDelay, s.nextReinit = 0, time.Time{}
	for _, d := range s.devices {
		if !d.gone || now.Sub(d.goneSince) < rediscoverAfter || now.Before(d.nextLookup) {
			continue
		}
		if lib != nil && s.lookUpAgain(lib, d) {
			if s.xids != nil {
				s.xids.register(d)
			}
			continue
		}
		d.lookupDelay = nextDelay(d.lookupDelay)
		d.nextLookup = now.Add(d.lookupDelay)
	}
}

// lookUpAgain asks NVML for a lost GPU by its UUID and keeps the handle if the GPU answers
// on it. nvmlDeviceGetHandleByUUID answers GPU_IS_LOST while any GPU is off the bus.
func (s *gpuScraper) lookUpAgain(lib nvml.Interface, d *gpuDevice) bool {
	h, ret := lib.DeviceGetHandleByUUID(d.uuid)
	if ret != nvml.SUCCESS {
		return false
	}
	if uuid, ret := h.GetUUID(); ret != nvml.SUCCESS || uuid != d.uuid {
		return false
	}
	s.logger.Info("A lost GPU answers again", zap.Int("gpu", d.index), zap.String("uuid", d.uuid))
	d.handle = h
	d.lookupDelay, d.nextLookup = 0, time.Time{}
	return true
}

func allLostFor(devices []*gpuDevice, now time.Time, d time.Duration) bool {
	for _, dev := range devices {
		if !dev.gone || now.Sub(dev.goneSince) < d {
			return false
		}
	}
	return true
}

// nextDelay doubles a back-off from rediscoverAfter up to rediscoverMax.
func nextDelay(d time.Duration) time.Duration {
	if d == 0 {
		return rediscoverAfter
	}
	return min(2*d, rediscoverMax)
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
