package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"slices"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// Discovery: which GPUs there are, who each one is (read once), and the facts about it
// that do not change while the driver runs.

// discoverDevices enumerates the GPUs and reads their identity. Devices that cannot be
// identified are skipped with a warning. A GPU known before that is not found now (lost,
// fell off the bus) is kept, without a handle, so that it keeps reporting hw.status failed.
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
	s.learnDriver(driver)
	nvmlVersion := ""
	if s.cfg.ResourceAttributes.NvidiaNvmlVersion.Enabled {
		if v, ret := lib.SystemGetNVMLVersion(); ret == nvml.SUCCESS {
			nvmlVersion = v
		}
	}
	var devices []*gpuDevice
	found := map[string]bool{}
	for i := 0; i < count; i++ {
		d, err := s.identify(lib, i, driver, nvmlVersion)
		if err != nil {
			s.logger.Warn("Cannot identify GPU; it is skipped until the next discovery", zap.Int("index", i), zap.Error(err))
			continue
		}
		if !s.included(d) {
			continue
		}
		found[d.uuid] = true
		devices = append(devices, d)
	}
	for _, old := range s.devices {
		if !found[old.uuid] && s.included(old) {
			old.handle = nil
			old.gone = true
			devices = append(devices, old)
		}
	}
	s.devices = devices
	s.logger.Info("GPUs discovered", zap.Int("count", len(found)), zap.String("driver_version", driver))
}

func (s *gpuScraper) identify(lib nvml.Interface, i int, driver, nvmlVersion string) (*gpuDevice, error) {
	h, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		return nil, nvmlclient.NewError("nvmlDeviceGetHandleByIndex", ret)
	}
	uuid, ret := h.GetUUID()
	if ret != nvml.SUCCESS {
		return nil, nvmlclient.NewError("nvmlDeviceGetUUID", ret)
	}
	d := &gpuDevice{
		handle:       h,
		index:        i,
		minor:        -1,
		uuid:         uuid,
		driver:       driver,
		lastSampleTS: map[nvml.SamplingType]uint64{},
		unsupported:  map[string]bool{},
		callErrors:   map[callError]int64{},
		steadySent:   map[steadyKey]steadyPoint{},
	}
	if name, ret := h.GetName(); ret == nvml.SUCCESS {
		d.model = name
	}
	if pci, ret := h.GetPciInfo(); ret == nvml.SUCCESS {
		d.busID = cString(pci.BusId[:])
	}
	if minor, ret := h.GetMinorNumber(); ret == nvml.SUCCESS {
		d.minor = minor
	}
	d.inventory = s.readInventory(h)
	d.inventory.nvmlVersion = nvmlVersion
	d.resource = identityBuilder(s.mb, s.hostName, d).Emit()
	d.static = s.readStaticFacts(h)
	d.fieldRequest = newFieldRequest(&s.cfg.Metrics, d.static.nvlinks, d.static.nvlink5)
	d.fieldValues = newFieldValues(d.fieldRequest, d.static.nvlinks)
	return d, nil
}

// brandNames are NVML's brand types as nvidia-smi names them ("Product Brand").
var brandNames = map[nvml.BrandType]string{
	nvml.BRAND_QUADRO: "Quadro", nvml.BRAND_TESLA: "Tesla", nvml.BRAND_NVS: "NVS", nvml.BRAND_GRID: "GRID",
	nvml.BRAND_GEFORCE: "GeForce", nvml.BRAND_TITAN: "Titan", nvml.BRAND_NVIDIA_VAPPS: "NVIDIA Virtual Applications",
	nvml.BRAND_NVIDIA_VPC: "NVIDIA Virtual PC", nvml.BRAND_NVIDIA_VCS: "NVIDIA Virtual Compute Server",
	nvml.BRAND_NVIDIA_VWS: "NVIDIA RTX Virtual Workstation", nvml.BRAND_NVIDIA_CLOUD_GAMING: "NVIDIA Cloud Gaming",
	nvml.BRAND_QUADRO_RTX: "Quadro RTX", nvml.BRAND_NVIDIA_RTX: "NVIDIA RTX", nvml.BRAND_NVIDIA: "NVIDIA",
	nvml.BRAND_GEFORCE_RTX: "GeForce RTX", nvml.BRAND_TITAN_RTX: "Titan RTX",
}

// readInventory reads the inventory attributes that are on; what the driver cannot tell
// stays empty (and the attribute absent).
func (s *gpuScraper) readInventory(h nvml.Device) inventory {
	ra := &s.cfg.ResourceAttributes
	var inv inventory
	str := func(on bool, read func() (string, nvml.Return)) string {
		if !on {
			return ""
		}
		if v, ret := read(); ret == nvml.SUCCESS {
			return strings.TrimSpace(v)
		}
		return ""
	}
	inforom := func(obj nvml.InforomObject) func() (string, nvml.Return) {
		return func() (string, nvml.Return) { return h.GetInforomVersion(obj) }
	}
	if ra.NvidiaGpuBrand.Enabled {
		if b, ret := h.GetBrand(); ret == nvml.SUCCESS {
			if name, ok := brandNames[b]; ok {
				inv.brand = name
			}
		}
	}
	inv.serial = str(ra.NvidiaGpuSerial.Enabled, h.GetSerial)
	inv.vbios = str(ra.NvidiaGpuVbiosVersion.Enabled, h.GetVbiosVersion)
	inv.inforomImage = str(ra.NvidiaGpuInforomImageVersion.Enabled, h.GetInforomImageVersion)
	inv.inforomOEM = str(ra.NvidiaGpuInforomOemVersion.Enabled, inforom(nvml.INFOROM_OEM))
	inv.inforomECC = str(ra.NvidiaGpuInforomEccVersion.Enabled, inforom(nvml.INFOROM_ECC))
	inv.inforomPower = str(ra.NvidiaGpuInforomPowerVersion.Enabled, inforom(nvml.INFOROM_POWER))
	return inv
}

// readStaticFacts reads what does not change while the driver runs, for the metrics
// that are on. Every failure just leaves the fact out.
func (s *gpuScraper) readStaticFacts(h nvml.Device) staticFacts {
	m := &s.cfg.Metrics
	var st staticFacts
	if m.NvidiaGpuPowerLimitBoard.Enabled {
		if v, ret := h.GetPowerManagementDefaultLimit(); ret == nvml.SUCCESS {
			st.powerDefaultMW = v
		}
		if lo, hi, ret := h.GetPowerManagementLimitConstraints(); ret == nvml.SUCCESS {
			st.powerMinMW, st.powerMaxMW = lo, hi
		}
	}
	if m.HwTemperatureLimit.Enabled {
		for i, l := range temperatureLimits {
			if v, ret := h.GetTemperatureThreshold(l.threshold); ret == nvml.SUCCESS {
				st.tempLimitsC[i] = v
			}
		}
	}
	if m.NvidiaGpuClockFrequencyMax.Enabled {
		if v, ret := h.GetMaxClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
			st.maxSMClockMHz = v
		}
		if v, ret := h.GetMaxClockInfo(nvml.CLOCK_MEM); ret == nvml.SUCCESS {
			st.maxMemClockMHz = v
		}
	}
	if m.NvidiaGpuPcieLinkGenerationMax.Enabled {
		if v, ret := h.GetMaxPcieLinkGeneration(); ret == nvml.SUCCESS {
			st.pcieMaxGen = v
		}
	}
	if m.NvidiaGpuPcieLinkWidthMax.Enabled {
		if v, ret := h.GetMaxPcieLinkWidth(); ret == nvml.SUCCESS {
			st.pcieMaxWidth = v
		}
	}
	if m.NvidiaGpuNvlinkIo.Enabled || m.NvidiaGpuNvlinkErrors.Enabled || m.NvidiaGpuNvlinkState.Enabled {
		links := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_LINK_COUNT}}
		if h.GetFieldValues(links) == nvml.SUCCESS && nvml.Return(links[0].NvmlReturn) == nvml.SUCCESS {
			if n, ok := decodeFieldValue(links[0]); ok && n > 0 && n <= nvml.NVLINK_MAX_LINKS {
				st.nvlinks = int(n)
			}
		}
		st.nvlink5 = st.nvlinks > 0 && hasNVLink5Counters(h)
	}
	if s.gpmUsable() {
		st.gpmSupported = s.gpm.Supported(h)
	}
	return st
}

// hasNVLink5Counters tells NVLink5 (Blackwell) from earlier generations once: its first
// link answers the data-link CRC counter NOT_SUPPORTED and the symbol-error counter.
func hasNVLink5Counters(h nvml.Device) bool {
	probe := []nvml.FieldValue{{FieldId: nvml.FI_DEV_NVLINK_ERROR_DL_CRC}, {FieldId: nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS}}
	if h.GetFieldValues(probe) != nvml.SUCCESS {
		return false
	}
	return nvml.Return(probe[0].NvmlReturn) == nvml.ERROR_NOT_SUPPORTED && nvml.Return(probe[1].NvmlReturn) == nvml.SUCCESS
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
