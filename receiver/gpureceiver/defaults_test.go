package gpureceiver

import (
	"context"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// Tests of the lean default set (issue 15): what it reports, what it does not ask NVML
// for, and that the full overlay brings everything back.

// TestNVLinkIsPerGPUByDefaultAndSumsTheLinks: by default a GPU reports its NVLink traffic,
// errors and links up as GPU totals, equal to the sums of the per-link series the full
// overlay gives.
func TestNVLinkIsPerGPUByDefaultAndSumsTheLinks(t *testing.T) {
	_, _, lean := scrapeAt(t, "dgxh100", "ecc-degrading", 40*time.Second)
	_, _, full := scrapeWith(t, fullTestConfig(t), "dgxh100", "ecc-degrading", 40*time.Second)
	require.NoError(t, lean.err)
	fullGPUs := gpuResources(full.md)
	for uuid, gpu := range gpuResources(lean.md) {
		perLink := fullGPUs[uuid]
		for _, c := range []struct {
			metric string
			attrs  map[string]string
		}{
			{"nvidia.gpu.nvlink.io", map[string]string{"network.io.direction": "transmit"}},
			{"nvidia.gpu.nvlink.io", map[string]string{"network.io.direction": "receive"}},
			{"nvidia.gpu.nvlink.errors", nil},
			{"nvidia.gpu.nvlink.state", nil},
		} {
			m, _ := findMetric(gpu, c.metric)
			assert.Equal(t, 1, numberPoints(m).Len()/max(1, len(c.attrs)*2), "%s: one series per GPU (per direction)", c.metric)
			assert.Equal(t, sumPoints(t, perLink, c.metric, c.attrs), pointValue(t, gpu, c.metric, c.attrs), "%s %v of %s", c.metric, c.attrs, uuid)
			_, hasLink := numberPoints(m).At(0).Attributes().Get("nvidia.gpu.nvlink.link")
			assert.False(t, hasLink)
		}
		assert.Equal(t, 18.0, pointValue(t, gpu, "nvidia.gpu.nvlink.state", nil), "an H100 with all 18 links up")
	}
}

// TestNVLinkTotalsFollowTheConfiguredAggregation: the links are summed per GPU whatever
// other attribute is kept (errors per type), and an aggregation other than a sum still
// applies over the links (avg of links up: the share of links up).
func TestNVLinkTotalsFollowTheConfiguredAggregation(t *testing.T) {
	cfg := testConfig()
	cfg.Metrics.NvidiaGpuNvlinkErrors.EnabledAttributes = []metadata.NvidiaGpuNvlinkErrorsMetricAttributeKey{metadata.NvidiaGpuNvlinkErrorsMetricAttributeKeyNvidiaGpuNvlinkErrorType}
	cfg.Metrics.NvidiaGpuNvlinkState.AggregationStrategy = metadata.AggregationStrategyAvg
	_, _, got := scrapeWith(t, cfg, "dgxh100", "ecc-degrading", 40*time.Second)
	_, _, full := scrapeWith(t, fullTestConfig(t), "dgxh100", "ecc-degrading", 40*time.Second)
	require.NoError(t, got.err)
	fullGPUs := gpuResources(full.md)
	for uuid, gpu := range gpuResources(got.md) {
		for _, kind := range []string{"crc", "replay", "recovery"} {
			attrs := map[string]string{"nvidia.gpu.nvlink.error.type": kind}
			assert.Equal(t, sumPoints(t, fullGPUs[uuid], "nvidia.gpu.nvlink.errors", attrs), pointValue(t, gpu, "nvidia.gpu.nvlink.errors", attrs), "%s errors of %s", kind, uuid)
		}
		assert.Equal(t, 1.0, pointValue(t, gpu, "nvidia.gpu.nvlink.state", nil), "avg over an H100's 18 links, all up")
	}
}

// TestOptInValuesAreNotReadFromNVML: what the default set leaves out costs no NVML call,
// not even the static facts read once per discovery; the full overlay reads them.
func TestOptInValuesAreNotReadFromNVML(t *testing.T) {
	optIn := []string{"DeviceGetTemperatureThreshold", "DeviceGetPowerManagementDefaultLimit", "DeviceGetPowerManagementLimitConstraints",
		"DeviceGetMaxPcieLinkGeneration", "DeviceGetMaxPcieLinkWidth", "DeviceGetCurrPcieLinkGeneration", "DeviceGetCurrPcieLinkWidth",
		"DeviceGetPerformanceState"}
	for _, c := range []struct {
		name string
		cfg  *Config
		read bool
	}{{"default", testConfig(), false}, {"full", fullTestConfig(t), true}} {
		clock := newFakeClock()
		sim := newSim(t, "dgxh100", "steady-training", clock)
		s := startedScraper(t, c.cfg, sim, clock)
		for range 3 {
			clock.Step(10 * time.Second)
			_, err := s.scrape(context.Background())
			require.NoError(t, err)
		}
		for _, call := range optIn {
			if c.read {
				assert.Positive(t, sim.Calls()[call], "%s: %s", c.name, call)
			} else {
				assert.Zero(t, sim.Calls()[call], "%s: %s", c.name, call)
			}
		}
	}
	var defaultLinks, fullLinks int
	for _, v := range newFieldRequest(&testConfig().Metrics, 18, false) {
		if v.ScopeId > 0 {
			defaultLinks++
		}
	}
	for _, v := range newFieldRequest(&fullTestConfig(t).Metrics, 18, false) {
		if v.ScopeId > 0 {
			fullLinks++
		}
	}
	assert.Equal(t, 17*6, defaultLinks, "per-link fields are read for the GPU totals")
	cfg := testConfig()
	cfg.Metrics.NvidiaGpuNvlinkIo.Enabled = false
	cfg.Metrics.NvidiaGpuNvlinkErrors.Enabled = false
	cfg.Metrics.NvidiaGpuNvlinkState.Enabled = false
	for _, v := range newFieldRequest(&cfg.Metrics, 18, false) {
		assert.Zero(t, v.ScopeId, "no link field once NVLink metrics are off")
	}
	assert.Equal(t, defaultLinks, fullLinks)
}

// TestPowerFromFieldsOrTheDedicatedCalls: power draw and the enforced limit come from the
// field batch; a driver without those fields is asked through the dedicated calls.
func TestPowerFromFieldsOrTheDedicatedCalls(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "power-capped", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	clock.Step(10 * time.Second)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	for _, gpu := range gpuResources(md) {
		assert.InDelta(t, 698, pointValue(t, gpu, "hw.power", nil), 3, "held at its 700 W limit")
		assert.Equal(t, 700.0, pointValue(t, gpu, "nvidia.gpu.power.limit", map[string]string{"nvidia.gpu.power.limit_type": "enforced"}))
	}
	assert.Zero(t, sim.Calls()["DeviceGetPowerUsage"])
	assert.Zero(t, sim.Calls()["DeviceGetEnforcedPowerLimit"])

	lib, dev := oneGPU() // its field reads answer NOT_SUPPORTED: an older driver
	dev.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 61_500, nvml.SUCCESS }
	dev.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 72_000, nvml.SUCCESS }
	old := startedScraper(t, testConfig(), lib, newFakeClock())
	md, err = old.scrape(context.Background())
	require.NoError(t, err)
	gpu := gpuResources(md)["GPU-11111111-2222-3333-4444-555555555555"]
	assert.Equal(t, 61.5, pointValue(t, gpu, "hw.power", nil))
	assert.Equal(t, 72.0, pointValue(t, gpu, "nvidia.gpu.power.limit", map[string]string{"nvidia.gpu.power.limit_type": "enforced"}))
}

// TestUtilizationFromGPMWhereTheGPUHasIt: on Hopper the GPU's utilization and its
// decoders' come from the GPM sample pair profiling reads anyway, averaged over the
// interval like the sample buffer it replaces; only the memory-copy and encoder samples are
// asked for (GPM has no NVENC metric on a GPU without NVENC). The A100 (no GPM) reads the
// sample buffer.
func TestUtilizationFromGPMWhereTheGPUHasIt(t *testing.T) {
	for _, c := range []struct {
		system       string
		samplesPerGP int64
	}{{"dgxh100", 2}, {"dgxa100", 4}} {
		clock := newFakeClock()
		sim := newSim(t, c.system, "steady-training", clock)
		s := startedScraper(t, testConfig(), sim, clock)
		clock.Step(20 * time.Second)
		_, err := s.scrape(context.Background())
		require.NoError(t, err)
		before := sim.Calls()["DeviceGetSamples"]
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		assert.Equal(t, 8*c.samplesPerGP, sim.Calls()["DeviceGetSamples"]-before, "%s: sample-buffer reads per scrape", c.system)
		for uuid, gpu := range gpuResources(md) {
			util := pointValue(t, gpu, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"})
			assert.InDelta(t, 0.88, util, 0.07, "%s %s: steady training", c.system, uuid)
			assert.Equal(t, 0.0, pointValue(t, gpu, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "decoder"}))
			assert.Equal(t, 0.0, pointValue(t, gpu, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "encoder"}),
				"no NVENC: 0 %%, as nvidia-smi shows and dcgm-exporter reports")
		}
	}

	// The same interval averaged through both sources agrees.
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "memory-leak", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	clock.Step(30 * time.Second)
	_, _ = s.scrape(context.Background())
	dev, _ := sim.DeviceGetHandleByIndex(0)
	_, samples, ret := dev.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, s.devices[0].lastSampleTS[nvml.GPU_UTILIZATION_SAMPLES])
	require.Equal(t, nvml.SUCCESS, ret)
	start := uint64(clock.Now().UnixMicro())
	clock.Step(10 * time.Second)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	_, samples, _ = dev.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, start)
	sum := 0.0
	for _, smp := range samples {
		v, _ := decodeSample(nvml.VALUE_TYPE_UNSIGNED_INT, smp.SampleValue)
		sum += v
	}
	require.Len(t, samples, 10)
	assert.InDelta(t, sum/10/100, pointValue(t, gpuResources(md)[s.devices[0].uuid], "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"}), 0.01)
}

// TestMIGInstancesReportUtilizationFromGPM: NVML has no utilization for a MIG instance;
// on Hopper, GPM does, and each instance reports its own.
func TestMIGInstancesReportUtilizationFromGPM(t *testing.T) {
	_, _, hopper := scrapeAt(t, "dgxh100", "mig", 30*time.Second)
	require.NoError(t, hopper.err)
	migs := migResources(hopper.md)
	require.Len(t, migs, 11)
	for uuid, m := range migs {
		util := pointValue(t, m, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"})
		assert.Positive(t, util, uuid)
		assert.LessOrEqual(t, util, 1.0, uuid)
	}
	_, _, ampere := scrapeAt(t, "dgxa100", "mig", 30*time.Second)
	for _, m := range migResources(ampere.md) {
		_, ok := findMetric(m, "hw.gpu.utilization")
		assert.False(t, ok, "no GPM on the A100")
	}
}

// TestMIGLayoutChangesAreFollowed: MIG turned on at run time shows at the next scrape
// (the GPU's device-level utilization stops being supported); a destroyed instance
// disappears at the next scrape; a new instance and MIG turned off show within a minute.
// In between, the instances are not listed again.
func TestMIGLayoutChangesAreFollowed(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	step := func() pmetric.Metrics {
		t.Helper()
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		return md
	}
	step()
	require.Empty(t, migResources(step()))

	oneSlice := []int{nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE}
	require.NoError(t, sim.SetMIGLayout(3, oneSlice))
	md := step()
	assert.Len(t, migResources(md), 2, "MIG on GPU 3 shows at once")
	_, hasUtil := findMetric(gpuResources(md)[s.devices[3].uuid], "hw.gpu.utilization")
	assert.False(t, hasUtil, "the parent reports no device-level utilization in MIG mode")
	listed := sim.Calls()["DeviceGetMigDeviceHandleByIndex"]
	step()
	step()
	assert.Equal(t, listed, sim.Calls()["DeviceGetMigDeviceHandleByIndex"], "instances are not listed every scrape")

	require.NoError(t, sim.SetMIGLayout(3, []int{nvml.GPU_INSTANCE_PROFILE_2_SLICE}))
	md = step()
	assert.Empty(t, migResources(md), "destroyed instances disappear at the next scrape")
	md = step()
	require.Len(t, migResources(md), 1, "and the new layout is read")
	for _, m := range migResources(md) {
		profile, _ := m.Resource().Attributes().Get("nvidia.mig.profile")
		assert.Equal(t, "2g.20gb", profile.Str())
	}

	require.NoError(t, sim.SetMIGLayout(3, nil))
	var off pmetric.Metrics
	for range 6 {
		off = step()
	}
	assert.Empty(t, migResources(off), "MIG turned off shows within a minute")
	assert.Positive(t, pointValue(t, gpuResources(off)[s.devices[3].uuid], "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"}),
		"and the GPU reports its utilization again")
}

// TestFullOverlayTurnsOnEverything: deploy/config-overlays/full.yaml enables every metric
// with every attribute, every resource attribute and every profiling activity of
// metadata.yaml, so it cannot fall behind a metric added later.
func TestFullOverlayTurnsOnEverything(t *testing.T) {
	raw, err := os.ReadFile("metadata.yaml")
	require.NoError(t, err)
	var md struct {
		ResourceAttributes map[string]any `yaml:"resource_attributes"`
		Attributes         map[string]struct {
			Enum             []string `yaml:"enum"`
			RequirementLevel string   `yaml:"requirement_level"`
		} `yaml:"attributes"`
		Metrics map[string]struct {
			Attributes []string `yaml:"attributes"`
		} `yaml:"metrics"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &md))

	conf := confmap.New()
	require.NoError(t, conf.Marshal(fullTestConfig(t)))
	for name, m := range md.Metrics {
		assert.Equal(t, true, conf.Get("metrics::"+name+"::enabled"), name)
		// A metric whose attributes are all required has no attributes setting (they are
		// always on); one with any other lists them all, the required ones included.
		want := []string(nil)
		for _, a := range m.Attributes {
			if md.Attributes[a].RequirementLevel != "required" {
				want = append([]string(nil), m.Attributes...)
				break
			}
		}
		if len(want) > 0 {
			got := stringsOf(conf.Get("metrics::" + name + "::attributes"))
			sort.Strings(got)
			sort.Strings(want)
			assert.Equal(t, want, got, "%s: every attribute", name)
		}
	}
	for name := range md.ResourceAttributes {
		assert.Equal(t, true, conf.Get("resource_attributes::"+name+"::enabled"), name)
	}
	activities := append([]string(nil), md.Attributes["nvidia.gpu.profiling.metric"].Enum...)
	got := append([]string(nil), fullTestConfig(t).Profiling.Activities...)
	sort.Strings(activities)
	sort.Strings(got)
	assert.Equal(t, activities, got)
}

func stringsOf(v any) []string {
	var out []string
	if x, ok := v.([]any); ok {
		for _, e := range x {
			out = append(out, fmt.Sprint(e))
		}
	}
	return out
}

func numberPoints(m pmetric.Metric) pmetric.NumberDataPointSlice {
	if m.Type() == pmetric.MetricTypeGauge {
		return m.Gauge().DataPoints()
	}
	return m.Sum().DataPoints()
}

// sumPoints adds up the points of a metric whose attributes include attrs.
func sumPoints(t *testing.T, rm pmetric.ResourceMetrics, name string, attrs map[string]string) float64 {
	t.Helper()
	m, ok := findMetric(rm, name)
	require.Truef(t, ok, "metric %s missing", name)
	sum := 0.0
	for i := 0; i < numberPoints(m).Len(); i++ {
		dp := numberPoints(m).At(i)
		if !matches(dp.Attributes(), attrs) {
			continue
		}
		if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
			sum += float64(dp.IntValue())
		} else {
			sum += dp.DoubleValue()
		}
	}
	return sum
}
