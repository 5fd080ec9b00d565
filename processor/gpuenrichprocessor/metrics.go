package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// The processor's metrics, as documented in metadata.yaml (metrics_contract_test.go keeps
// the two in step).
const (
	metricMemoryUtilization  = "hw.gpu.memory.utilization"
	metricAttributionAge     = "nvidia.gpu.attribution.age"
	metricAttributionErrors  = "nvidia.gpu.attribution.errors"
	metricBottleneck         = "nvidia.gpu.bottleneck"
	metricAllocatable        = "nvidia.gpu.devices.allocatable"
	metricAllocated          = "nvidia.gpu.devices.allocated"
	metricIdleWhileAllocated = "nvidia.gpu.idle_while_allocated"
	metricGrowthRate         = "nvidia.gpu.memory.growth_rate"
	metricLeakSuspected      = "nvidia.gpu.memory.leak_suspected"
	metricPodEnergy          = "nvidia.gpu.pod.energy"
	metricPodMemory          = "nvidia.gpu.pod.memory.usage"
	metricPodUtilization     = "nvidia.gpu.pod.utilization"
	metricPodGrowthRate      = "nvidia.gpu.pod.memory.growth_rate"
	metricPodLeakSuspected   = "nvidia.gpu.pod.memory.leak_suspected"
	metricThrottled          = "nvidia.gpu.throttled"
)

type metricKind int

const (
	kindGauge metricKind = iota
	kindUpDown
	kindCounter
)

type metricDef struct {
	unit string
	kind metricKind
}

// metricDefs are the unit and instrument of each metric.
var metricDefs = map[string]metricDef{
	metricMemoryUtilization:  {"1", kindGauge},
	metricAttributionAge:     {"s", kindGauge},
	metricAttributionErrors:  {"{error}", kindCounter},
	metricBottleneck:         {"1", kindUpDown},
	metricAllocatable:        {"{device}", kindUpDown},
	metricAllocated:          {"{device}", kindUpDown},
	metricIdleWhileAllocated: {"1", kindUpDown},
	metricGrowthRate:         {"By/s", kindGauge},
	metricLeakSuspected:      {"1", kindUpDown},
	metricPodEnergy:          {"J", kindCounter},
	metricPodMemory:          {"By", kindUpDown},
	metricPodUtilization:     {"1", kindGauge},
	metricPodGrowthRate:      {"By/s", kindGauge},
	metricPodLeakSuspected:   {"1", kindUpDown},
	metricThrottled:          {"1", kindUpDown},
}

const scopeName = "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

// writer appends the processor's metrics to one resource, in a scope of its own.
type writer struct {
	enabled func(name string) bool
	sm      pmetric.ScopeMetrics
	start   pcommon.Timestamp
	ts      pcommon.Timestamp
	byName  map[string]pmetric.Metric
}

func newWriter(rm pmetric.ResourceMetrics, enabled func(string) bool, start, ts pcommon.Timestamp) *writer {
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName(scopeName)
	return &writer{enabled: enabled, sm: sm, start: start, ts: ts, byName: map[string]pmetric.Metric{}}
}

func (w *writer) point(name string) (pmetric.NumberDataPoint, bool) {
	if !w.enabled(name) {
		return pmetric.NumberDataPoint{}, false
	}
	m, ok := w.byName[name]
	if !ok {
		def := metricDefs[name]
		m = w.sm.Metrics().AppendEmpty()
		m.SetName(name)
		m.SetUnit(def.unit)
		switch def.kind {
		case kindGauge:
			m.SetEmptyGauge()
		default:
			s := m.SetEmptySum()
			s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			s.SetIsMonotonic(def.kind == kindCounter)
		}
		w.byName[name] = m
	}
	var dp pmetric.NumberDataPoint
	if m.Type() == pmetric.MetricTypeGauge {
		dp = m.Gauge().DataPoints().AppendEmpty()
	} else {
		dp = m.Sum().DataPoints().AppendEmpty()
	}
	dp.SetStartTimestamp(w.start)
	dp.SetTimestamp(w.ts)
	return dp, true
}

func (w *writer) double(name string, v float64, attrs ...string) {
	if dp, ok := w.point(name); ok {
		dp.SetDoubleValue(v)
		putAttrs(dp.Attributes(), attrs)
	}
}

func (w *writer) int(name string, v int64, attrs ...string) {
	if dp, ok := w.point(name); ok {
		dp.SetIntValue(v)
		putAttrs(dp.Attributes(), attrs)
	}
}

func (w *writer) flag(name string, on bool, attrs ...string) {
	v := int64(0)
	if on {
		v = 1
	}
	w.int(name, v, attrs...)
}

// counterSince writes a cumulative value whose series started at `start`.
func (w *writer) counterSince(name string, v float64, start pcommon.Timestamp) {
	if dp, ok := w.point(name); ok {
		dp.SetDoubleValue(v)
		dp.SetStartTimestamp(start)
	}
}

func putAttrs(m pcommon.Map, kv []string) {
	for i := 0; i+1 < len(kv); i += 2 {
		m.PutStr(kv[i], kv[i+1])
	}
}
