// Package tracking keeps the state the gpu_enrich processor needs across batches: a time
// window of samples per series (GPU, MIG instance or pod on a GPU) and per-pod energy
// accumulators. Everything is keyed by strings the processor builds, bounded by the window
// length, and forgotten when a series is not seen for a while.
package tracking // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/tracking"

import (
	"sync"
	"time"
)

// Sample is one observation of a series.
type Sample struct {
	T time.Time
	// Util is the utilization ratio 0–1; HasUtil is false where there is none (MIG).
	Util    float64
	HasUtil bool
	// Memory is the framebuffer in use, in bytes.
	Memory float64
}

// series is a time-ordered window of samples.
type series struct {
	samples  []Sample
	lastSeen time.Time
}

// energy accumulates a pod's share of a GPU's energy.
type energy struct {
	joules   float64
	start    time.Time
	lastSeen time.Time
}

// Tracker holds every series. Safe for concurrent use.
type Tracker struct {
	mu        sync.Mutex
	keep      time.Duration // longest window any signal needs
	series    map[string]*series
	gpuEnergy map[string]float64 // GPU key → last cumulative energy reading (J)
	podEnergy map[string]*energy // pod-on-GPU key → accumulated energy
}

// New keeps samples for `keep` (the longest window of any derived signal).
func New(keep time.Duration) *Tracker {
	return &Tracker{keep: keep, series: map[string]*series{}, gpuEnergy: map[string]float64{}, podEnergy: map[string]*energy{}}
}

// Observe adds a sample and returns a copy of the series' window (oldest first). A sample
// older than the newest one is ignored (batches can repeat or arrive late).
func (t *Tracker) Observe(key string, s Sample) []Sample {
	t.mu.Lock()
	defer t.mu.Unlock()
	ser := t.series[key]
	if ser == nil {
		ser = &series{}
		t.series[key] = ser
	}
	ser.lastSeen = s.T
	if n := len(ser.samples); n == 0 || s.T.After(ser.samples[n-1].T) {
		ser.samples = append(ser.samples, s)
	}
	// Drop what fell out of the longest window, keeping one sample older than it so that
	// a window can be seen as fully covered.
	cut := 0
	for cut+1 < len(ser.samples) && s.T.Sub(ser.samples[cut+1].T) >= t.keep {
		cut++
	}
	if cut > 0 {
		ser.samples = append(ser.samples[:0], ser.samples[cut:]...)
	}
	return append([]Sample(nil), ser.samples...)
}

// AddGPUEnergy records a GPU's cumulative energy reading and returns the increase since
// the previous one (0 on the first reading or after a counter reset).
func (t *Tracker) AddGPUEnergy(key string, joules float64) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, ok := t.gpuEnergy[key]
	t.gpuEnergy[key] = joules
	if !ok || joules < prev {
		return 0
	}
	return joules - prev
}

// AddPodEnergy adds joules to a pod's accumulator and returns its total and start time.
func (t *Tracker) AddPodEnergy(key string, joules float64, now time.Time) (float64, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.podEnergy[key]
	if e == nil {
		e = &energy{start: now}
		t.podEnergy[key] = e
	}
	e.joules += joules
	e.lastSeen = now
	return e.joules, e.start
}

// Forget drops every series and accumulator not seen since `before`.
func (t *Tracker) Forget(before time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, s := range t.series {
		if s.lastSeen.Before(before) {
			delete(t.series, k)
			delete(t.gpuEnergy, k)
		}
	}
	for k, e := range t.podEnergy {
		if e.lastSeen.Before(before) {
			delete(t.podEnergy, k)
		}
	}
}

// Len is the number of series held (for tests and self-observation).
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.series) + len(t.podEnergy)
}
