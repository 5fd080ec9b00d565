//go:build gpu

package gpureceiver

// Hardware tests: run on a machine with an NVIDIA GPU and driver (`make test-gpu`). They
// read the real GPUs through the production path and check that what comes out is
// physically plausible. Set GPU_TEST_EXPECT_BUSY=1 while a workload keeps every GPU busy
// to also check that utilization and power show it.

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// realScraper reads the real GPUs with the full overlay: every metric the receiver has.
func realScraper(t *testing.T) (*gpuScraper, nvml.Interface) {
	t.Helper()
	return realScraperWith(t, fullTestConfig(t))
}

func realScraperWith(t *testing.T, cfg *Config) (*gpuScraper, nvml.Interface) {
	t.Helper()
	lib := nvml.New()
	cfg.Backend = BackendNVML
	cfg.HostName = "hardware-test"
	s := newGPUScraper(cfg, receivertest.NewNopSettings(metadata.Type), lib, time.Now)
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, s.shutdown(context.Background())) })
	require.True(t, s.session.Initialized(), "NVML must initialise on a GPU machine")
	return s, lib
}

func TestHardwareEveryGPUReportsPlausibleValues(t *testing.T) {
	s, lib := realScraper(t)
	assert.NotNil(t, s.xids, "XID events are watched")
	count, ret := lib.DeviceGetCount()
	require.Equal(t, nvml.SUCCESS, ret)
	require.Positive(t, count)
	for _, sym := range []string{"nvmlDeviceGetMemoryInfo_v2", "nvmlDeviceGetFieldValues", "nvmlDeviceGetSamples", "nvmlDeviceGetCurrentClocksEventReasons", "nvmlGpmMetricsGet"} {
		t.Logf("symbol %s present: %v", sym, s.session.HasSymbol(sym))
	}

	first, err := s.scrape(context.Background())
	require.NoError(t, err)
	time.Sleep(3 * time.Second)
	md, err := s.scrape(context.Background())
	require.NoError(t, err, "a healthy GPU scrapes without errors")

	gpus := gpuResources(md)
	require.Len(t, gpus, count)
	busID := regexp.MustCompile(`^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-9]$`)
	busy := os.Getenv("GPU_TEST_EXPECT_BUSY") == "1"
	for uuid, gpu := range gpus {
		attrs := gpu.Resource().Attributes().AsRaw()
		t.Logf("GPU %v: %v", uuid, attrs)
		assert.True(t, strings.HasPrefix(uuid, "GPU-"))
		assert.NotEmpty(t, attrs["hw.model"])
		assert.NotEmpty(t, attrs["hw.driver_version"])
		assert.Regexp(t, busID, attrs["nvidia.gpu.pci_bus_id"])

		util := pointValue(t, gpu, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"})
		used := pointValue(t, gpu, "hw.gpu.memory.usage", nil)
		limit := pointValue(t, gpu, "hw.gpu.memory.limit", nil)
		free := pointValue(t, gpu, "nvidia.gpu.memory.free", nil)
		reserved := pointValue(t, gpu, "nvidia.gpu.memory.reserved", nil)
		temp := pointValue(t, gpu, "hw.temperature", map[string]string{"hw.sensor_location": "gpu"})
		power := pointValue(t, gpu, "hw.power", nil)
		powerLimit := pointValue(t, gpu, "nvidia.gpu.power.limit", map[string]string{"nvidia.gpu.power.limit_type": "enforced"})
		energy := pointValue(t, gpu, "hw.energy", nil)
		sm := pointValue(t, gpu, "nvidia.gpu.clock.frequency", map[string]string{"nvidia.gpu.clock.type": "sm"})
		mem := pointValue(t, gpu, "nvidia.gpu.clock.frequency", map[string]string{"nvidia.gpu.clock.type": "memory"})
		t.Logf("util=%.2f fb=%.0f/%.0f MiB free=%.0f MiB temp=%.0fC power=%.1f/%.0f W energy=%.0f J sm=%.0f MHz mem=%.0f MHz",
			util, used/(1<<20), limit/(1<<20), free/(1<<20), temp, power, powerLimit, energy, sm/1e6, mem/1e6)

		assert.GreaterOrEqual(t, util, 0.0)
		assert.LessOrEqual(t, util, 1.0)
		// Measured on an H200, driver 580: an idle GPU reports 0 used; the driver's
		// reservation is separate and usage + free + reserved is exactly the total.
		assert.GreaterOrEqual(t, used, 0.0)
		assert.Positive(t, reserved)
		assert.Equal(t, limit, used+free+reserved, "usage + free + reserved = limit")
		assert.Greater(t, temp, 10.0)
		assert.Less(t, temp, 110.0)
		assert.Positive(t, power)
		assert.Less(t, power, powerLimit*1.3)
		assert.Positive(t, sm)
		assert.Positive(t, mem)
		prevEnergy := pointValue(t, gpuResources(first)[uuid], "hw.energy", nil)
		assert.Greater(t, energy, prevEnergy, "the energy counter grows while the GPU is powered")
		// Complete telemetry: what every datacenter GPU has.
		assert.Equal(t, 1.0, pointValue(t, gpu, "hw.status", map[string]string{"hw.state": "ok"}), "a healthy GPU is ok")
		reasons, ok := findMetric(gpu, "nvidia.gpu.clock_event.active")
		require.True(t, ok, "clock-event reasons")
		assert.Equal(t, 8, reasons.Sum().DataPoints().Len())
		assert.Positive(t, pointValue(t, gpu, "nvidia.gpu.pcie.link.width.max", nil))
		assert.Positive(t, pointValue(t, gpu, "nvidia.gpu.pcie.link.generation.max", nil))
		assert.Positive(t, pointValue(t, gpu, "hw.temperature.limit", map[string]string{"hw.sensor_location": "gpu", "hw.limit_type": "throttled"}))
		assert.Positive(t, pointValue(t, gpu, "nvidia.gpu.power.limit.board", map[string]string{"nvidia.gpu.power.limit_type": "max"}))
		for _, name := range []string{"hw.errors", "hw.gpu.io", "nvidia.gpu.clock_event.duration", "nvidia.gpu.memory.remap.pending", "nvidia.gpu.performance_state", "nvidia.gpu.profiling.activity", "nvidia.gpu.nvlink.state", "nvidia.gpu.minor_number"} {
			_, ok := findMetric(gpu, name)
			t.Logf("%s present: %v", name, ok)
		}
		for _, b := range clockEventBits {
			if v := pointValue(t, gpu, "nvidia.gpu.clock_event.active", map[string]string{"nvidia.gpu.clock_event.reason": b.reason.String()}); v == 1 {
				t.Logf("clock event active: %s", b.reason.String())
			}
		}
		if s.devices[0].static.gpmSupported {
			sm := pointValue(t, gpu, "nvidia.gpu.profiling.activity", map[string]string{"nvidia.gpu.profiling.metric": "sm_active"})
			tensor := pointValue(t, gpu, "nvidia.gpu.profiling.activity", map[string]string{"nvidia.gpu.profiling.metric": "tensor_active"})
			dram := pointValue(t, gpu, "nvidia.gpu.profiling.activity", map[string]string{"nvidia.gpu.profiling.metric": "dram_active"})
			t.Logf("GPM: sm_active=%.2f tensor_active=%.2f dram_active=%.2f", sm, tensor, dram)
			assert.GreaterOrEqual(t, sm, 0.0)
			assert.LessOrEqual(t, sm, 1.0)
			if busy {
				assert.Greater(t, sm, 0.3, "GPM shows the SMs working")
				assert.Greater(t, tensor, 0.05, "bf16 matmuls use the tensor cores")
			}
		}
		procs := processResources(md)
		for key, p := range procs {
			t.Logf("process %s: %v", key, p.Resource().Attributes().AsRaw())
		}
		if busy {
			assert.NotEmpty(t, procs, "the workload's process is listed")
			for _, p := range procs {
				assert.Positive(t, pointValue(t, p, "nvidia.gpu.process.memory.usage", nil))
			}
		}
		if busy {
			assert.Positive(t, used, "the workload's allocations show")
			assert.Greater(t, util, 0.5, "utilization shows the running workload")
			assert.Greater(t, power, 150.0, "power shows the running workload")
		}
	}
}

// TestHardwareSampledUtilizationAgreesWithInstant compares the interval average (from the
// driver's sample buffer) with nvmlDeviceGetUtilizationRates: both are percentages of the
// same engine, so on a steady workload they must be close. This pins the unit of the sample
// values on a real driver.
func TestHardwareSampledUtilizationAgreesWithInstant(t *testing.T) {
	_, lib := realScraper(t)
	d, ret := lib.DeviceGetHandleByIndex(0)
	require.Equal(t, nvml.SUCCESS, ret)
	// Drain the buffer (it holds ~12 s, which may predate a workload), then average only
	// the samples of the next 2 s.
	_, old, ret := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0)
	require.Equal(t, nvml.SUCCESS, ret)
	require.NotEmpty(t, old)
	time.Sleep(2 * time.Second)
	vt, samples, ret := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, old[len(old)-1].TimeStamp)
	require.Equal(t, nvml.SUCCESS, ret)
	require.NotEmpty(t, samples)
	sum := 0.0
	for _, smp := range samples {
		v, ok := decodeSample(vt, smp.SampleValue)
		require.True(t, ok, "value type %d", vt)
		sum += v
	}
	avg := sum / float64(len(samples))
	u, ret := d.GetUtilizationRates()
	require.Equal(t, nvml.SUCCESS, ret)
	t.Logf("%d samples, value type %d, average %.1f %%, instant %d %%", len(samples), vt, avg, u.Gpu)
	assert.LessOrEqual(t, avg, 100.0)
	assert.InDelta(t, float64(u.Gpu), avg, 35, "sample average and instant utilization measure the same thing")
}

// TestHardwareDefaultSetAndItsSources reads the real GPUs with the default configuration:
// it logs what the driver answers for the fields and GPM metrics the lean default set
// reads instead of dedicated calls, and how many series each GPU costs.
func TestHardwareDefaultSetAndItsSources(t *testing.T) {
	s, lib := realScraperWith(t, testConfig())
	d, ret := lib.DeviceGetHandleByIndex(0)
	require.Equal(t, nvml.SUCCESS, ret)
	fields := []nvml.FieldValue{{FieldId: nvml.FI_DEV_POWER_AVERAGE}, {FieldId: nvml.FI_DEV_POWER_INSTANT}, {FieldId: nvml.FI_DEV_POWER_CURRENT_LIMIT}}
	require.Equal(t, nvml.SUCCESS, d.GetFieldValues(fields))
	usage, _ := d.GetPowerUsage()
	limit, _ := d.GetEnforcedPowerLimit()
	for _, f := range fields {
		v, _ := decodeFieldValue(f)
		t.Logf("field %d: %s %.0f (nvmlDeviceGetPowerUsage %d mW, enforced limit %d mW)", f.FieldId, nvmlclient.ReturnName(nvml.Return(f.NvmlReturn)), v, usage, limit)
	}
	_, _ = s.scrape(context.Background())
	time.Sleep(3 * time.Second)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	for uuid, gpu := range gpuResources(md) {
		by := pdatawalk.SeriesPerMetric(gpu)
		t.Logf("GPU %s: %d series by default: %v", uuid, pdatawalk.Total(by), by)
		if v, ok := findMetric(gpu, "hw.gpu.utilization"); ok {
			t.Logf("hw.gpu.utilization points: %d (GPM read: %v)", v.Gauge().DataPoints().Len(), s.devices[0].static.gpmSupported)
		}
	}
}
