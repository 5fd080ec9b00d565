package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/tracking"
)

// deriveGPU appends the derived per-GPU (or per-MIG-instance) signals to its resource.
// Its window flags go through flags, which holds back unchanged ones (steady.go).
func (p *gpuEnrichProcessor) deriveGPU(g *gpuView, ts pcommon.Timestamp, flags *gpuOutputs) {
	defer p.emitInto(g.rm)
	if g.hasMem && g.hasLimit && g.memLimit > 0 {
		p.mb.RecordHwGpuMemoryUtilizationDataPoint(ts, g.memUsed/g.memLimit)
	}
	if causes, ok := throttled(g.clockEvents); ok {
		for _, cause := range []metadata.AttributeNvidiaGpuThrottleCause{
			metadata.AttributeNvidiaGpuThrottleCauseThermal,
			metadata.AttributeNvidiaGpuThrottleCausePower,
			metadata.AttributeNvidiaGpuThrottleCauseOther,
		} {
			p.mb.RecordNvidiaGpuThrottledDataPoint(ts, asInt(causes[cause.String()]), cause)
		}
	}
	if !p.cfg.Throttle.KeepClockEvents {
		dropMetric(g.rm, metricClockEvent)
	}
	if class, ok := bottleneck(g, p.cfg.Idle.Threshold, p.cfg.Bottleneck.Saturation); ok {
		// One series, the current class: a class change ends the previous class's series
		// (end_series) instead of keeping three zeros per GPU.
		p.mb.RecordNvidiaGpuBottleneckDataPoint(ts, 1, metadata.MapAttributeNvidiaGpuBottleneckClass[class])
	}
	util, hasUtil := g.util, g.hasUtil
	if !hasUtil && g.hasSM {
		util, hasUtil = g.smActive, true
	}
	if !g.hasMem && !hasUtil {
		return
	}
	samples := p.tracker.Observe(tracking.GPUKey(g.uuid), tracking.Sample{T: ts.AsTime(), Util: util, HasUtil: hasUtil, Memory: g.memUsed})
	if hasUtil {
		idle := asInt(p.allocated(g) && tracking.IdleFor(samples, p.cfg.Idle.Threshold, p.cfg.Idle.Window))
		if flags.send(outputKey{metric: metadata.MetricsInfo.NvidiaGpuIdleWhileAllocated.Name}, idle) {
			p.mb.RecordNvidiaGpuIdleWhileAllocatedDataPoint(ts, idle)
		}
	}
	if g.hasMem && g.hasLimit {
		p.mb.RecordNvidiaGpuMemoryGrowthRateDataPoint(ts, tracking.Slope(tracking.Within(samples, p.cfg.Leak.Window)))
		leak := asInt(tracking.LeakSuspected(samples, g.memLimit, p.leakRule()))
		if flags.send(outputKey{metric: metadata.MetricsInfo.NvidiaGpuMemoryLeakSuspected.Name}, leak) {
			p.mb.RecordNvidiaGpuMemoryLeakSuspectedDataPoint(ts, leak)
		}
	}
}

// allocated: a running pod holds the GPU (kubelet: device plugin or DRA claim), or a
// process whose own cgroup puts it in a pod runs on it (the kubelet may be unreachable).
func (p *gpuEnrichProcessor) allocated(g *gpuView) bool {
	if len(g.holders) > 0 {
		return true
	}
	for _, proc := range g.processes {
		if proc.owner.pod.known() && proc.owner.method == methodCgroup {
			return true
		}
	}
	return false
}

func (p *gpuEnrichProcessor) leakRule() tracking.LeakRule {
	return tracking.LeakRule{Window: p.cfg.Leak.Window, MinGrowth: p.cfg.Leak.MinGrowth, UtilizationTolerance: p.cfg.Leak.UtilizationTolerance}
}

// dropMetric removes a metric from a resource, in every scope.
func dropMetric(rm pmetric.ResourceMetrics, name string) {
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		rm.ScopeMetrics().At(i).Metrics().RemoveIf(func(m pmetric.Metric) bool { return m.Name() == name })
	}
}

func asInt(on bool) int64 {
	if on {
		return 1
	}
	return 0
}

// Throttle cause classes from the receiver's clock-event reasons. gpu_idle and
// applications_clocks_setting are not throttling: the clocks are low because there is no
// work, or because an administrator asked for them.
var throttleCauses = map[string][]string{
	"thermal": {gpuschema.NvidiaGpuClockEventReasonSwThermalSlowdown, gpuschema.NvidiaGpuClockEventReasonHwThermalSlowdown},
	"power":   {gpuschema.NvidiaGpuClockEventReasonSwPowerCap, gpuschema.NvidiaGpuClockEventReasonHwPowerBrake},
	"other":   {gpuschema.NvidiaGpuClockEventReasonHwSlowdown, gpuschema.NvidiaGpuClockEventReasonSyncBoost},
}

// throttled returns, per cause class, whether any of its reasons is active. ok is false
// when the GPU reported no clock-event reasons at all.
func throttled(events map[string]bool) (map[string]bool, bool) {
	if len(events) == 0 {
		return nil, false
	}
	out := make(map[string]bool, len(throttleCauses))
	for cause, reasons := range throttleCauses {
		for _, r := range reasons {
			if events[r] {
				out[cause] = true
			}
		}
	}
	return out, true
}

// Bottleneck classes.
const (
	bottleneckIdle    = "idle"
	bottleneckMemory  = "memory_bound"
	bottleneckCompute = "compute_bound"
	bottleneckStarved = "starved"
)

// bottleneck classifies a GPU (documented in metadata.yaml):
//   - idle: utilization under the idle threshold;
//   - memory_bound: DRAM activity ≥ saturation and ≥ SM activity;
//   - compute_bound: SM activity ≥ saturation;
//   - starved: busy, but neither SMs nor memory saturated — it waits on input, the CPU or
//     communication.
//
// SM and DRAM activity come from GPM where the GPU has it; elsewhere the utilization and
// the memory-copy utilization stand in for them. ok is false without utilization.
func bottleneck(g *gpuView, idleThreshold, saturation float64) (string, bool) {
	util, ok := g.util, g.hasUtil
	if !ok && g.hasSM {
		util, ok = g.smActive, true
	}
	if !ok {
		return "", false
	}
	sm, dram := util, 0.0
	if g.hasSM {
		sm = g.smActive
	}
	if g.hasDRAM {
		dram = g.dramActive
	} else if g.hasMemCopy {
		dram = g.memCopy
	}
	switch {
	case util < idleThreshold:
		return bottleneckIdle, true
	case dram >= saturation && dram >= sm:
		return bottleneckMemory, true
	case sm >= saturation:
		return bottleneckCompute, true
	default:
		return bottleneckStarved, true
	}
}
