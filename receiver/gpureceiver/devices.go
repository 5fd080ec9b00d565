package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// gpuDevice is one discovered GPU: its handle, its identity (read once) and the state
// that must survive between scrapes.
type gpuDevice struct {
	handle   nvml.Device
	index    int
	uuid     string
	resource pcommon.Resource

	// lastSampleTS is the newest utilization sample seen, per sampling type, so that each
	// scrape averages only the samples taken since the previous one.
	lastSampleTS map[nvml.SamplingType]uint64
	// unsupported remembers calls the device answered NOT_SUPPORTED, so they are not
	// repeated every scrape.
	unsupported map[string]bool
	// warned remembers the last unexpected error logged per call (rate limiting).
	warned map[string]nvml.Return
	// gone is set while the device answers "GPU is lost"; logged once per state change.
	gone bool
}

// discoverDevices enumerates the GPUs and reads their identity. Devices that cannot be
// identified are skipped with a warning; the next scrape tries again if none was found.
func (s *gpuScraper) discoverDevices() {
	lib := s.session.Lib()
	if lib == nil {
		return
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		s.logger.Warn("Cannot count GPUs", zap.String("nvml_error", nvmlclient.ReturnName(ret)))
		return
	}
	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		driver = ""
	}
	var devices []*gpuDevice
	for i := 0; i < count; i++ {
		d, err := s.identify(lib, i, driver)
		if err != nil {
			s.logger.Warn("Cannot identify GPU; it is skipped until the next discovery", zap.Int("index", i), zap.Error(err))
			continue
		}
		if !s.included(d) {
			continue
		}
		devices = append(devices, d)
	}
	s.devices = devices
	s.logger.Info("GPUs discovered", zap.Int("count", len(devices)), zap.String("driver_version", driver))
}

func (s *gpuScraper) identify(lib nvml.Interface, i int, driver string) (*gpuDevice, error) {
	h, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, nvmlclient.NewError("nvmlDeviceGetHandleByIndex", ret)
	}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS {
		return nil, nvmlclient.NewError("nvmlDeviceGetUUID", ret)
	}
	name, ret := h.GetName()
	if ret != nvml.SUCCESS {
		name = ""
	}
	busID := ""
	if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
		busID = cString(pci.BusId[:])
	}
	rb := s.mb.NewResourceBuilder()
	rb.SetHostName(s.hostName)
	rb.SetHwID(uuid)
	rb.SetHwType("gpu")
	rb.SetHwVendor("NVIDIA")
	rb.SetHwModel(name)
	rb.SetHwDriverVersion(driver)
	rb.SetNvidiaGpuIndex(int64(i))
	rb.SetNvidiaGpuPciBusID(busID)
	return &gpuDevice{
		handle:       h,
		index:        i,
		uuid:         uuid,
		resource:     rb.Emit(),
		lastSampleTS: map[nvml.SamplingType]uint64{},
		unsupported:  map[string]bool{},
		warned:       map[string]nvml.Return{},
	}, nil
}

// included applies the include_devices filter (index or UUID).
func (s *gpuScraper) included(d *gpuDevice) bool {
	if len(s.cfg.IncludeDevices) == 0 {
		return true
	}
	return slices.ContainsFunc(s.cfg.IncludeDevices, func(e string) bool {
		return e == strconv.Itoa(d.index) || strings.EqualFold(e, d.uuid)
	})
}

// cString converts a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
