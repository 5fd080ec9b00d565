package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetPowerUsage             = "nvmlDeviceGetPowerUsage"
	callGetEnforcedPowerLimit     = "nvmlDeviceGetEnforcedPowerLimit"
	callGetTotalEnergyConsumption = "nvmlDeviceGetTotalEnergyConsumption"
	milli                         = 1000.0
)

// recordPower reports power draw and limit (NVML: mW) in W, and the energy counter
// (NVML: mJ since driver load) in J.
func (r *deviceRead) recordPower() {
	m := r.metrics()
	if m.HwPower.Enabled && !r.skip(callGetPowerUsage) {
		p, ret := r.dev.handle.GetPowerUsage()
		if r.ok(callGetPowerUsage, ret) {
			r.mb.RecordHwPowerDataPoint(r.now, float64(p)/milli)
		}
	}
	if m.NvidiaGpuPowerLimit.Enabled && !r.skip(callGetEnforcedPowerLimit) {
		l, ret := r.dev.handle.GetEnforcedPowerLimit()
		if r.ok(callGetEnforcedPowerLimit, ret) {
			r.mb.RecordNvidiaGpuPowerLimitDataPoint(r.now, float64(l)/milli, metadata.AttributeNvidiaGpuPowerLimitTypeEnforced)
		}
	}
	if m.HwEnergy.Enabled {
		if e, ok := r.fields.get(nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION); ok {
			r.mb.RecordHwEnergyDataPoint(r.now, e/milli)
		} else if !r.skip(callGetTotalEnergyConsumption) {
			e, ret := r.dev.handle.GetTotalEnergyConsumption()
			if r.ok(callGetTotalEnergyConsumption, ret) {
				r.mb.RecordHwEnergyDataPoint(r.now, float64(e)/milli)
			}
		}
	}
}
