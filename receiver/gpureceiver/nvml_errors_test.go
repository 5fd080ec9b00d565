package gpureceiver

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
)

// failingLib answers nvmlDeviceGetTemperatureV of GPU 0 with a fixed code (and counts how
// often it is asked), the rest as the simulator does.
type failingLib struct {
	*gpusim.Simulator
	temperature nvml.Return
	asked       int
}

func (l *failingLib) DeviceGetHandleByIndex(i int) (nvml.Device, nvml.Return) {
	d, ret := l.Simulator.DeviceGetHandleByIndex(i)
	if i != 0 || ret != nvml.SUCCESS {
		return d, ret
	}
	return &failingDevice{Device: d, lib: l}, ret
}

type failingDevice struct {
	nvml.Device
	lib *failingLib
}

// TemperatureV1 is how the simulator answers nvmlDeviceGetTemperatureV, which an R580
// driver has.
func (d *failingDevice) TemperatureV1(s nvml.TemperatureSensors) (nvml.Temperature, nvml.Return) {
	d.lib.asked++
	if d.lib.temperature != nvml.SUCCESS {
		return nvml.Temperature{}, d.lib.temperature
	}
	return d.Device.(*gpusim.Device).TemperatureV1(s)
}

// TestUnexpectedNVMLErrorsAreCountedAndLoggedOnce: a call that keeps failing is counted
// per call and code on its GPU, logged once, and never turned into a scrape error (which
// the collector logs at Error level every collection).
func TestUnexpectedNVMLErrorsAreCountedAndLoggedOnce(t *testing.T) {
	clock := newFakeClock()
	lib := &failingLib{Simulator: newSim(t, "dgxh100", "steady-training", clock), temperature: nvml.ERROR_UNKNOWN}
	s, logs := observedScraper(t, testConfig(), lib, clock)
	var gpu0 string
	for collection := 1; collection <= 5; collection++ {
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		gpu0 = s.devices[0].uuid
		rm := gpuResources(md)[gpu0]
		assert.Equal(t, float64(collection), pointValue(t, rm, "nvidia.nvml.errors",
			map[string]string{"nvidia.nvml.call": callGetTemperatureV, "nvidia.nvml.error": "ERROR_UNKNOWN"}))
		_, ok := findMetric(gpuResources(md)[s.devices[1].uuid], "nvidia.nvml.errors")
		assert.False(t, ok, "a GPU without failures reports none")
		// The rest of GPU 0 is read as usual.
		_, ok = findMetric(rm, "hw.power")
		assert.True(t, ok)
	}
	failures := logs.FilterMessageSnippet("NVML call failed")
	require.Equal(t, 1, failures.Len(), "one log line for five failures")
	fields := failures.All()[0].ContextMap()
	assert.Equal(t, callGetTemperatureV, fields["call"])
	assert.Equal(t, "ERROR_UNKNOWN", fields["nvml_error"])
	assert.Equal(t, gpu0, fields["uuid"])

	// Another code of the same call is a new line.
	lib.temperature = nvml.ERROR_TIMEOUT
	clock.Step(10 * time.Second)
	_, err := s.scrape(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2, logs.FilterMessageSnippet("NVML call failed").Len())
}

// TestNoPermissionIsReportedNotSilent: a call the agent lacks the privilege for is reported
// once as NO_PERMISSION (a self-metric and a log line), then not made again; the value it
// would give is absent, never reported as zero.
func TestNoPermissionIsReportedNotSilent(t *testing.T) {
	clock := newFakeClock()
	lib := &failingLib{Simulator: newSim(t, "dgxh100", "steady-training", clock), temperature: nvml.ERROR_NO_PERMISSION}
	s, logs := observedScraper(t, testConfig(), lib, clock)
	for range 3 {
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		rm := gpuResources(md)[s.devices[0].uuid]
		assert.Equal(t, 1.0, pointValue(t, rm, "nvidia.nvml.errors",
			map[string]string{"nvidia.nvml.call": callGetTemperatureV, "nvidia.nvml.error": "ERROR_NO_PERMISSION"}))
		_, hasGPUTemperature := pointValueOK(rm, "hw.temperature", map[string]string{"hw.sensor_location": "gpu"})
		assert.False(t, hasGPUTemperature, "absent, not zero")
	}
	assert.Equal(t, 1, lib.asked, "not asked again")
	assert.Equal(t, 1, logs.FilterMessageSnippet("privilege").Len())
}
