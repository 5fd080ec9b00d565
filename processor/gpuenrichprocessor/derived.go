package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

// Throttle cause classes from the receiver's clock-event reasons. gpu_idle and
// applications_clocks_setting are not throttling: the clocks are low because there is no
// work, or because an administrator asked for them.
var throttleCauses = map[string][]string{
	"thermal": {"sw_thermal_slowdown", "hw_thermal_slowdown"},
	"power":   {"sw_power_cap", "hw_power_brake"},
	"other":   {"hw_slowdown", "sync_boost"},
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

var bottleneckClasses = []string{bottleneckCompute, bottleneckMemory, bottleneckStarved, bottleneckIdle}

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
