// Package pdatawalk walks the number data points of OpenTelemetry metrics — what every GPU
// component here writes and reads (gauges and sums) — so the processor, the testbed's
// simulated agents and the tests read pdata one way.
package pdatawalk // import "github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"

import "go.opentelemetry.io/collector/pdata/pmetric"

// Points returns a gauge's or sum's data points; ok is false for other metric types.
func Points(m pmetric.Metric) (pmetric.NumberDataPointSlice, bool) {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints(), true
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints(), true
	}
	return pmetric.NumberDataPointSlice{}, false
}

// EachMetric calls f for every metric of every scope of a resource.
func EachMetric(rm pmetric.ResourceMetrics, f func(pmetric.Metric)) {
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			f(ms.At(j))
		}
	}
}

// EachPoint calls f for every number data point of every metric of a resource.
func EachPoint(rm pmetric.ResourceMetrics, f func(name string, dp pmetric.NumberDataPoint)) {
	EachMetric(rm, func(m pmetric.Metric) {
		EachPointOf(m, func(dp pmetric.NumberDataPoint) { f(m.Name(), dp) })
	})
}

// EachPointOf calls f for every data point of a gauge or sum.
func EachPointOf(m pmetric.Metric, f func(pmetric.NumberDataPoint)) {
	dps, ok := Points(m)
	if !ok {
		return
	}
	for i := 0; i < dps.Len(); i++ {
		f(dps.At(i))
	}
}

// Value is a data point's value as a float, whatever its type.
func Value(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

// SeriesPerMetric counts a resource's series by metric name: one per data point that
// holds a value (an end-of-series marker, flagged NoRecordedValue, is none).
func SeriesPerMetric(rm pmetric.ResourceMetrics) map[string]int {
	out := map[string]int{}
	EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
		if !dp.Flags().NoRecordedValue() {
			out[name]++
		}
	})
	return out
}

// Total sums SeriesPerMetric's counts.
func Total(perMetric map[string]int) int {
	n := 0
	for _, v := range perMetric {
		n += v
	}
	return n
}
