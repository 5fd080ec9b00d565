package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const callGetTemperature = "nvmlDeviceGetTemperature"

// recordTemperature reports the die temperature and, where the GPU has a sensor on its
// memory (HBM parts), the memory temperature, which only exists as a field value.
func (r *deviceRead) recordTemperature() {
	if !r.metrics().HwTemperature.Enabled {
		return
	}
	if !r.skip(callGetTemperature) {
		t, ret := r.dev.handle.GetTemperature(nvml.TEMPERATURE_GPU)
		if r.ok(callGetTemperature, ret) {
			r.mb.RecordHwTemperatureDataPoint(r.now, float64(t), metadata.AttributeHwSensorLocationGpu)
		}
	}
	if t, ok := r.fields.get(nvml.FI_DEV_MEMORY_TEMP); ok && !r.gone {
		r.mb.RecordHwTemperatureDataPoint(r.now, t, metadata.AttributeHwSensorLocationMemory)
	}
}
