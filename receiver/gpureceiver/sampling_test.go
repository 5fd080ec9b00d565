package gpureceiver

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// oneGPU is a hand-driven single-GPU library: unset device functions answer NOT_SUPPORTED
// (an old or limited driver), and a test sets the ones it cares about.
func oneGPU() (*mock.Interface, *mock.Device) {
	dev := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-11111111-2222-3333-4444-555555555555", nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA L4", nvml.SUCCESS },
	}
	gpusim.FillNotSupported(dev)
	lib := &mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
		SystemGetDriverVersionFunc: func() (string, nvml.Return) { return "535.161.08", nvml.SUCCESS },
		ExtensionsFunc: func() nvml.ExtendedInterface {
			// Every symbol of an R535 driver; nvmlDeviceGetTemperatureV came with R570.
			return &mock.ExtendedInterface{LookupSymbolFunc: func(symbol string) error {
				if symbol == nvmlclient.SymbolGetTemperatureV {
					return errors.New("undefined symbol: " + symbol)
				}
				return nil
			}}
		},
	}
	gpusim.FillNotSupported(lib)
	return lib, dev
}

func utilSamples(ts uint64, values ...uint32) []nvml.Sample {
	out := make([]nvml.Sample, len(values))
	for i, v := range values {
		out[i].TimeStamp = ts + uint64(i)
		binary.LittleEndian.PutUint32(out[i].SampleValue[:4], v)
	}
	return out
}

func TestUtilizationIsAveragedOverTheIntervalsSamples(t *testing.T) {
	lib, dev := oneGPU()
	var lastSeenArgs []uint64
	dev.GetSamplesFunc = func(kind nvml.SamplingType, lastSeen uint64) (nvml.ValueType, []nvml.Sample, nvml.Return) {
		if kind != nvml.GPU_UTILIZATION_SAMPLES {
			return 0, nil, nvml.ERROR_NOT_SUPPORTED
		}
		lastSeenArgs = append(lastSeenArgs, lastSeen)
		return nvml.VALUE_TYPE_UNSIGNED_INT, utilSamples(1000, 10, 20, 90), nvml.SUCCESS
	}
	clock := newFakeClock()
	s := startedScraper(t, testConfig(), lib, clock)

	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	gpu := gpuResources(md)["GPU-11111111-2222-3333-4444-555555555555"]
	assert.InDelta(t, 0.40, pointValue(t, gpu, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"}), 1e-9,
		"the mean of the samples, not the last one")

	_, err = s.scrape(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []uint64{0, 1002}, lastSeenArgs, "the next scrape asks only for samples newer than those already averaged")
}

func TestUtilizationFallsBackAndStopsAskingForUnsupportedSamples(t *testing.T) {
	lib, dev := oneGPU()
	dev.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 55, Memory: 12}, nvml.SUCCESS
	}
	clock := newFakeClock()
	s := startedScraper(t, testConfig(), lib, clock)

	for range 3 {
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err, "NOT_SUPPORTED is a normal answer, not an error")
		gpu := gpuResources(md)["GPU-11111111-2222-3333-4444-555555555555"]
		assert.InDelta(t, 0.55, pointValue(t, gpu, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"}), 1e-9)
		assert.InDelta(t, 0.12, pointValue(t, gpu, "nvidia.gpu.memory_copy.utilization", nil), 1e-9)
		_, hasPower := findMetric(gpu, "hw.power")
		assert.False(t, hasPower, "an unsupported value is absent, not zero")
	}
	// Four sampling types asked once each on the first scrape, never again.
	assert.Len(t, dev.GetSamplesCalls(), 4)
	assert.Len(t, dev.GetPowerUsageCalls(), 1)
	assert.Len(t, dev.GetUtilizationRatesCalls(), 3)
}

func TestOldDriverWithoutMemoryInfoV2(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxa100", "steady-training", clock)
	sim.SetSymbolMissing("nvmlDeviceGetMemoryInfo_v2", true)
	s := startedScraper(t, testConfig(), sim, clock)
	clock.Step(10 * time.Second)

	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	for _, gpu := range gpuResources(md) {
		assert.Positive(t, pointValue(t, gpu, "hw.gpu.memory.usage", nil))
		_, hasReserved := findMetric(gpu, "nvidia.gpu.memory.reserved")
		assert.False(t, hasReserved)
	}
	assert.Zero(t, sim.Calls()["DeviceGetMemoryInfo_v2"], "a symbol the driver lacks is never called")
	assert.Positive(t, sim.Calls()["DeviceGetMemoryInfo"])
}

func TestDeviceFilterByIndexAndUUID(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxb200", "idle", clock)
	all := startedScraper(t, testConfig(), sim, clock)
	uuid5 := all.devices[5].uuid

	cfg := testConfig()
	cfg.IncludeDevices = []string{"0", uuid5}
	s := startedScraper(t, cfg, sim, clock)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	got := gpuResources(md)
	require.Len(t, got, 2)
	assert.Contains(t, got, all.devices[0].uuid)
	assert.Contains(t, got, uuid5)
	assert.Equal(t, 2.0, pointValue(t, hostResource(t, md), "nvidia.gpu.count", nil))
}

func TestDisabledMetricIsNotReadFromNVML(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh200", "steady-training", clock)
	cfg := testConfig()
	cfg.Metrics.NvidiaGpuClockFrequency.Enabled = false
	s := startedScraper(t, cfg, sim, clock)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	for _, gpu := range gpuResources(md) {
		_, ok := findMetric(gpu, "nvidia.gpu.clock.frequency")
		assert.False(t, ok)
	}
	assert.Zero(t, sim.Calls()["DeviceGetClockInfo"])
}
