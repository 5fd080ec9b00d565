package remotewriteexporter

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// gpuBatch is one GPU's resource as the gpu receiver writes it, with a gauge in bytes, a
// cumulative counter and a point attribute.
func gpuBatch(uuid string, ts time.Time, used float64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	res := rm.Resource().Attributes()
	res.PutStr("host.name", "node-1")
	res.PutStr("hw.id", uuid)
	res.PutStr("hw.model", "NVIDIA H100 80GB HBM3")
	res.PutInt("nvidia.gpu.index", 3)
	res.PutStr("hw.type", "gpu")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()

	usage := ms.AppendEmpty()
	usage.SetName("hw.gpu.memory.usage")
	usage.SetUnit("By")
	dp := usage.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetDoubleValue(used)

	energy := ms.AppendEmpty()
	energy.SetName("hw.errors")
	energy.SetUnit("{error}")
	sum := energy.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, kind := range []string{"corrected", "uncorrected"} {
		p := sum.DataPoints().AppendEmpty()
		p.SetTimestamp(pcommon.NewTimestampFromTime(ts))
		p.SetIntValue(7)
		p.Attributes().PutStr("error.type", kind)
	}
	return md
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.ClientConfig.Endpoint = "http://127.0.0.1:9/api/v1/write"
	cfg.TargetInfo.Enabled = false
	cfg.ResourceConstantLabels.Included = []string{"host.name", "hw.*", "nvidia.*"}
	cfg.ResourceConstantLabels.Excluded = []string{"hw.type"}
	return cfg
}

// translated translates md and decodes what the batch would send, as Prometheus decodes it.
func translated(t testing.TB, tr *translator, md pmetric.Metrics) ([]prompb.TimeSeries, error) {
	t.Helper()
	batch, _, err := tr.translate(context.Background(), md)
	return sent(t, batch), err
}

// sent decodes a batch's WriteRequest.
func sent(t testing.TB, batch *encodedBatch) []prompb.TimeSeries {
	t.Helper()
	if batch.len() == 0 {
		return nil
	}
	var wr prompb.WriteRequest
	require.NoError(t, wr.Unmarshal(batch.request(0, batch.len())))
	require.Len(t, wr.Timeseries, batch.len())
	return wr.Timeseries
}

// byName indexes a batch's series by their labels in Prometheus's text form.
func byName(series []prompb.TimeSeries) map[string]prompb.TimeSeries {
	out := map[string]prompb.TimeSeries{}
	for _, s := range series {
		b := labels.NewScratchBuilder(len(s.Labels))
		for _, l := range s.Labels {
			b.Add(l.Name, l.Value)
		}
		b.Sort()
		out[b.Labels().String()] = s
	}
	return out
}

func TestSeriesAreNamedAndLabelledAsPrometheusOTLPEndpointNamesThem(t *testing.T) {
	ts := time.Unix(1_700_000_000, 0)
	tr := newTranslator(testConfig(), time.Now)
	series, err := translated(t, tr, gpuBatch("GPU-1", ts, 1<<30))
	require.NoError(t, err)
	got := byName(series)

	gpu := `host_name="node-1", hw_id="GPU-1", hw_model="NVIDIA H100 80GB HBM3", nvidia_gpu_index="3"`
	want := []string{
		`{__name__="hw_gpu_memory_usage_bytes", ` + gpu + `}`,
		`{__name__="hw_errors_total", error_type="corrected", ` + gpu + `}`,
		`{__name__="hw_errors_total", error_type="uncorrected", ` + gpu + `}`,
	}
	require.Len(t, got, len(want), "series: %v", got)
	for _, name := range want {
		s, ok := got[name]
		require.True(t, ok, "missing %s in %v", name, got)
		require.Len(t, s.Samples, 1)
		assert.Equal(t, ts.UnixMilli(), s.Samples[0].Timestamp)
	}
	assert.Equal(t, float64(1<<30), got[want[0]].Samples[0].Value)
	assert.Equal(t, 7.0, got[want[1]].Samples[0].Value)
}

func TestResourceAttributesOutsideTheIncludedPatternsAreNotLabels(t *testing.T) {
	cfg := testConfig()
	cfg.ResourceConstantLabels.Included = []string{"hw.id"}
	cfg.ResourceConstantLabels.Excluded = nil
	series, err := translated(t, newTranslator(cfg, time.Now), gpuBatch("GPU-1", time.Now(), 1))
	require.NoError(t, err)
	for _, s := range series {
		var names []string
		for _, l := range s.Labels {
			names = append(names, l.Name)
		}
		assert.NotContains(t, names, "host_name")
		assert.NotContains(t, names, "hw_type")
		assert.Contains(t, names, "hw_id")
	}
}

func TestExternalLabelsAreAddedToEverySeries(t *testing.T) {
	cfg := testConfig()
	cfg.ExternalLabels = map[string]string{"cluster": "gpu-east"}
	series, err := translated(t, newTranslator(cfg, time.Now), gpuBatch("GPU-1", time.Now(), 1))
	require.NoError(t, err)
	require.NotEmpty(t, series)
	for _, s := range series {
		assert.Contains(t, s.Labels, prompb.Label{Name: "cluster", Value: "gpu-east"})
	}
}

// gpu_enrich ends a series that lost its GPU or process with a point flagged "no
// recorded value"; Prometheus must get its staleness marker, not a number.
func TestAnEndedSeriesIsSentAsAStalenessMarker(t *testing.T) {
	md := gpuBatch("GPU-1", time.Now(), 1)
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0)
	dp.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	series, err := translated(t, newTranslator(testConfig(), time.Now), md)
	require.NoError(t, err)
	var stale int
	for _, s := range series {
		if value.IsStaleNaN(s.Samples[0].Value) {
			stale++
		} else {
			assert.False(t, math.IsNaN(s.Samples[0].Value))
		}
	}
	assert.Equal(t, 1, stale)
}

func TestASteadySeriesReusesItsLabelSet(t *testing.T) {
	tr := newTranslator(testConfig(), time.Now)
	first, _, err := tr.translate(context.Background(), gpuBatch("GPU-1", time.Now(), 1))
	require.NoError(t, err)
	firstLabels := slices.Clone(first.labels)
	second, _, err := tr.translate(context.Background(), gpuBatch("GPU-1", time.Now().Add(time.Second), 2))
	require.NoError(t, err)
	require.Len(t, second.labels, len(firstLabels))
	for i := range firstLabels {
		assert.Same(t, &firstLabels[i][0], &second.labels[i][0], "series %d's labels were encoded again", i)
	}
}

func TestLabelSetsOfEndedSeriesAreForgotten(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	tr := newTranslator(testConfig(), clock)
	_, err := translated(t, tr, gpuBatch("GPU-gone", now, 1))
	require.NoError(t, err)
	require.Equal(t, 3, tr.labels.len())

	// Another GPU only, for two generations: the first GPU's label sets go.
	for range 3 {
		now = now.Add(labelCacheGeneration)
		_, err = translated(t, tr, gpuBatch("GPU-live", now, 1))
		require.NoError(t, err)
	}
	assert.Equal(t, 3, tr.labels.len(), "only GPU-live's three series stay")
	for _, encoded := range tr.labels.current {
		var s prompb.TimeSeries
		require.NoError(t, s.Unmarshal(encoded))
		assert.Contains(t, s.Labels, prompb.Label{Name: "hw_id", Value: "GPU-live"})
	}
}

// A GPU handed from one pod to the next keeps its resource but changes its attribution:
// its series must carry the new pod from the first batch on, never the remembered one.
func TestAChangedAttributeIsNeverAnsweredFromMemory(t *testing.T) {
	tr := newTranslator(testConfig(), time.Now)
	cfgPods := func(pod string) pmetric.Metrics {
		md := gpuBatch("GPU-1", time.Now(), 1)
		md.ResourceMetrics().At(0).Resource().Attributes().PutStr("k8s.pod.name", pod)
		return md
	}
	tr.resources = newResourceLabelSelector(ResourceLabelsConfig{Included: []string{"hw.id", "k8s.*"}})
	for _, pod := range []string{"train-a", "train-b", "train-a"} {
		series, err := translated(t, tr, cfgPods(pod))
		require.NoError(t, err)
		require.Len(t, series, 3)
		for _, s := range series {
			assert.Contains(t, s.Labels, prompb.Label{Name: "k8s_pod_name", Value: pod})
		}
	}

	// The same for a point attribute, a metric's unit and its monotonicity, once the
	// series are remembered.
	_, err := translated(t, tr, gpuBatch("GPU-1", time.Now(), 1))
	require.NoError(t, err)
	md := gpuBatch("GPU-1", time.Now(), 1)
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	ms.At(0).SetUnit("%")
	ms.At(1).Sum().SetIsMonotonic(false)
	ms.At(1).Sum().DataPoints().At(0).Attributes().PutStr("error.type", "fatal")
	series, err := translated(t, tr, md)
	require.NoError(t, err)
	names := map[string]bool{}
	for name := range byName(series) {
		names[name] = true
	}
	assert.Len(t, names, 3)
	for name := range names {
		assert.NotContains(t, name, "_bytes", "the unit changed")
		assert.NotContains(t, name, "_total", "no longer monotonic")
	}
	assert.Contains(t, fmt.Sprint(names), `error_type="fatal"`)
}

// mixedBatch is two GPUs' series, a histogram, a delta sum (which the translator refuses)
// and, when v > 2, a staleness marker.
func mixedBatch(ts time.Time, v float64) pmetric.Metrics {
	md := gpuBatch("GPU-1", ts, v)
	gpuBatch("GPU-2", ts, 2*v).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	ms := md.ResourceMetrics().At(1).ScopeMetrics().At(0).Metrics()
	h := ms.AppendEmpty()
	h.SetName("nvidia.gpu.kernel.duration")
	h.SetUnit("s")
	hist := h.SetEmptyHistogram()
	hist.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hp := hist.DataPoints().AppendEmpty()
	hp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	hp.SetCount(3)
	hp.SetSum(v)
	hp.ExplicitBounds().FromRaw([]float64{0.1, 1})
	hp.BucketCounts().FromRaw([]uint64{1, 1, 1})
	delta := ms.AppendEmpty()
	delta.SetName("nvidia.gpu.delta")
	d := delta.SetEmptySum()
	d.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	d.SetIsMonotonic(true)
	dp := d.DataPoints().AppendEmpty()
	dp.SetTimestamp(pcommon.NewTimestampFromTime(ts))
	dp.SetIntValue(1)
	stale := ms.At(0).Gauge().DataPoints().At(0)
	stale.SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(v > 2))
	return md
}

// What is answered from memory equals what Prometheus's translator gives, for every
// kind of metric the translator takes, batch after batch.
func TestRememberedSeriesEqualTheTranslatorsOwn(t *testing.T) {
	batch := mixedBatch
	type sample struct {
		ts int64
		v  string
	}
	flatten := func(series []prompb.TimeSeries) map[string]sample {
		out := map[string]sample{}
		for name, s := range byName(series) {
			if len(s.Histograms) > 0 {
				out[name] = sample{s.Histograms[0].Timestamp, fmt.Sprint(s.Histograms[0])}
				continue
			}
			out[name] = sample{s.Samples[0].Timestamp, fmt.Sprintf("%x", math.Float64bits(s.Samples[0].Value))}
		}
		return out
	}
	remembering := newTranslator(testConfig(), time.Now)
	plain := newTranslator(testConfig(), time.Now)
	plain.memoize = false
	start := time.Unix(1_700_000_000, 0)
	for i := range 4 {
		ts, v := start.Add(time.Duration(i)*time.Second), float64(i)
		got, errGot := translated(t, remembering, batch(ts, v))
		want, errWant := translated(t, plain, batch(ts, v))
		assert.Equal(t, errWant != nil, errGot != nil, "the delta sum is refused by both: %v / %v", errWant, errGot)
		assert.Equal(t, flatten(want), flatten(got), "batch %d", i)
		assert.Len(t, got, 6+5, "three series per GPU, the histogram's five (three buckets, sum, count)")
	}
	assert.Equal(t, 6, remembering.labels.len(), "the number series are remembered, not the histogram's")
}

// On every committed scrape of the simulated systems (default and full sets, MIG,
// processes, lost GPUs), the remembered label sets give what the translator gives.
func TestRememberedSeriesEqualTheTranslatorsOwnOnEveryScenario(t *testing.T) {
	for _, set := range []string{"default", "full"} {
		for _, name := range []string{"dgxh100-shared-gpu", "dgxh100-mig", "dgxa100-mig", "dgxh100-gpu-lost", "dgxh100-churn", "dgxb200-steady-training"} {
			t.Run(set+"/"+name, func(t *testing.T) {
				md := goldenScrape(t, set, name)
				cfg := testConfig()
				cfg.ResourceConstantLabels.Included = []string{"host.name", "hw.*", "nvidia.*", "process.*", "k8s.*", "container.id", "slurm.*"}
				cfg.ResourceConstantLabels.Excluded = nil
				remembering, plain := newTranslator(cfg, time.Now), newTranslator(cfg, time.Now)
				plain.memoize = false
				want, err := translated(t, plain, md)
				require.NoError(t, err)
				wantSeries := byName(want)
				for range 2 { // the first translation fills the memory, the second reads it
					got, err := translated(t, remembering, md)
					require.NoError(t, err)
					require.Equal(t, len(want), len(got))
					gotSeries := byName(got)
					require.Equal(t, len(wantSeries), len(gotSeries))
					for name, w := range wantSeries {
						g, ok := gotSeries[name]
						require.True(t, ok, "missing %s", name)
						require.Equal(t, w.Samples, g.Samples, name)
					}
				}
				require.Equal(t, len(want), remembering.labels.len())
			})
		}
	}
}

// A batch's encoding is prompb's own Marshal of the same WriteRequest, byte for byte, for
// series answered from memory and through the translator alike; any split into requests
// is the encoding of the batch's series in that range.
func TestTheEncodingIsPrompbsOwn(t *testing.T) {
	batches := map[string]pmetric.Metrics{"mixed": mixedBatch(time.Unix(1_700_000_000, 0), 3)}
	for _, name := range []string{"dgxh100-shared-gpu", "dgxh100-mig", "dgxh100-gpu-lost"} {
		batches[name] = goldenScrape(t, "default", name)
	}
	zero := gpuBatch("GPU-0", time.Unix(0, 0), 0) // a zero value and timestamp: fields prompb leaves out
	batches["zeros"] = zero
	for name, md := range batches {
		for _, memoize := range []bool{true, false} {
			tr := newTranslator(testConfig(), time.Now)
			tr.memoize = memoize
			for round := range 2 { // the second round answers from memory
				batch, _, _ := tr.translate(context.Background(), md)
				series := sent(t, batch)
				want, err := (&prompb.WriteRequest{Timeseries: series}).Marshal()
				require.NoError(t, err)
				require.Equal(t, want, batch.request(0, batch.len()), "%s, memoize %v, round %d", name, memoize, round)
				for _, per := range []int{1, 7} {
					for from := 0; from < batch.len(); from += per {
						to := min(batch.len(), from+per)
						part, err := (&prompb.WriteRequest{Timeseries: series[from:to]}).Marshal()
						require.NoError(t, err)
						require.Equal(t, part, batch.request(from, to))
					}
				}
			}
		}
	}
}
