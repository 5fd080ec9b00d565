package gpureceiver

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver/receivertest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// fakeClock is a settable clock shared by the simulator and the receiver (as in the
// processor's tests).
type fakeClock = clocktesting.FakeClock

func newFakeClock() *fakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Backend = BackendSimulated
	cfg.HostName = "gpu-node-1"
	return cfg
}

// fullOverlay is the shipped overlay that turns on everything the receiver can report.
const fullOverlay = "../../deploy/config-overlays/full.yaml"

// fullTestConfig is testConfig with the full overlay's gpu receiver settings merged in,
// as the collector merges a second --config.
func fullTestConfig(t testing.TB) *Config {
	t.Helper()
	cfg := testConfig()
	require.NoError(t, configtest.Load(t, fullOverlay, "receivers::gpu", cfg))
	return cfg
}

func newSim(t *testing.T, system, scenario string, clock *fakeClock) *gpusim.Simulator {
	t.Helper()
	sim, err := gpusim.New(gpusim.Options{System: system, Scenario: scenario, Seed: 1, Now: clock.Now})
	require.NoError(t, err)
	return sim
}

// testXIDWait is the XID watcher's wait in these tests: the simulator's event set wakes
// at once on an injected XID either way, and each test's shutdown waits for one wait
// (defaultXIDWait, 2 s, made the package's tests three times slower).
const testXIDWait = 50 * time.Millisecond

// startedScraper returns a scraper over lib, started against a no-op host.
func startedScraper(t *testing.T, cfg *Config, lib nvml.Interface, clock *fakeClock) *gpuScraper {
	t.Helper()
	s := newGPUScraper(cfg, receivertest.NewNopSettings(metadata.Type), lib, clock.Now)
	s.xidWait = testXIDWait
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, s.shutdown(context.Background())) })
	return s
}

// gpuResources returns the per-GPU resource metrics (those with hw.id, without a process
// or MIG instance), by UUID.
func gpuResources(md pmetric.Metrics) map[string]pmetric.ResourceMetrics {
	return resourcesWhere(md, func(a pcommon.Map) bool {
		_, proc := a.Get("process.pid")
		_, mig := a.Get("nvidia.mig.uuid")
		return !proc && !mig
	}, "hw.id")
}

// processResources returns the per-process resource metrics, by "GPU or MIG UUID/PID".
func processResources(md pmetric.Metrics) map[string]pmetric.ResourceMetrics {
	out := map[string]pmetric.ResourceMetrics{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		a := rm.Resource().Attributes()
		pid, ok := a.Get("process.pid")
		if !ok {
			continue
		}
		id, _ := a.Get("hw.id")
		out[id.Str()+"/"+pid.AsString()] = rm
	}
	return out
}

// migResources returns the MIG instance resource metrics, by MIG UUID.
func migResources(md pmetric.Metrics) map[string]pmetric.ResourceMetrics {
	return resourcesWhere(md, func(a pcommon.Map) bool {
		_, proc := a.Get("process.pid")
		_, mig := a.Get("nvidia.mig.uuid")
		return !proc && mig
	}, "nvidia.mig.uuid")
}

func resourcesWhere(md pmetric.Metrics, keep func(pcommon.Map) bool, key string) map[string]pmetric.ResourceMetrics {
	out := map[string]pmetric.ResourceMetrics{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		a := rm.Resource().Attributes()
		id, ok := a.Get(key)
		if ok && keep(a) {
			out[id.Str()] = rm
		}
	}
	return out
}

// metricByName finds a metric in a resource, or fails.
func findMetric(rm pmetric.ResourceMetrics, name string) (pmetric.Metric, bool) {
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			if ms.At(j).Name() == name {
				return ms.At(j), true
			}
		}
	}
	return pmetric.Metric{}, false
}

// pointValue returns the value of the data point of a gauge or sum whose attributes
// include attrs.
func pointValue(t *testing.T, rm pmetric.ResourceMetrics, name string, attrs map[string]string) float64 {
	t.Helper()
	_, ok := findMetric(rm, name)
	require.Truef(t, ok, "metric %s missing", name)
	v, ok := pointValueOK(rm, name, attrs)
	require.Truef(t, ok, "metric %s has no point with %v", name, attrs)
	return v
}

// pointValueOK is the value of the point of metric `name` with attrs, and whether there is one.
func pointValueOK(rm pmetric.ResourceMetrics, name string, attrs map[string]string) (float64, bool) {
	m, ok := findMetric(rm, name)
	if !ok {
		return 0, false
	}
	var dps pmetric.NumberDataPointSlice
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		dps = m.Gauge().DataPoints()
	case pmetric.MetricTypeSum:
		dps = m.Sum().DataPoints()
	default:
		return 0, false
	}
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if matches(dp.Attributes(), attrs) {
			if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
				return float64(dp.IntValue()), true
			}
			return dp.DoubleValue(), true
		}
	}
	return 0, false
}

func matches(got pcommon.Map, want map[string]string) bool {
	for k, v := range want {
		a, ok := got.Get(k)
		if !ok || a.AsString() != v {
			return false
		}
	}
	return true
}

// hostResource returns the receiver's host-level resource metrics.
func hostResource(t *testing.T, md pmetric.Metrics) pmetric.ResourceMetrics {
	t.Helper()
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		if _, ok := rm.Resource().Attributes().Get("hw.id"); !ok {
			return rm
		}
	}
	t.Fatal("no host-level resource")
	return pmetric.ResourceMetrics{}
}

// waitForXIDs waits until the receiver's XID watcher has counted every XID the simulator
// has raised by now, so that a scrape's XID counters are deterministic.
func waitForXIDs(t *testing.T, s *gpuScraper, sim *gpusim.Simulator) {
	t.Helper()
	due := sim.DueXIDs()
	if due == 0 {
		return
	}
	require.NotNil(t, s.xids, "XIDs are due but no watcher runs")
	require.Eventually(t, func() bool {
		var counted uint64
		for _, d := range s.devices {
			for _, n := range s.xids.snapshot(d.uuid) {
				counted += n
			}
		}
		return counted == due
	}, 10*time.Second, time.Millisecond, "the watcher counts every XID")
}

// pmetricResult is a scrape's result.
type pmetricResult struct {
	md  pmetric.Metrics
	err error
}

// newGPUScraperForTest starts a scraper whose shutdown the test does itself.
func newGPUScraperForTest(t *testing.T, lib nvml.Interface, clock *fakeClock) *gpuScraper {
	t.Helper()
	s := newGPUScraper(testConfig(), receivertest.NewNopSettings(metadata.Type), lib, clock.Now)
	s.xidWait = testXIDWait
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	return s
}

func newSimB(b *testing.B, system, scenario string, clock *fakeClock) *gpusim.Simulator {
	b.Helper()
	sim, err := gpusim.New(gpusim.Options{System: system, Scenario: scenario, Seed: 1, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	return sim
}

func newGPUScraperB(b *testing.B, cfg *Config, lib nvml.Interface, clock *fakeClock) *gpuScraper {
	b.Helper()
	s := newGPUScraper(cfg, receivertest.NewNopSettings(metadata.Type), lib, clock.Now)
	s.xidWait = testXIDWait
	if err := s.start(context.Background(), componenttest.NewNopHost()); err != nil {
		b.Fatal(err)
	}
	return s
}
