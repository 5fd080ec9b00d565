package pdatawalk

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

func TestEachPointVisitsGaugesAndSumsOnly(t *testing.T) {
	rm := pmetric.NewResourceMetrics()
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("g")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(0.5)
	s := ms.AppendEmpty()
	s.SetName("s")
	s.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(3)
	h := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	h.SetName("h")
	h.SetEmptyHistogram().DataPoints().AppendEmpty()
	got := map[string]float64{}
	EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) { got[name] = Value(dp) })
	if len(got) != 2 || got["g"] != 0.5 || got["s"] != 3 {
		t.Fatalf("got %v, want g=0.5 and s=3 only", got)
	}
}
