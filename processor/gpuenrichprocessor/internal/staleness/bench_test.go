package staleness

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// BenchmarkEndMissing: the tracker on a steady 8-GPU node, every series already known, in
// the shape of the receiver's default set on an H100: 40 points per GPU, 26 of them
// without attributes, and 12 resource attributes per GPU (the receiver's 7 and the pod's
// that attribution adds).
func BenchmarkEndMissing(b *testing.B) {
	uuids := make([]string, 8)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i)
	}
	md := gpuBatch("node-1", uuids...) // 3 points per GPU, 1 without attributes
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		res := rms.At(i).Resource().Attributes()
		for a := 0; a < 10; a++ {
			res.PutStr(fmt.Sprintf("attribute_%d", a), fmt.Sprintf("value %d of GPU %d", a, i))
		}
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for m := 0; m < 25; m++ {
			g := ms.AppendEmpty()
			g.SetName(fmt.Sprintf("nvidia.gpu.metric_%d", m))
			g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
		}
		for m := 0; m < 3; m++ {
			g := ms.AppendEmpty()
			g.SetName(fmt.Sprintf("nvidia.gpu.metric_by_kind_%d", m))
			dps := g.SetEmptyGauge().DataPoints()
			for p := 0; p < 4; p++ {
				dp := dps.AppendEmpty()
				dp.Attributes().PutStr("kind", fmt.Sprintf("kind-%d", p))
				dp.SetDoubleValue(1)
			}
		}
	}
	tr := New(nil, 0)
	ts := pcommon.Timestamp(1)
	tr.EndMissing(md, ts)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ts++
		tr.EndMissing(md, ts)
	}
}
