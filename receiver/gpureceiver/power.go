package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetPowerUsage             = "nvmlDeviceGetPowerUsage"
	callGetEnforcedPowerLimit     = "nvmlDeviceGetEnforcedPowerLimit"
	callGetTotalEnergyConsumption = "nvmlDeviceGetTotalEnergyConsumption"
	milli                         = 1000.0
)

// recordPower reports power draw and limits (NVML: mW) in W, and the energy counter
// (NVML: mJ since driver load) in J, from the field batch where the driver has the fields,
// else from the dedicated calls. The draw is the 1-second average where the GPU keeps one
// (what nvmlDeviceGetPowerUsage reports on Ampere and newer, GA100 excepted), else the
// instantaneous draw. The enforced limit is read every scrape (an operator or the driver
// may change it); the board's default, min and max at discovery.
func (r *deviceRead) recordPower() {
	m := r.metrics
	if m.HwPower.Enabled {
		if mw, ok := r.firstField(nvml.FI_DEV_POWER_AVERAGE, nvml.FI_DEV_POWER_INSTANT); ok {
			r.mb.RecordHwPowerDataPoint(r.now, mw/milli)
		} else if !r.skip(callGetPowerUsage) {
			p, ret := r.dev.handle.GetPowerUsage()
			if r.ok(callGetPowerUsage, ret) {
				r.mb.RecordHwPowerDataPoint(r.now, float64(p)/milli)
			}
		}
	}
	if m.NvidiaGpuPowerLimit.Enabled {
		enforced := steadyKey{metric: gpuschema.MetricNvidiaGpuPowerLimit, attrs: metadata.AttributeNvidiaGpuPowerLimitTypeEnforced.String()}
		if mw, ok := r.fields.get(nvml.FI_DEV_POWER_CURRENT_LIMIT); ok {
			if r.sendSteady(enforced, mw) {
				r.mb.RecordNvidiaGpuPowerLimitDataPoint(r.now, mw/milli, metadata.AttributeNvidiaGpuPowerLimitTypeEnforced)
			}
		} else if !r.skip(callGetEnforcedPowerLimit) {
			l, ret := r.dev.handle.GetEnforcedPowerLimit()
			if r.ok(callGetEnforcedPowerLimit, ret) && r.sendSteady(enforced, float64(l)) {
				r.mb.RecordNvidiaGpuPowerLimitDataPoint(r.now, float64(l)/milli, metadata.AttributeNvidiaGpuPowerLimitTypeEnforced)
			}
		}
	}
	if m.NvidiaGpuPowerLimitBoard.Enabled && !r.gone {
		st := r.dev.static
		for _, l := range []struct {
			mw   uint32
			kind metadata.AttributeNvidiaGpuPowerLimitType
		}{
			{st.powerDefaultMW, metadata.AttributeNvidiaGpuPowerLimitTypeDefault},
			{st.powerMinMW, metadata.AttributeNvidiaGpuPowerLimitTypeMin},
			{st.powerMaxMW, metadata.AttributeNvidiaGpuPowerLimitTypeMax},
		} {
			if l.mw > 0 && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuPowerLimitBoard, attrs: l.kind.String()}, float64(l.mw)) {
				r.mb.RecordNvidiaGpuPowerLimitBoardDataPoint(r.now, float64(l.mw)/milli, l.kind)
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

// firstField is the first of the fields the batch answered.
func (r *deviceRead) firstField(ids ...uint32) (float64, bool) {
	for _, id := range ids {
		if v, ok := r.fields.get(id); ok {
			return v, true
		}
	}
	return 0, false
}
