package gpureceiver

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// steadyOnH100 are the steady metrics an H100 reports by default.
var steadyOnH100 = []string{
	"hw.errors", "nvidia.gpu.memory.remap.failed", "nvidia.gpu.memory.remap.pending",
	"nvidia.gpu.power.limit", "nvidia.gpu.pcie.replays", "nvidia.gpu.nvlink.errors", "nvidia.gpu.nvlink.state",
	"hw.gpu.memory.limit", "nvidia.gpu.clock_event.active", "hw.status",
}

// alwaysOnH100 are metrics of the default set that every collection carries.
var alwaysOnH100 = []string{"hw.power", "hw.gpu.utilization", "hw.gpu.memory.usage", "hw.energy"}

// scrapeEvery scrapes n times, the clock stepping by interval before each scrape after
// the first, and returns each scrape's first GPU.
func scrapeEvery(t *testing.T, s *gpuScraper, clock *fakeClock, interval time.Duration, n int) []pmetric.ResourceMetrics {
	t.Helper()
	var out []pmetric.ResourceMetrics
	for i := 0; i < n; i++ {
		if i > 0 {
			clock.Step(interval)
		}
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		out = append(out, gpuResources(md)[s.devices[0].uuid])
	}
	return out
}

// h100EverySecond starts a scraper of simulated H100s (steady-training) collecting every
// second, with cfg's other settings changed first by tweak (nil: none).
func h100EverySecond(t *testing.T, tweak func(*Config)) (*gpuScraper, *gpusim.Simulator, *fakeClock) {
	t.Helper()
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	cfg := testConfig()
	cfg.CollectionInterval = time.Second
	if tweak != nil {
		tweak(cfg)
	}
	return startedScraper(t, cfg, sim, clock), sim, clock
}

func has(rm pmetric.ResourceMetrics, name string) bool {
	_, ok := findMetric(rm, name)
	return ok
}

func TestSteadySeriesAreSentWhenTheyChangeAndEveryTenSeconds(t *testing.T) {
	s, sim, clock := h100EverySecond(t, nil)

	gpus := scrapeEvery(t, s, clock, time.Second, 21)
	for i, gpu := range gpus {
		for _, name := range alwaysOnH100 {
			assert.Truef(t, has(gpu, name), "collection %d lacks %s: only steady series are held back", i, name)
		}
		for _, name := range steadyOnH100 {
			assert.Equalf(t, i%10 == 0, has(gpu, name), "collection %d (1 s apart): %s is sent at 0, 10 and 20 s only", i, name)
		}
	}
	// A held-back series comes back with every point it had.
	errs, ok := findMetric(gpus[10], "hw.errors")
	require.True(t, ok)
	assert.Equal(t, 4, errs.Sum().DataPoints().Len(), "corrected and uncorrected, volatile and aggregate")

	// A change goes out at the next collection, the unchanged rest stays held back.
	sim.InjectXID(0, 79, 1)
	waitForXIDs(t, s, sim)
	gpu := scrapeEvery(t, s, clock, time.Second, 1)[0]
	assert.Equal(t, 1.0, pointValue(t, gpu, "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "79"}))
	assert.False(t, has(gpu, "hw.errors"), "an unchanged steady series waits for its 10 s")
	later := scrapeEvery(t, s, clock, time.Second, 2)
	assert.False(t, has(later[1], "nvidia.gpu.xid.errors"), "the XID counter, unchanged since, is held back again")
}

func TestSteadySeriesEveryCollectionWhereConfiguredOrCollectingSlowly(t *testing.T) {
	for name, c := range map[string]struct {
		interval, steady time.Duration
	}{
		"interval 0s":            {time.Second, 0},
		"collecting every 10s":   {10 * time.Second, gpuschema.SteadyResendMax},
		"collecting every 15s":   {15 * time.Second, gpuschema.SteadyResendMax},
		"interval at collection": {2 * time.Second, 2 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			clock := newFakeClock()
			sim := newSim(t, "dgxh100", "steady-training", clock)
			cfg := testConfig()
			cfg.CollectionInterval, cfg.SteadySeriesInterval = c.interval, c.steady
			s := startedScraper(t, cfg, sim, clock)
			for i, gpu := range scrapeEvery(t, s, clock, c.interval, 4) {
				for _, name := range steadyOnH100 {
					assert.Truef(t, has(gpu, name), "collection %d lacks %s", i, name)
				}
			}
		})
	}
}

func TestSteadySeriesWhoseRecordsTheBuilderMergesAreSentEveryCollection(t *testing.T) {
	s, _, clock := h100EverySecond(t, func(cfg *Config) {
		// Without the counter type, each error type's point is the sum of its volatile and
		// aggregate counters: holding back one of the two would change the sum.
		cfg.Metrics.HwErrors.EnabledAttributes = []metadata.HwErrorsMetricAttributeKey{metadata.HwErrorsMetricAttributeKeyErrorType}
	})
	for i, gpu := range scrapeEvery(t, s, clock, time.Second, 3) {
		assert.Truef(t, has(gpu, "hw.errors"), "collection %d lacks the merged hw.errors", i)
		assert.Equalf(t, i == 0, has(gpu, "nvidia.gpu.power.limit"), "collection %d: the other steady series are still held back", i)
	}
}

func TestSteadySeriesWithoutHwStatusAreSentEveryCollection(t *testing.T) {
	s, _, clock := h100EverySecond(t, func(cfg *Config) { cfg.Metrics.HwStatus.Enabled = false })
	for i, gpu := range scrapeEvery(t, s, clock, time.Second, 3) {
		for _, name := range steadyOnH100 {
			if name == "hw.status" {
				continue
			}
			assert.Truef(t, has(gpu, name), "collection %d lacks %s: without hw.status nothing is held back", i, name)
		}
	}
}

func TestTheHeldBackSetIsTheDocumentedOne(t *testing.T) {
	// The receiver README's "Steady series" list. Adding a metric here means gpu_enrich
	// stops ending it at once and no longer finds it in every batch: check it reads none,
	// or that it keeps the last one (the framebuffer's size, the clock-event reasons).
	documented := []string{
		"hw.errors", "hw.temperature.limit", "hw.gpu.memory.limit",
		"nvidia.gpu.memory.remap.failed", "nvidia.gpu.memory.remap.pending", "nvidia.gpu.memory.remapped_rows",
		"nvidia.gpu.memory.retired_pages", "nvidia.gpu.memory.retired_pages.pending",
		"nvidia.gpu.power.limit", "nvidia.gpu.power.limit.board", "nvidia.gpu.clock.frequency.max",
		"nvidia.gpu.pcie.replays", "nvidia.gpu.pcie.link.generation", "nvidia.gpu.pcie.link.generation.max",
		"nvidia.gpu.pcie.link.width", "nvidia.gpu.pcie.link.width.max",
		"nvidia.gpu.nvlink.errors", "nvidia.gpu.nvlink.state", "nvidia.gpu.xid.errors", "nvidia.gpu.xid.last",
		"nvidia.gpu.clock_event.active", "hw.status",
	}
	held := steadyHoldable(&testConfig().Metrics)
	var got []string
	for name, ok := range held {
		assert.Truef(t, ok, "%s: the default configuration merges no records", name)
		got = append(got, name)
	}
	assert.ElementsMatch(t, documented, got)
	assert.False(t, gpuschema.IsSteady("hw.gpu.memory.usage"), "gpu_enrich reads the usage from every batch")
}

// clockEvents returns a GPU's clock-event reasons as reason=value, or nil when the
// collection has none.
func clockEvents(rm pmetric.ResourceMetrics) map[string]int64 {
	m, ok := findMetric(rm, "nvidia.gpu.clock_event.active")
	if !ok {
		return nil
	}
	out := map[string]int64{}
	for i := 0; i < m.Sum().DataPoints().Len(); i++ {
		dp := m.Sum().DataPoints().At(i)
		reason, _ := dp.Attributes().Get("nvidia.gpu.clock_event.reason")
		out[reason.Str()] = dp.IntValue()
	}
	return out
}

// The eight clock-event reasons are one steady group: all eight go out in the collection
// where any of them changes (the power cap letting go for a second), and when 10 s have
// passed; in between, none. Compared with the same GPUs collected with
// steady_series_interval 0s.
func TestClockEventsAreSentAsOneGroupWhenAnyChanges(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.CollectionInterval = time.Second
	held := startedScraper(t, cfg, newSim(t, "dgxh100", "power-capped", clock), clock)
	every := *cfg
	every.SteadySeriesInterval = 0
	all := startedScraper(t, &every, newSim(t, "dgxh100", "power-capped", clock), clock)

	var lastSent map[string]int64
	lastAt, changes, heldBack := 0, 0, 0
	for sec := 0; sec < 60; sec++ {
		if sec > 0 {
			clock.Step(time.Second)
		}
		md, err := held.scrape(context.Background())
		require.NoError(t, err)
		ref, err := all.scrape(context.Background())
		require.NoError(t, err)
		got := clockEvents(gpuResources(md)[held.devices[0].uuid])
		want := clockEvents(gpuResources(ref)[all.devices[0].uuid])
		require.Len(t, want, 8, "%ds: every collection reads all eight reasons", sec)
		changed := lastSent != nil && !maps.Equal(lastSent, want)
		if changed {
			changes++
		}
		if lastSent == nil || changed || sec-lastAt >= 10 {
			require.Equalf(t, want, got, "%ds: a change, or 10 s since %ds, sends all eight", sec, lastAt)
			lastSent, lastAt = want, sec
			continue
		}
		require.Nilf(t, got, "%ds: unchanged since %ds, none is sent", sec, lastAt)
		heldBack++
	}
	assert.Positive(t, changes, "the power cap comes and goes")
	assert.Positive(t, heldBack)
}

// hw.status is held back only in a collection that carries the GPU's memory usage, which
// keeps the GPU's resource in the batch (gpu_enrich's end-of-series markers rely on it).
// A GPU that stops answering says failed in every collection; with the memory usage
// turned off, every GPU says its state in every collection.
func TestHwStatusIsHeldBackOnlyBesideTheMemoryUsage(t *testing.T) {
	t.Run("a lost GPU says failed every collection", func(t *testing.T) {
		s, sim, clock := h100EverySecond(t, nil)
		gpus := scrapeEvery(t, s, clock, time.Second, 3)
		assert.False(t, has(gpus[2], "hw.status"), "a healthy GPU's unchanged state is held back")

		sim.SetLost(0, true)
		for i := 0; i < 15; i++ {
			clock.Step(time.Second)
			md, _ := s.scrape(context.Background())
			lost := gpuResources(md)[s.devices[0].uuid]
			require.Truef(t, has(lost, "hw.status"), "%d s after the GPU fell off the bus: its state is in every collection", i+1)
			assert.Equal(t, 1.0, pointValue(t, lost, "hw.status", map[string]string{"hw.state": "failed"}))
			assert.False(t, has(lost, "hw.gpu.memory.usage"))
		}

		sim.SetLost(0, false)
		back := scrapeEvery(t, s, clock, time.Second, 3)
		assert.Equal(t, 1.0, pointValue(t, back[0], "hw.status", map[string]string{"hw.state": "ok"}), "back: ok at once")
		assert.False(t, has(back[2], "hw.status"), "and held back again while unchanged")
	})
	t.Run("without the memory usage", func(t *testing.T) {
		s, _, clock := h100EverySecond(t, func(cfg *Config) { cfg.Metrics.HwGpuMemoryUsage.Enabled = false })
		for i, gpu := range scrapeEvery(t, s, clock, time.Second, 12) {
			assert.Truef(t, has(gpu, "hw.status"), "collection %d lacks hw.status", i)
			assert.Equalf(t, i%10 == 0, has(gpu, "hw.errors"), "collection %d: the other steady series are still held back", i)
		}
	})
	t.Run("a change goes out at once", func(t *testing.T) {
		s, sim, clock := h100EverySecond(t, nil)
		scrapeEvery(t, s, clock, time.Second, 3)
		sim.InjectXID(0, 79, 1) // fatal: failed for the health window
		waitForXIDs(t, s, sim)
		gpu := scrapeEvery(t, s, clock, time.Second, 1)[0]
		require.True(t, has(gpu, "hw.status"), "the change is sent in the collection that saw it")
		assert.Equal(t, 1.0, pointValue(t, gpu, "hw.status", map[string]string{"hw.state": "failed"}))
		assert.Equal(t, 0.0, pointValue(t, gpu, "hw.status", map[string]string{"hw.state": "ok"}))
		assert.False(t, has(scrapeEvery(t, s, clock, time.Second, 1)[0], "hw.status"), "then held back again")
	})
}
