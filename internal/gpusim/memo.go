package gpusim

import (
	"math"
	"sync"
)

// memoSeconds is how many whole seconds of readings each GPU's memo keeps: a collection
// asks for the seconds since the previous one (utilization and process samples, energy,
// GPM averages), a handful at the shipped 10 s.
const memoSeconds = 16

// scenarioMemo computes each GPU's reading for an instant once. A scenario is a pure
// function of (GPU, time), and one collection asks for the same instants many times:
// every whole second behind the samples, the energy counter and the GPM averages, and,
// under a test's clock, every call at the collection's instant. The simulator stands in
// for a driver whose reads cost the driver, not the agent, so its own CPU should not
// weigh on the agent it feeds when the agent is measured (docs/benchmarks.md). Answers
// are the scenario's own, to the bit: only identical instants are shared.
type scenarioMemo struct {
	compute scenario
	machine *machine // the simulator's, the only one whose readings are kept
	gpus    []gpuMemo
}

// gpuMemo is one GPU's memo. Its mutex serialises the GPU's evaluations: the receiver's
// collection and its XID watcher ask from different goroutines.
type gpuMemo struct {
	mu      sync.Mutex
	seconds [memoSeconds]memoEntry // whole seconds, by second modulo memoSeconds
	instant memoEntry              // the last instant between whole seconds
}

type memoEntry struct {
	set bool
	t   float64
	r   reading
}

func newScenarioMemo(compute scenario, m *machine, gpus int) *scenarioMemo {
	return &scenarioMemo{compute: compute, machine: m, gpus: make([]gpuMemo, gpus)}
}

// reading is the memoised scenario. The slices in a reading (processes, XIDs) are shared
// between callers, who only read them.
func (s *scenarioMemo) reading(m *machine, gpu int, t float64) reading {
	if m != s.machine || gpu < 0 || gpu >= len(s.gpus) {
		return s.compute(m, gpu, t)
	}
	g := &s.gpus[gpu]
	slot := &g.instant
	if t >= 0 && t == math.Trunc(t) {
		slot = &g.seconds[int64(t)%memoSeconds]
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if slot.set && slot.t == t {
		return slot.r
	}
	r := s.compute(m, gpu, t)
	*slot = memoEntry{set: true, t: t, r: r}
	return r
}
