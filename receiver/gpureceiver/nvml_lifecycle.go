package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// The NVML session over the receiver's life: initialised at start and retried with
// back-off while it fails (no other NVML call is made then), re-initialised when a lost
// GPU may have come back, and the XID watcher and GPM samples kept in step with it.

// rediscoverAfter is how long a GPU must be lost before NVML is re-initialised to find it
// again (handles are not revalidated by the driver), and the least time between two
// re-initialisations.
const rediscoverAfter = time.Minute

// startWatchers starts what runs beside the scrapes once GPUs are known: the XID stream.
func (s *gpuScraper) startWatchers() {
	lib := s.session.Lib()
	if lib == nil || !s.cfg.Metrics.NvidiaGpuXidErrors.Enabled && !s.cfg.Metrics.HwStatus.Enabled {
		return
	}
	old := s.xids
	s.xids = startXIDWatcher(lib, s.devices, s.logger, s.now, s.xidWait)
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
