// Package tracking keeps the state the gpu_enrich processor needs across batches, the way
// contrib's cumulativetodelta keeps its own: one map under a typed key, one sweep. Per GPU
// (or MIG instance): a time window of samples and the last cumulative energy reading; per
// user of a GPU (a pod, a Slurm job): a window of samples and its accumulated energy.
// Everything is bounded by the longest window and forgotten when not seen for a while.
package tracking // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/tracking"

import (
	"sync"
	"time"
)

// UserKind says who, besides the GPU itself, a series belongs to.
type UserKind int

const (
	// TheGPU is the GPU's (or MIG instance's) own series.
	TheGPU UserKind = iota
	// Pod is a Kubernetes pod on the GPU; the user ID is "<namespace>/<name>" or its UID.
	Pod
	// SlurmJob is a Slurm job on the GPU; the user ID is the job ID.
	SlurmJob
)

// Key identifies one tracked series: a GPU, or one user of it.
type Key struct {
	GPU      string // GPU UUID, or MIG UUID for a MIG instance
	UserKind UserKind
	UserID   string // empty for TheGPU
}

// GPUKey is the key of a GPU's own series.
func GPUKey(uuid string) Key { return Key{GPU: uuid} }

// UserKey is the key of one user's series on a GPU.
func UserKey(uuid string, kind UserKind, id string) Key {
	return Key{GPU: uuid, UserKind: kind, UserID: id}
}

// Sample is one observation of a series.
type Sample struct {
	T time.Time
	// Util is the utilization ratio 0–1; HasUtil is false where there is none (MIG).
	Util    float64
	HasUtil bool
	// Memory is the framebuffer in use, in bytes.
	Memory float64
}

// MaxEnergyGap is the longest gap between two energy readings of a GPU whose increase is
// still handed to its users. After a longer gap (the GPU fell off the bus, the agent was
// stopped) its series went stale in Prometheus (5-minute lookback) and who held the GPU
// meanwhile is unknown: the next reading starts afresh instead of handing the whole gap's
// energy to whoever holds it now.
const MaxEnergyGap = 5 * time.Minute

// entry is everything kept for one key.
type entry struct {
	// samples[first:] is the window, oldest first. Samples that fall out of it are
	// skipped by advancing first, and the window is moved to a new array once the
	// skipped prefix is as long as the window: each sample is copied about once, instead
	// of the whole window at every observation (900 samples per GPU at 1 s collections).
	samples  []Sample
	first    int
	lastSeen time.Time

	// A GPU's last cumulative energy reading.
	lastEnergy   float64
	lastEnergyAt time.Time
	hasEnergy    bool

	// A user's accumulated energy and when its series started.
	joules      float64
	energyStart time.Time
}

// Tracker holds every series. Safe for concurrent use.
type Tracker struct {
	mu      sync.Mutex
	keep    time.Duration // longest window any signal needs
	entries map[Key]*entry
}

// New keeps samples for `keep` (the longest window of any derived signal).
func New(keep time.Duration) *Tracker {
	return &Tracker{keep: keep, entries: map[Key]*entry{}}
}

func (t *Tracker) entry(k Key, now time.Time) *entry {
	e := t.entries[k]
	if e == nil {
		e = &entry{}
		t.entries[k] = e
	}
	if now.After(e.lastSeen) {
		e.lastSeen = now
	}
	return e
}

// Observe adds a sample and returns the series' window (oldest first). A sample older
// than the newest one is ignored (batches can repeat or arrive late). The window is never
// written to afterwards (later samples go past its end, a compaction goes to a new array),
// so it can be read after the lock is released; it is not to be modified.
func (t *Tracker) Observe(k Key, s Sample) []Sample {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(k, s.T)
	if n := len(e.samples); n == e.first || s.T.After(e.samples[n-1].T) {
		e.samples = append(e.samples, s)
	}
	// Drop what fell out of the longest window, keeping one sample older than it so that
	// a window can be seen as fully covered.
	for e.first+1 < len(e.samples) && s.T.Sub(e.samples[e.first+1].T) >= t.keep {
		e.first++
	}
	if live := len(e.samples) - e.first; e.first > 0 && e.first >= live {
		moved := make([]Sample, live, 2*live)
		copy(moved, e.samples[e.first:])
		e.samples, e.first = moved, 0
	}
	n := len(e.samples)
	return e.samples[e.first:n:n] // capped: an append by the caller cannot reach our array
}

// GPUEnergyDelta records a GPU's cumulative energy reading taken at `at` and returns the
// increase since the previous one: 0 on the first reading, after a counter reset, and after
// a gap longer than MaxEnergyGap.
func (t *Tracker) GPUEnergyDelta(k Key, joules float64, at time.Time) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(k, at)
	prev, prevAt, had := e.lastEnergy, e.lastEnergyAt, e.hasEnergy
	if had && !at.After(prevAt) {
		return 0 // a repeated or late batch
	}
	e.lastEnergy, e.lastEnergyAt, e.hasEnergy = joules, at, true
	if !had || joules < prev || at.Sub(prevAt) > MaxEnergyGap {
		return 0
	}
	return joules - prev
}

// AddEnergy adds joules to a user's accumulator and returns its total and start time.
func (t *Tracker) AddEnergy(k Key, joules float64, at time.Time) (float64, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entry(k, at)
	if e.energyStart.IsZero() {
		e.energyStart = at
	}
	e.joules += joules
	return e.joules, e.energyStart
}

// Forget drops everything not seen since `before`.
func (t *Tracker) Forget(before time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, e := range t.entries {
		if e.lastSeen.Before(before) {
			delete(t.entries, k)
		}
	}
}

// Len is the number of keys held (for tests and self-observation).
func (t *Tracker) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}
