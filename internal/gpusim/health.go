package gpusim

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// Clocks, links, limits and states: the slow-moving facts of a simulated GPU.

// GetCurrentClocksEventReasons returns the clock-event (throttle) reason bit mask.
func (d *Device) GetCurrentClocksEventReasons() (uint64, nvml.Return) {
	_, r, ret := d.read("DeviceGetCurrentClocksEventReasons")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return r.clockEvents, nvml.SUCCESS
}

// GetCurrentClocksThrottleReasons is the pre-R535 name of the same mask.
func (d *Device) GetCurrentClocksThrottleReasons() (uint64, nvml.Return) {
	_, r, ret := d.read("DeviceGetCurrentClocksThrottleReasons")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return r.clockEvents, nvml.SUCCESS
}

// pcieGeneration of each system's GPUs (A100, L4: Gen4; H100/H200, B200: Gen5).
func (d *Device) pcieGeneration() int {
	if d.sim.system == "dgxa100" || d.sim.system == "l4" {
		return 4
	}
	return 5
}

// GetCurrPcieLinkGeneration returns the current PCIe generation.
func (d *Device) GetCurrPcieLinkGeneration() (int, nvml.Return) {
	if ret := d.ret("DeviceGetCurrPcieLinkGeneration"); ret != nvml.SUCCESS {
		return 0, ret
	}
	return d.pcieGeneration(), nvml.SUCCESS
}

// GetMaxPcieLinkGeneration returns the highest PCIe generation.
func (d *Device) GetMaxPcieLinkGeneration() (int, nvml.Return) {
	if ret := d.ret("DeviceGetMaxPcieLinkGeneration"); ret != nvml.SUCCESS {
		return 0, ret
	}
	return d.pcieGeneration(), nvml.SUCCESS
}

// GetCurrPcieLinkWidth returns the current lane count.
func (d *Device) GetCurrPcieLinkWidth() (int, nvml.Return) {
	if ret := d.ret("DeviceGetCurrPcieLinkWidth"); ret != nvml.SUCCESS {
		return 0, ret
	}
	return 16, nvml.SUCCESS
}

// GetMaxPcieLinkWidth returns the maximum lane count.
func (d *Device) GetMaxPcieLinkWidth() (int, nvml.Return) {
	if ret := d.ret("DeviceGetMaxPcieLinkWidth"); ret != nvml.SUCCESS {
		return 0, ret
	}
	return 16, nvml.SUCCESS
}

// GetPowerManagementDefaultLimit returns the board's default power limit in mW.
func (d *Device) GetPowerManagementDefaultLimit() (uint32, nvml.Return) {
	if ret := d.ret("DeviceGetPowerManagementDefaultLimit"); ret != nvml.SUCCESS {
		return 0, ret
	}
	return uint32(d.sim.machine.sys.powerLimitW * 1000), nvml.SUCCESS
}

// GetPowerManagementLimitConstraints returns the settable power-limit range in mW.
func (d *Device) GetPowerManagementLimitConstraints() (uint32, uint32, nvml.Return) {
	if ret := d.ret("DeviceGetPowerManagementLimitConstraints"); ret != nvml.SUCCESS {
		return 0, 0, ret
	}
	limit := d.sim.machine.sys.powerLimitW * 1000
	return uint32(limit * 0.29), uint32(limit), nvml.SUCCESS
}

// GetTemperatureThreshold returns the GPU's temperature thresholds in °C.
func (d *Device) GetTemperatureThreshold(kind nvml.TemperatureThresholds) (uint32, nvml.Return) {
	if ret := d.ret("DeviceGetTemperatureThreshold"); ret != nvml.SUCCESS {
		return 0, ret
	}
	switch kind {
	case nvml.TEMPERATURE_THRESHOLD_SHUTDOWN:
		return 92, nvml.SUCCESS
	case nvml.TEMPERATURE_THRESHOLD_SLOWDOWN:
		return 89, nvml.SUCCESS
	case nvml.TEMPERATURE_THRESHOLD_GPU_MAX:
		return 87, nvml.SUCCESS
	case nvml.TEMPERATURE_THRESHOLD_MEM_MAX:
		return 95, nvml.SUCCESS
	}
	return 0, nvml.ERROR_NOT_SUPPORTED
}

// GetPerformanceState returns the current P-state.
func (d *Device) GetPerformanceState() (nvml.Pstates, nvml.Return) {
	_, r, ret := d.read("DeviceGetPerformanceState")
	if ret != nvml.SUCCESS {
		return 0, ret
	}
	return nvml.Pstates(r.pstate), nvml.SUCCESS
}

// GetSupportedEventTypes: the simulated driver can report XIDs.
func (d *Device) GetSupportedEventTypes() (uint64, nvml.Return) {
	if ret := d.ret("DeviceGetSupportedEventTypes"); ret != nvml.SUCCESS {
		return 0, ret
	}
	return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError, nvml.SUCCESS
}

// RegisterEvents adds the GPU to a simulated event set.
func (d *Device) RegisterEvents(types uint64, set nvml.EventSet) nvml.Return {
	if ret := d.ret("DeviceRegisterEvents"); ret != nvml.SUCCESS {
		return ret
	}
	es, ok := set.(*EventSet)
	if !ok {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	es.register(d, types)
	return nvml.SUCCESS
}

func roundU32(x float64) uint32 { return uint32(math.Round(x)) }
