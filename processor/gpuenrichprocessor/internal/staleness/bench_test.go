package staleness

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// BenchmarkEndMissing: the tracker on a steady node, every series already known: 8 GPUs,
// each a resource with a GPU's ~20 identity attributes and the receiver's default shape
// (about half the points without attributes, the others with one or two).
func BenchmarkEndMissing(b *testing.B) {
	uuids := make([]string, 8)
	for i := range uuids {
		uuids[i] = fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i)
	}
	md := gpuBatch("node-1", uuids...)
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		res := rms.At(i).Resource().Attributes()
		for a := 0; a < 18; a++ {
			res.PutStr(fmt.Sprintf("nvidia.gpu.attribute_%d", a), fmt.Sprintf("value %d of GPU %d", a, i))
		}
		ms := rms.At(i).ScopeMetrics().At(0).Metrics()
		for m := 0; m < 12; m++ {
			g := ms.AppendEmpty()
			g.SetName(fmt.Sprintf("nvidia.gpu.metric_%d", m))
			dps := g.SetEmptyGauge().DataPoints()
			for p := 0; p < 1+m%3; p++ {
				dp := dps.AppendEmpty()
				if m%3 > 0 {
					dp.Attributes().PutStr("kind", fmt.Sprintf("kind-%d", p))
				}
				dp.SetDoubleValue(1)
			}
		}
	}
	tr := New()
	ts := pcommon.Timestamp(1)
	tr.EndMissing(md, ts)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		ts++
		tr.EndMissing(md, ts)
	}
}
