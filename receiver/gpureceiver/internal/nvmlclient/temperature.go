package nvmlclient

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Symbols of the two ways to read a GPU's temperature. nvmlDeviceGetTemperature is
// deprecated in NVML 13 (R580; doc-deprecated from the 12.8 header, R570), where
// nvmlDeviceGetTemperatureV appeared.
const (
	SymbolGetTemperatureV = "nvmlDeviceGetTemperatureV"
	SymbolGetTemperature  = "nvmlDeviceGetTemperature"
)

// temperatureV1Reader is a device that answers nvmlDeviceGetTemperatureV without cgo: the
// simulator's. go-nvml's GetTemperatureV returns a handler bound to a real device handle,
// which nothing else can provide.
type temperatureV1Reader interface {
	TemperatureV1(nvml.TemperatureSensors) (nvml.Temperature, nvml.Return)
}

// TemperatureV reads the GPU's die temperature (°C) through nvmlDeviceGetTemperatureV.
// Call it only where the driver has the symbol.
func TemperatureV(dev nvml.Device) (int32, nvml.Return) {
	if sim, ok := dev.(temperatureV1Reader); ok {
		t, ret := sim.TemperatureV1(nvml.TEMPERATURE_GPU)
		return t.Temperature, ret
	}
	// go-nvml's V1 sets the struct's version; sensorType 0 is NVML_TEMPERATURE_GPU.
	t, ret := dev.GetTemperatureV().V1()
	return t.Temperature, ret
}
