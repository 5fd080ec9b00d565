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

// recordPower reports power draw and limits (NVML: mW) in W, and the energy counter
// (NVML: mJ since driver load) in J. The enforced limit is read every scrape (an operator
// or the driver may change it); default, min and max are read at discovery.
func (r *deviceRead) recordPower() {
	m := r.metrics
	if m.HwPower.Enabled && !r.skip(callGetPowerUsage) {
		p, ret := r.dev.handle.GetPowerUsage()
		if r.ok(callGetPowerUsage, ret) {
			r.mb.RecordHwPowerDataPoint(r.now, float64(p)/milli)
		}
	}
	if m.NvidiaGpuPowerLimit.Enabled {
		if !r.skip(callGetEnforcedPowerLimit) {
			l, ret := r.dev.handle.GetEnforcedPowerLimit()
			if r.ok(callGetEnforcedPowerLimit, ret) {
				r.mb.RecordNvidiaGpuPowerLimitDataPoint(r.now, float64(l)/milli, metadata.AttributeNvidiaGpuPowerLimitTypeEnforced)
			}
		}
		if !r.gone {
			st := r.dev.static
			for _, l := range []struct {
				mw   uint32
				kind metadata.AttributeNvidiaGpuPowerLimitType
			}{
				{st.powerDefaultMW, metadata.AttributeNvidiaGpuPowerLimitTypeDefault},
				{st.powerMinMW, metadata.AttributeNvidiaGpuPowerLimitTypeMin},
				{st.powerMaxMW, metadata.AttributeNvidiaGpuPowerLimitTypeMax},
			} {
				if l.mw > 0 {
					r.mb.RecordNvidiaGpuPowerLimitDataPoint(r.now, float64(l.mw)/milli, l.kind)
				}
			}
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
