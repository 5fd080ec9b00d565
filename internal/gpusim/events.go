package gpusim

import (
	"math"
	"sort"
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// eventSource is the simulated driver's event stream: the XIDs each scenario raises over
// simulated time, plus any a test injects. Pending events are counts, not queued records,
// so an injected storm of a million XIDs costs no memory here either.
type eventSource struct {
	sim *Simulator

	mu        sync.Mutex
	emitted   map[int]map[uint64]uint64 // GPU index → XID → delivered from the scenario
	injected  map[int]map[uint64]uint64 // GPU index → XID → still to deliver
	delivered uint64
	// injection is closed (and replaced) when a test injects XIDs, to wake waiters.
	injection chan struct{}
}

func newEventSource(s *Simulator) *eventSource {
	return &eventSource{sim: s, emitted: map[int]map[uint64]uint64{}, injected: map[int]map[uint64]uint64{}, injection: make(chan struct{})}
}

// InjectXID makes GPU `index` raise XID `code` n more times.
func (s *Simulator) InjectXID(index int, code, n uint64) {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	if s.events.injected[index] == nil {
		s.events.injected[index] = map[uint64]uint64{}
	}
	s.events.injected[index][code] += n
	close(s.events.injection)
	s.events.injection = make(chan struct{})
}

// DeliveredXIDs is how many XID events the simulated driver has handed out so far.
func (s *Simulator) DeliveredXIDs() uint64 {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	return s.events.delivered
}

// DueXIDs is how many XID events the scenario and injections have raised by now
// (delivered or not) for the GPUs a watcher registered.
func (s *Simulator) DueXIDs() uint64 {
	s.events.mu.Lock()
	defer s.events.mu.Unlock()
	t := s.events.second()
	due := s.events.delivered
	for _, d := range s.devices {
		for _, n := range s.events.injected[d.index] {
			due += n
		}
		for _, x := range s.scenario(s.machine, d.index, t).xids {
			due += x.count - s.events.emitted[d.index][x.code]
		}
	}
	return due
}

// next pops one pending XID of the given GPUs, in GPU then code order.
func (e *eventSource) next(devices []*Device) (nvml.EventData, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t := e.second()
	for _, d := range devices {
		if pending := e.injected[d.index]; len(pending) > 0 {
			code := smallestKey(pending)
			if pending[code]--; pending[code] == 0 {
				delete(pending, code)
			}
			e.delivered++
			return xidEvent(d, code), true
		}
		for _, x := range e.sim.scenario(e.sim.machine, d.index, t).xids {
			if e.emitted[d.index] == nil {
				e.emitted[d.index] = map[uint64]uint64{}
			}
			if e.emitted[d.index][x.code] < x.count {
				e.emitted[d.index][x.code]++
				e.delivered++
				return xidEvent(d, x.code), true
			}
		}
	}
	return nvml.EventData{}, false
}

// second is the whole second whose scenario XIDs are due: the simulated driver raises a
// scenario's XIDs at whole seconds. A watcher polls twice a second; at a whole second the
// scenario's reading is one a collection computes anyway (scenarioMemo), so polling costs
// the simulator next to nothing.
func (e *eventSource) second() float64 {
	return math.Floor(e.sim.elapsed())
}

func smallestKey(m map[uint64]uint64) uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys[0]
}

func xidEvent(d *Device, code uint64) nvml.EventData {
	return nvml.EventData{Device: d, EventType: nvml.EventTypeXidCriticalError, EventData: code, GpuInstanceId: noInstance, ComputeInstanceId: noInstance}
}

// EventSet is a simulated nvmlEventSet.
type EventSet struct {
	*mock.EventSet
	src *eventSource

	mu      sync.Mutex
	devices []*Device
}

var _ nvml.EventSet = (*EventSet)(nil)

// EventSetCreate creates an event set.
func (s *Simulator) EventSetCreate() (nvml.EventSet, nvml.Return) {
	s.count("EventSetCreate")
	es := &EventSet{EventSet: &mock.EventSet{}, src: s.events}
	FillNotSupported(es.EventSet)
	return es, nvml.SUCCESS
}

func (e *EventSet) register(d *Device, types uint64) {
	if types&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.devices = append(e.devices, d)
	sort.Slice(e.devices, func(i, j int) bool { return e.devices[i].index < e.devices[j].index })
}

// Wait returns the next XID of a registered GPU, or ERROR_TIMEOUT after timeoutMs of
// (real) time without one. Like a driver, it sleeps through the wait instead of polling:
// an injected XID wakes it at once, one the scenario raises over time is handed out when
// the wait ends (within timeoutMs). Polling would charge the simulator's cost to the agent
// in the pipelines benchmarks (every poll evaluates each GPU's scenario, and each wake-up
// costs the Go scheduler; at a 20 ms poll that was half the CPU of an 8-GPU agent at 10 s),
// where a driver's wait costs nothing until an event comes.
func (e *EventSet) Wait(timeoutMs uint32) (nvml.EventData, nvml.Return) {
	e.src.sim.count("EventSetWait")
	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	for {
		e.mu.Lock()
		devices := e.devices
		e.mu.Unlock()
		e.src.mu.Lock()
		injection := e.src.injection // taken before looking, so no injection is missed
		e.src.mu.Unlock()
		if ev, ok := e.src.next(devices); ok {
			return ev, nvml.SUCCESS
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			return nvml.EventData{}, nvml.ERROR_TIMEOUT
		}
		timer := time.NewTimer(remaining)
		select {
		case <-injection:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Free releases the set.
func (e *EventSet) Free() nvml.Return {
	e.src.sim.count("EventSetFree")
	return nvml.SUCCESS
}
