package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

const (
	callGetTemperature      = nvmlclient.SymbolGetTemperature
	callGetTemperatureV     = nvmlclient.SymbolGetTemperatureV
	callGetFanSpeed         = "nvmlDeviceGetFanSpeed"
	callGetPerformanceState = "nvmlDeviceGetPerformanceState"
)

// temperatureLimits are read once per GPU at discovery.
var temperatureLimits = []struct {
	threshold nvml.TemperatureThresholds
	location  metadata.AttributeHwSensorLocation
	limit     metadata.AttributeHwLimitType
}{
	{nvml.TEMPERATURE_THRESHOLD_SLOWDOWN, metadata.AttributeHwSensorLocationGpu, metadata.AttributeHwLimitTypeThrottled},
	{nvml.TEMPERATURE_THRESHOLD_SHUTDOWN, metadata.AttributeHwSensorLocationGpu, metadata.AttributeHwLimitTypeHighCritical},
	{nvml.TEMPERATURE_THRESHOLD_GPU_MAX, metadata.AttributeHwSensorLocationGpu, metadata.AttributeHwLimitTypeMax},
	{nvml.TEMPERATURE_THRESHOLD_MEM_MAX, metadata.AttributeHwSensorLocationMemory, metadata.AttributeHwLimitTypeMax},
}

// recordTemperature reports the die temperature and, where the GPU has a sensor on its
// memory (HBM parts), the memory temperature, which only exists as a field value; then the
// thresholds, the fan and the performance state.
func (r *deviceRead) recordTemperature() {
	m := r.metrics
	if m.HwTemperature.Enabled {
		// The supported call where the driver has it (R570 and later), the deprecated one
		// before; a driver with neither is not asked (DESIGN §4: a missing symbol is not
		// called).
		switch {
		case r.symbols.HasSymbol(callGetTemperatureV):
			if !r.skip(callGetTemperatureV) {
				t, ret := nvmlclient.TemperatureV(r.dev.handle)
				if r.ok(callGetTemperatureV, ret) {
					r.mb.RecordHwTemperatureDataPoint(r.now, float64(t), metadata.AttributeHwSensorLocationGpu)
				}
			}
		case r.symbols.HasSymbol(callGetTemperature):
			if !r.skip(callGetTemperature) {
				t, ret := r.dev.handle.GetTemperature(nvml.TEMPERATURE_GPU)
				if r.ok(callGetTemperature, ret) {
					r.mb.RecordHwTemperatureDataPoint(r.now, float64(t), metadata.AttributeHwSensorLocationGpu)
				}
			}
		}
		if t, ok := r.fields.get(nvml.FI_DEV_MEMORY_TEMP); ok && !r.gone {
			r.mb.RecordHwTemperatureDataPoint(r.now, t, metadata.AttributeHwSensorLocationMemory)
		}
	}
	if m.HwTemperatureLimit.Enabled && !r.gone {
		for i, l := range temperatureLimits {
			if c := r.dev.static.tempLimitsC[i]; c > 0 && r.sendSteady(steadyKey{metric: gpuschema.MetricHwTemperatureLimit, code: int64(i)}, float64(c)) {
				r.mb.RecordHwTemperatureLimitDataPoint(r.now, float64(c), l.location, l.limit)
			}
		}
	}
	if m.NvidiaGpuFanSpeed.Enabled && !r.skip(callGetFanSpeed) {
		pct, ret := r.dev.handle.GetFanSpeed()
		if r.ok(callGetFanSpeed, ret) {
			r.mb.RecordNvidiaGpuFanSpeedDataPoint(r.now, float64(pct)/percent)
		}
	}
	if m.NvidiaGpuPerformanceState.Enabled && !r.skip(callGetPerformanceState) {
		p, ret := r.dev.handle.GetPerformanceState()
		// PSTATE_UNKNOWN (32) is "not known", not a state.
		if r.ok(callGetPerformanceState, ret) && p <= nvml.PSTATE_15 {
			r.mb.RecordNvidiaGpuPerformanceStateDataPoint(r.now, int64(p))
		}
	}
}
