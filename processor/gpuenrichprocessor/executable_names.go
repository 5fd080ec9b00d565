package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import "time"

// executableNames bounds the executable names that get series of their own on each GPU (or
// MIG instance) over a window. Without it a workload whose processes take a new name each
// collection (a name with a counter or a temporary path in it) would add a new series per
// process every collection, up to processes.max_per_gpu each time, forever: max_per_gpu
// bounds one collection, this bounds time. A name seen within the window keeps its series;
// a new name on a GPU that already has max names within the window is written "(other)"
// (its owner kept), until an old name has not been seen for a window.
type executableNames struct {
	max    int // 0: no bound
	window time.Duration
	byGPU  map[string]map[string]time.Time // GPU → name → last seen
	swept  time.Time                       // the last forgetIdle that looked
}

func newExecutableNames(maxNames int, window time.Duration) *executableNames {
	return &executableNames{max: maxNames, window: window, byGPU: map[string]map[string]time.Time{}}
}

// admit says whether name may keep its own series on gpu at now, and remembers it if so.
func (e *executableNames) admit(gpu, name string, now time.Time) bool {
	if e.max <= 0 || name == otherProcesses {
		return true
	}
	names := e.byGPU[gpu]
	if names == nil {
		names = map[string]time.Time{}
		e.byGPU[gpu] = names
	}
	if _, ok := names[name]; ok {
		names[name] = now
		return true
	}
	if len(names) >= e.max {
		for n, seen := range names {
			if now.Sub(seen) >= e.window {
				delete(names, n)
			}
		}
	}
	if len(names) >= e.max {
		return false
	}
	names[name] = now
	return true
}

// forgetIdle drops the GPUs none of whose names was seen within the window (a MIG instance
// destroyed, a GPU gone), so that memory does not grow with every reconfiguration.
func (e *executableNames) forgetIdle(now time.Time) {
	if now.Sub(e.swept) < e.window {
		return // once a window is enough: a name expires a window after it was last seen
	}
	e.swept = now
	for gpu, names := range e.byGPU {
		idle := true
		for _, seen := range names {
			if now.Sub(seen) < e.window {
				idle = false
				break
			}
		}
		if idle {
			delete(e.byGPU, gpu)
		}
	}
}
