package gpuenrichprocessor

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// receiverEverySecond is the receiver's default configuration on simulated GPUs,
// collecting every second.
func receiverEverySecond() *gpureceiver.Config {
	rcfg := gpureceiver.NewFactory().CreateDefaultConfig().(*gpureceiver.Config)
	rcfg.Backend = gpureceiver.BackendSimulated
	rcfg.CollectionInterval = time.Second
	return rcfg
}

// At a 1 s collection interval the receiver holds back unchanged steady series (error
// counters, limits, link state) for up to 10 s; gpu_enrich must neither end them in
// between nor lose them, and still end a lost GPU's series.
func TestHeldBackSteadySeriesAreNotEnded(t *testing.T) {
	for _, scenario := range []string{"steady-training", "shared-gpu", "gpu-lost"} {
		t.Run(scenario, func(t *testing.T) {
			h := newHarnessWithReceiver(t, "dgxh100", scenario, receiverEverySecond(), testConfig(), func([]string, *fakeClock) sources { return sources{} })
			sentErrors, endedSteady := 0, 0
			for i := 0; i < 45; i++ {
				md := h.step(time.Second)
				for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "0", "!process.pid": ""}) {
					pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
						switch {
						case dp.Flags().NoRecordedValue() && (name == "hw.errors" || name == "nvidia.gpu.power.limit"):
							endedSteady++
						case name == "hw.errors" && !dp.Flags().NoRecordedValue():
							sentErrors++
						}
					})
				}
			}
			require.Positive(t, sentErrors)
			assert.LessOrEqual(t, sentErrors, 5*4, "GPU 0's four ECC counters at most every 10 s over 45 s")
			assert.Zero(t, endedSteady, "a held-back steady series is not ended while its GPU answers")
		})
	}
}

// The gpu-lost scenario's GPU 3 is off the bus from 15 s to 35 s: its steady series end
// within 10 s of its last point (hw.status, sent every collection, says failed), and are
// sent again, at once, when it answers again.
func TestALostGPUsSteadySeriesEndAndComeBack(t *testing.T) {
	for _, metric := range []string{"nvidia.gpu.power.limit", "nvidia.gpu.throttled", "nvidia.gpu.idle_while_allocated"} {
		t.Run(metric, func(t *testing.T) {
			h := newHarnessWithReceiver(t, "dgxh100", "gpu-lost", receiverEverySecond(), heldFlagsConfig(), func([]string, *fakeClock) sources { return sources{} })
			var ended, sentAfterReturn []int
			for sec := 1; sec <= 45; sec++ {
				md := h.step(time.Second)
				for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "3", "!process.pid": ""}) {
					pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
						if name != metric {
							return
						}
						switch {
						case dp.Flags().NoRecordedValue():
							ended = append(ended, sec)
						case sec >= 35:
							sentAfterReturn = append(sentAfterReturn, sec)
						}
					})
				}
			}
			require.NotEmpty(t, ended, "the lost GPU's series end")
			assert.LessOrEqual(t, ended[len(ended)-1], 15+10, "within 10 s of the GPU's last answer (15 s in)")
			require.NotEmpty(t, sentAfterReturn)
			assert.Equal(t, 35, sentAfterReturn[0], "sent again as soon as the GPU answers (35 s in)")
		})
	}
}

// heldFlagsConfig is testConfig with gpu_enrich's flags held back, as shipped.
func heldFlagsConfig() *Config {
	cfg := testConfig()
	cfg.SteadySeriesInterval = createDefaultConfig().(*Config).SteadySeriesInterval
	return cfg
}

// flagPoint is one series' point in one collection.
type flagPoint struct {
	value float64
	ended bool
}

// flagPoints lists the points of gpu_enrich's held-back flags in md, by series.
func flagPoints(md pmetric.Metrics) map[string]flagPoint { return seriesPoints(md, isSteadyOutput) }

// seriesPoints lists the points in md of the metrics include names, by series (resource
// attributes, metric, point attributes).
func seriesPoints(md pmetric.Metrics, include func(metric string) bool) map[string]flagPoint {
	out := map[string]flagPoint{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res := attrString(rm.Resource().Attributes())
		pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
			if !include(name) {
				return
			}
			out[res+" "+name+attrString(dp.Attributes())] = flagPoint{value: pdatawalk.Value(dp), ended: dp.Flags().NoRecordedValue()}
		})
	}
	return out
}

func attrString(m pcommon.Map) string {
	var kv []string
	for k, v := range m.All() {
		kv = append(kv, k+"="+v.AsString())
	}
	sort.Strings(kv)
	return "{" + strings.Join(kv, ",") + "}"
}

// At 1 s, the receiver's steady series (framebuffer size included) and gpu_enrich's
// window flags are held back while unchanged, and whoever reads any series' last point
// reads what sending every point of every collection would have said, in every
// collection: the same scenario run twice from the same seed, held and with both
// steady_series_interval at 0s. Only steady series skip collections, none goes more than
// 10 s without a point, none is ended while its GPU answers, and there are far fewer
// flag points.
func TestHeldBackSeriesSayWhatEveryCollectionSays(t *testing.T) {
	for _, scenario := range []string{"thermal-throttle", "power-capped", "memory-leak", "idle", "shared-gpu"} {
		t.Run(scenario, func(t *testing.T) {
			every, heldCfg := testConfig(), heldFlagsConfig() // steady_series_interval 0 and 10 s
			// Windows that end between two resends (at 1, 11, 21… s), so that a flag
			// raised at their end is held back unless a change goes out at once.
			for _, cfg := range []*Config{every, heldCfg} {
				cfg.Idle.Window, cfg.Leak.Window = 65*time.Second, 65*time.Second
			}
			receiverEvery := receiverEverySecond()
			receiverEvery.SteadySeriesInterval = 0
			held := newHarnessWithReceiver(t, "dgxh100", scenario, receiverEverySecond(), heldCfg, kubeletOnly)
			all := newHarnessWithReceiver(t, "dgxh100", scenario, receiverEvery, every, kubeletOnly)
			type state struct {
				value float64
				sent  int
			}
			steady := steadySeries(heldCfg)
			everything := func(string) bool { return true }
			last := map[string]state{}
			var previous map[string]flagPoint
			heldFlags, allFlags, changes := 0, 0, 0 // changes: flag points that differ from the one before
			throttleChanges := 0
			for sec := 1; sec <= 150; sec++ {
				got, want := seriesPoints(held.step(time.Second), everything), seriesPoints(all.step(time.Second), everything)
				for k, p := range got {
					if !steady(metricOf(k)) {
						require.Equal(t, want[k], p, "%ds: %s, a series sent every collection", sec, k)
						continue
					}
					require.False(t, p.ended, "%ds: %s ended while its GPU answers", sec, k)
					last[k] = state{p.value, sec}
					if isSteadyOutput(metricOf(k)) {
						heldFlags++
					}
				}
				for k, p := range want {
					if !steady(metricOf(k)) {
						require.Contains(t, got, k, "%ds: %s is not steady, yet missing", sec, k)
						if before, ok := previous[k]; ok && metricOf(k) == "nvidia.gpu.throttled" && before.value != p.value {
							throttleChanges++ // from the receiver's held-back clock events
						}
						continue
					}
					require.False(t, p.ended, "%ds: %s", sec, k)
					s, ok := last[k]
					require.True(t, ok, "%ds: %s was never sent", sec, k)
					require.Equal(t, p.value, s.value, "%ds: %s's last point (%ds) says %v, every collection says %v", sec, k, s.sent, s.value, p.value)
					require.LessOrEqual(t, sec-s.sent, 10, "%ds: %s has had no point since %ds", sec, k, s.sent)
					if !isSteadyOutput(metricOf(k)) {
						continue
					}
					allFlags++
					if before, ok := previous[k]; ok && before.value != p.value {
						changes++
					}
				}
				previous = want
				for k := range got {
					_, ok := want[k]
					require.True(t, ok, "%ds: %s is sent only when held back", sec, k)
				}
			}
			require.Positive(t, allFlags)
			assert.Less(t, heldFlags, allFlags/5, "held back: %d flag points against %d", heldFlags, allFlags)
			if scenario == "memory-leak" || scenario == "idle" {
				assert.Positive(t, changes, "the scenario raises a flag")
			}
			if scenario == "power-capped" {
				assert.Positive(t, throttleChanges, "the power cap comes and goes")
			}
		})
	}
}

// metricOf is the metric name in a seriesPoints key.
func metricOf(key string) string {
	name := key[strings.LastIndex(key[:strings.LastIndex(key, "{")], " ")+1:]
	return name[:strings.Index(name, "{")]
}

// A GPU that a pod comes to hold is a new resource: its flags are all in the collection
// where the attribution changes, and the unattributed resource's flags end there.
func TestFlagsAreSentAtOnceForANewHolder(t *testing.T) {
	pods := &fakePods{}
	h := newHarnessWithReceiver(t, "dgxh100", "steady-training", receiverEverySecond(), heldFlagsConfig(),
		func([]string, *fakeClock) sources { return sources{pods: pods} })
	h.run(25, time.Second) // between two resends (at 1, 11, 21… s)
	pods.snap = allocateEach(h.src.UUIDs(), h.clock.Now())
	md := h.step(time.Second)
	gpu0 := gpuResource(t, md, "0") // the first: end markers come after the batch's own
	require.Equal(t, "train-0", attrOf(gpu0, "k8s.pod.name"))
	for _, cause := range []string{"thermal", "power", "other"} {
		point(t, gpu0, "nvidia.gpu.throttled", "nvidia.gpu.throttle.cause", cause)
	}
	point(t, gpu0, "nvidia.gpu.idle_while_allocated")
	point(t, gpu0, "nvidia.gpu.memory.leak_suspected")
	ended := 0
	for k, p := range flagPoints(md) {
		if p.ended {
			assert.NotContains(t, k, "k8s.pod.name", "only the unattributed resource's flags end")
			ended++
		}
	}
	assert.Equal(t, 8*2, ended, "each GPU's two unattributed flags end at once")
}

// nvidia.gpu.throttled is sent every collection: avg_over_time over it (the power-capping
// alert) counts points, and throttling comes and goes within seconds. At
// steady_series_interval 0s the window flags are too.
func TestFlagsNotHeldBack(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg     *Config
		metrics []string
	}{
		"throttled":                 {heldFlagsConfig(), []string{"nvidia.gpu.throttled"}},
		"steady_series_interval 0s": {testConfig(), []string{"nvidia.gpu.idle_while_allocated", "nvidia.gpu.memory.leak_suspected"}},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarnessWithReceiver(t, "dgxh100", "steady-training", receiverEverySecond(), tc.cfg, kubeletOnly)
			for sec := 1; sec <= 15; sec++ {
				gpu := gpuResource(t, h.step(time.Second), "0")
				for _, m := range tc.metrics {
					point(t, gpu, m)
				}
			}
		})
	}
}

// A GPU missing from one of its host's batches (the receiver could not read it at all)
// has its series ended at once; its flags are all sent again in the next collection that
// has it.
func TestFlagsComeBackWithAGPUMissingFromABatch(t *testing.T) {
	h := newHarnessWithReceiver(t, "dgxh100", "steady-training", receiverEverySecond(), heldFlagsConfig(), kubeletOnly)
	h.run(25, time.Second) // between two resends (at 1, 11, 21… s)
	uuid := attrOf(gpuResource(t, h.step(time.Second), "0"), "hw.id")

	h.clock.Step(time.Second)
	md, err := h.src.Scrape()
	require.NoError(t, err)
	md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool { return attrOf(rm, "hw.id") == uuid })
	out, err := h.proc.processMetrics(context.Background(), md)
	require.NoError(t, err)
	ended := 0
	for _, p := range flagPoints(out) {
		if p.ended {
			ended++
		}
	}
	assert.Equal(t, 3, ended, "GPU 0's two flags and its pod's leak flag end with its resource")

	gpu0 := gpuResource(t, h.step(time.Second), "0")
	for _, cause := range []string{"thermal", "power", "other"} {
		point(t, gpu0, "nvidia.gpu.throttled", "nvidia.gpu.throttle.cause", cause)
	}
	point(t, gpu0, "nvidia.gpu.idle_while_allocated")
	point(t, gpu0, "nvidia.gpu.memory.leak_suspected")
}

// The receiver holds back unchanged clock-event reasons; gpu_enrich's throttle flags stand
// on the last ones it read for no longer than the receiver may hold them (10 s). A GPU
// whose reasons can no longer be read (the batch lacks them while the GPU still answers)
// loses its throttle flags then, and their series end.
func TestThrottleFlagsOutliveTheirClockEventsByTenSecondsAtMost(t *testing.T) {
	h := newHarnessWithReceiver(t, "dgxh100", "thermal-throttle", receiverEverySecond(), heldFlagsConfig(), kubeletOnly)
	ended := false
	throttled := func(md pmetric.Metrics) (float64, bool) {
		var v float64
		found := false
		for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "2", "!process.pid": ""}) {
			pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
				if cause, _ := dp.Attributes().Get("nvidia.gpu.throttle.cause"); name != "nvidia.gpu.throttled" || cause.Str() != "thermal" {
					return
				}
				if dp.Flags().NoRecordedValue() {
					ended = true
					return
				}
				v, found = pdatawalk.Value(dp), true
			})
		}
		return v, found
	}
	lastEvents := 0
	for sec := 1; sec <= 5; sec++ {
		h.clock.Step(time.Second)
		md, _ := h.src.Scrape()
		if hasScopeMetric(gpuResource(t, md, "2"), "nvidia.gpu.clock_event.active") {
			lastEvents = sec
		}
		out, err := h.proc.processMetrics(context.Background(), md)
		require.NoError(t, err)
		v, ok := throttled(out)
		require.Truef(t, ok, "%ds: GPU 2's thermal flag", sec)
		require.Equalf(t, 1.0, v, "%ds: GPU 2 runs hot", sec)
	}
	require.Positive(t, lastEvents)
	require.Less(t, lastEvents, 5, "the receiver held GPU 2's unchanged reasons back")
	for sec := 6; sec <= 25; sec++ {
		h.clock.Step(time.Second)
		md, _ := h.src.Scrape()
		dropMetric(gpuResource(t, md, "2"), "nvidia.gpu.clock_event.active") // unreadable from now on
		out, err := h.proc.processMetrics(context.Background(), md)
		require.NoError(t, err)
		v, ok := throttled(out)
		if sec < lastEvents+10 {
			require.Truef(t, ok, "%ds: held back since %ds, the last reasons still stand", sec, lastEvents)
			require.Equal(t, 1.0, v)
			continue
		}
		require.Falsef(t, ok, "%ds: no reasons since %ds, no flag", sec, lastEvents)
		if sec == lastEvents+10 {
			require.True(t, ended, "the flag's series ends")
		}
	}
}
