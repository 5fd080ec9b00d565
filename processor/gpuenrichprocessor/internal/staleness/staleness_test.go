package staleness

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// gpuBatch is one scrape of host with a GPU resource per uuid: a utilization gauge per
// task and an energy counter.
func gpuBatch(host string, uuids ...string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for _, u := range uuids {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("host.name", host)
		rm.Resource().Attributes().PutStr("hw.id", u)
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName("gpu")
		util := sm.Metrics().AppendEmpty()
		util.SetName("hw.gpu.utilization")
		util.SetUnit("1")
		gauge := util.SetEmptyGauge()
		for _, task := range []string{"general", "encoder"} {
			dp := gauge.DataPoints().AppendEmpty()
			dp.Attributes().PutStr("hw.gpu.task", task)
			dp.SetDoubleValue(0.5)
		}
		energy := sm.Metrics().AppendEmpty()
		energy.SetName("hw.energy")
		energy.SetUnit("J")
		sum := energy.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		sum.DataPoints().AppendEmpty().SetDoubleValue(1000)
	}
	return md
}

// ended lists "hw.id/metric/task" of the end markers in md.
func ended(t *testing.T, md pmetric.Metrics) []string {
	t.Helper()
	var out []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		id, _ := rm.Resource().Attributes().Get("hw.id")
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				var dps pmetric.NumberDataPointSlice
				if m.Type() == pmetric.MetricTypeSum {
					dps = m.Sum().DataPoints()
					assert.True(t, m.Sum().IsMonotonic(), "the marker keeps the counter's shape")
				} else {
					dps = m.Gauge().DataPoints()
				}
				for l := 0; l < dps.Len(); l++ {
					dp := dps.At(l)
					if !dp.Flags().NoRecordedValue() {
						continue
					}
					task := ""
					if v, ok := dp.Attributes().Get("hw.gpu.task"); ok {
						task = v.AsString()
					}
					assert.Equal(t, pcommon.Timestamp(42), dp.Timestamp())
					out = append(out, id.AsString()+"/"+m.Name()+"/"+task)
				}
			}
		}
	}
	return out
}

func TestSeriesOfAGoneGPUEndOnce(t *testing.T) {
	tr := New(nil, 0)
	first := gpuBatch("node-1", "GPU-A", "GPU-B")
	tr.EndMissing(first, 42)
	assert.Empty(t, ended(t, first), "nothing to compare the first batch with")

	lost := gpuBatch("node-1", "GPU-A")
	tr.EndMissing(lost, 42)
	assert.ElementsMatch(t, []string{"GPU-B/hw.gpu.utilization/general", "GPU-B/hw.gpu.utilization/encoder", "GPU-B/hw.energy/"}, ended(t, lost))

	again := gpuBatch("node-1", "GPU-A")
	tr.EndMissing(again, 42)
	assert.Empty(t, ended(t, again), "an ended series is ended once")

	back := gpuBatch("node-1", "GPU-A", "GPU-B")
	tr.EndMissing(back, 42)
	assert.Empty(t, ended(t, back), "a GPU that comes back simply continues")
	gone := gpuBatch("node-1", "GPU-B")
	tr.EndMissing(gone, 42)
	assert.Len(t, ended(t, gone), 3)
}

func TestOriginsAreComparedWithThemselves(t *testing.T) {
	tr := New(nil, 0)
	tr.EndMissing(gpuBatch("node-1", "GPU-A"), 42)
	tr.EndMissing(gpuBatch("node-2", "GPU-X"), 42)
	md := gpuBatch("node-2", "GPU-X")
	tr.EndMissing(md, 42)
	assert.Empty(t, ended(t, md), "node-2's batch says nothing about node-1's series")
	md = gpuBatch("node-1")
	require.Zero(t, md.ResourceMetrics().Len())
	md = gpuBatch("node-1", "GPU-B")
	tr.EndMissing(md, 42)
	assert.Len(t, ended(t, md), 3, "node-1's own next batch ends GPU-A")
}

// A series whose attributes change (a process gets its pod's name) is a new series: the
// old label set ends.
func TestChangedAttributesEndTheOldSeries(t *testing.T) {
	tr := New(nil, 0)
	tr.EndMissing(gpuBatch("node-1", "GPU-A"), 42)
	md := gpuBatch("node-1", "GPU-A")
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("k8s.pod.name", "train-0")
	tr.EndMissing(md, 42)
	assert.Len(t, ended(t, md), 3)
}

// A producer may write the same attributes in another order: it is the same series, and
// must not be ended (an end marker would blank a series that is still reporting).
func TestAttributeOrderDoesNotMakeANewSeries(t *testing.T) {
	tr := New(nil, 0)
	first := gpuBatch("node-1", "GPU-A")
	res := first.ResourceMetrics().At(0).Resource().Attributes()
	res.PutStr("k8s.pod.name", "train-0")
	res.PutInt("nvidia.gpu.index", 3)
	tr.EndMissing(first, 42)

	reordered := pmetric.NewMetrics()
	rm := reordered.ResourceMetrics().AppendEmpty()
	first.ResourceMetrics().At(0).ScopeMetrics().CopyTo(rm.ScopeMetrics())
	attrs := rm.Resource().Attributes()
	attrs.PutInt("nvidia.gpu.index", 3)
	attrs.PutStr("k8s.pod.name", "train-0")
	attrs.PutStr("hw.id", "GPU-A")
	attrs.PutStr("host.name", "node-1")
	tr.EndMissing(reordered, 42)
	assert.Empty(t, ended(t, reordered))
}

// The hash writes each value with its type, as contrib's pdatautil.Hash did before it: in
// OTLP the int 3 and the string "3" are different values, so the int's series ends.
func TestAValueOfAnotherTypeIsAnotherSeries(t *testing.T) {
	tr := New(nil, 0)
	md := gpuBatch("node-1", "GPU-A")
	md.ResourceMetrics().At(0).Resource().Attributes().PutInt("nvidia.gpu.index", 3)
	tr.EndMissing(md, 42)
	md = gpuBatch("node-1", "GPU-A")
	md.ResourceMetrics().At(0).Resource().Attributes().PutStr("nvidia.gpu.index", "3")
	tr.EndMissing(md, 42)
	assert.Len(t, ended(t, md), 3)
}

// A batch may carry a series twice (two receivers of one host, a resource split across
// ResourceMetrics): counted once, so the twice-seen series cannot stand in for a missing one.
func TestASeriesTwiceInABatchDoesNotHideAMissingOne(t *testing.T) {
	tr := New(nil, 0)
	tr.EndMissing(gpuBatch("node-1", "GPU-A", "GPU-B"), 42)
	md := gpuBatch("node-1", "GPU-A", "GPU-A")
	tr.EndMissing(md, 42)
	assert.ElementsMatch(t, []string{"GPU-B/hw.gpu.utilization/general", "GPU-B/hw.gpu.utilization/encoder", "GPU-B/hw.energy/"}, ended(t, md))
}

// steadyBatch is one scrape at sec seconds of host's GPUs: hw.status always, the steady
// hw.errors only when withErrors.
func steadyBatch(sec int, withErrors bool, uuids ...string) pmetric.Metrics {
	ts := pcommon.Timestamp(time.Duration(sec) * time.Second)
	md := pmetric.NewMetrics()
	for _, u := range uuids {
		rm := md.ResourceMetrics().AppendEmpty()
		rm.Resource().Attributes().PutStr("host.name", "node-1")
		rm.Resource().Attributes().PutStr("hw.id", u)
		ms := rm.ScopeMetrics().AppendEmpty().Metrics()
		status := ms.AppendEmpty()
		status.SetName("hw.status")
		dp := status.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(1)
		if withErrors {
			errs := ms.AppendEmpty()
			errs.SetName("hw.errors")
			sum := errs.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			dp := sum.DataPoints().AppendEmpty()
			dp.SetTimestamp(ts)
			dp.SetIntValue(0)
		}
	}
	return md
}

// endedNames lists "hw.id/metric" of the end markers in md.
func endedNames(md pmetric.Metrics) []string {
	var out []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		id, _ := rm.Resource().Attributes().Get("hw.id")
		ms := rm.ScopeMetrics().At(0).Metrics()
		for k := 0; k < ms.Len(); k++ {
			m := ms.At(k)
			var dps pmetric.NumberDataPointSlice
			if m.Type() == pmetric.MetricTypeSum {
				dps = m.Sum().DataPoints()
			} else {
				dps = m.Gauge().DataPoints()
			}
			for l := 0; l < dps.Len(); l++ {
				if dps.At(l).Flags().NoRecordedValue() {
					out = append(out, id.AsString()+"/"+m.Name())
				}
			}
		}
	}
	return out
}

func TestSteadySeriesSkipBatchesForTheirGraceOnly(t *testing.T) {
	tr := New(func(metric string) bool { return metric == "hw.errors" }, 10*time.Second)
	tr.EndMissing(steadyBatch(0, true, "GPU-A", "GPU-B"), 0)
	for sec := 1; sec < 10; sec++ {
		md := steadyBatch(sec, false, "GPU-A", "GPU-B")
		tr.EndMissing(md, pcommon.Timestamp(time.Duration(sec)*time.Second))
		assert.Emptyf(t, endedNames(md), "%d s after its last point a steady series is still alive", sec)
	}
	md := steadyBatch(10, true, "GPU-A")
	tr.EndMissing(md, pcommon.Timestamp(10*time.Second))
	assert.ElementsMatch(t, []string{"GPU-B/hw.status", "GPU-B/hw.errors"}, endedNames(md), "a GPU that is gone ends its steady series at once too")

	md = steadyBatch(20, false, "GPU-A")
	tr.EndMissing(md, pcommon.Timestamp(20*time.Second))
	assert.Equal(t, []string{"GPU-A/hw.errors"}, endedNames(md), "10 s without a point ends a steady series")

	tr.EndMissing(steadyBatch(21, true, "GPU-A"), pcommon.Timestamp(21*time.Second))
	md = steadyBatch(22, true, "GPU-A")
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().RemoveIf(func(m pmetric.Metric) bool { return m.Name() == "hw.status" })
	tr.EndMissing(md, pcommon.Timestamp(22*time.Second))
	assert.Equal(t, []string{"GPU-A/hw.status"}, endedNames(md), "other series end at the first batch without them")
}
