package tracking

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func samplesEvery(step time.Duration, mems []float64, utils ...float64) []Sample {
	out := make([]Sample, len(mems))
	for i, m := range mems {
		out[i] = Sample{T: t0.Add(time.Duration(i) * step), Memory: m}
		if len(utils) > 0 {
			out[i].Util, out[i].HasUtil = utils[i%len(utils)], true
		}
	}
	return out
}

func TestObserveKeepsTheWindowAndIgnoresLateSamples(t *testing.T) {
	tr := New(time.Minute)
	for i := range 200 {
		tr.Observe(GPUKey("gpu"), Sample{T: t0.Add(time.Duration(i) * time.Second), Memory: float64(i)})
	}
	w := tr.Observe(GPUKey("gpu"), Sample{T: t0.Add(10 * time.Second), Memory: -1}) // late: ignored
	assert.Equal(t, float64(199), w[len(w)-1].Memory)
	assert.LessOrEqual(t, len(w), 62, "bounded by the window")
	assert.True(t, Covers(w, time.Minute))
}

// A window handed out by Observe is what the signals read after the tracker's lock is
// released: later observations, and the compactions they cause, must leave it as it was.
func TestAWindowHandedOutStaysAsItWas(t *testing.T) {
	tr := New(10 * time.Second)
	var windows [][]Sample
	var copies [][]Sample
	for i := range 100 {
		w := tr.Observe(GPUKey("gpu"), Sample{T: t0.Add(time.Duration(i) * time.Second), Memory: float64(i)})
		if i > 0 {
			// A caller appending to the window it holds, after the tracker has added past
			// its end, must not overwrite what the tracker holds.
			_ = append(windows[i-1], Sample{Memory: -1})
		}
		assert.Equal(t, float64(i), w[len(w)-1].Memory, "the newest sample of window %d", i)
		windows = append(windows, w)
		copies = append(copies, append([]Sample(nil), w...))
	}
	for i := range windows {
		assert.Equal(t, copies[i], windows[i], "window %d changed after later observations", i)
	}
	last := windows[len(windows)-1]
	assert.Len(t, last, 11, "10 s at 1 s, plus the sample just before the window")
	assert.Equal(t, float64(89), last[0].Memory)
	assert.Equal(t, float64(99), last[len(last)-1].Memory)
}

// Within by bisection against its definition: the samples less than `window` older than
// the newest, plus the newest one at least `window` old.
func TestWithinMatchesALinearScan(t *testing.T) {
	linear := func(samples []Sample, window time.Duration) []Sample {
		i := len(samples) - 1
		for i > 0 && samples[len(samples)-1].T.Sub(samples[i].T) < window {
			i--
		}
		return samples[i:]
	}
	// Irregular steps, repeated timestamps included.
	var samples []Sample
	at := t0
	for i := range 60 {
		at = at.Add(time.Duration(i%4) * 700 * time.Millisecond)
		samples = append(samples, Sample{T: at, Memory: float64(i)})
	}
	for n := 1; n <= len(samples); n++ {
		for _, window := range []time.Duration{time.Nanosecond, 700 * time.Millisecond, time.Second, 5 * time.Second, time.Minute} {
			assert.Equal(t, linear(samples[:n], window), Within(samples[:n], window), "%d samples, window %s", n, window)
		}
	}
	assert.Nil(t, Within(nil, time.Minute))
}

func TestIdleFor(t *testing.T) {
	idle := samplesEvery(time.Minute, make([]float64, 12), 0.01, 0.02)
	assert.True(t, IdleFor(idle, 0.05, 10*time.Minute))
	assert.False(t, IdleFor(idle[:5], 0.05, 10*time.Minute), "not yet a whole window")
	busy := samplesEvery(time.Minute, make([]float64, 12), 0.01, 0.02, 0.5)
	assert.False(t, IdleFor(busy, 0.05, 10*time.Minute))
}

func TestSlope(t *testing.T) {
	s := samplesEvery(10*time.Second, []float64{100, 200, 300, 400})
	assert.InDelta(t, 10, Slope(s), 1e-9)
	assert.Zero(t, Slope(s[:1]))
}

func TestLeakSuspected(t *testing.T) {
	rule := LeakRule{Window: time.Minute, MinGrowth: 0.05, UtilizationTolerance: 0.2}
	steps := []float64{10, 10, 12, 12, 14, 14, 16, 16, 18, 18, 20, 20, 22}
	assert.True(t, LeakSuspected(samplesEvery(5*time.Second, steps, 0.6, 0.65), 100, rule), "step-wise growth, steady work")
	assert.False(t, LeakSuspected(samplesEvery(5*time.Second, steps, 0.1, 0.9), 100, rule), "utilization not steady: the job changed phase")
	assert.False(t, LeakSuspected(samplesEvery(5*time.Second, steps, 0.6), 1000, rule), "grew under 5 % of the total")
	saw := []float64{10, 30, 10, 30, 10, 30, 10, 30, 10, 30, 10, 30, 40}
	assert.False(t, LeakSuspected(samplesEvery(5*time.Second, saw, 0.6), 100, rule), "not persistent")
	assert.False(t, LeakSuspected(samplesEvery(5*time.Second, steps[:6], 0.6), 100, rule), "window not covered")
}

func TestEnergyAccumulation(t *testing.T) {
	tr := New(time.Minute)
	gpu := GPUKey("GPU-1")
	pod := UserKey("GPU-1", Pod, "ml/train-0")
	assert.Zero(t, tr.GPUEnergyDelta(gpu, 1000, t0))
	assert.Equal(t, 500.0, tr.GPUEnergyDelta(gpu, 1500, t0.Add(10*time.Second)))
	assert.Zero(t, tr.GPUEnergyDelta(gpu, 1500, t0.Add(10*time.Second)), "the same batch again")
	assert.Zero(t, tr.GPUEnergyDelta(gpu, 10, t0.Add(20*time.Second)), "counter reset")
	j, start := tr.AddEnergy(pod, 300, t0)
	assert.Equal(t, 300.0, j)
	j, start2 := tr.AddEnergy(pod, 200, t0.Add(time.Second))
	assert.Equal(t, 500.0, j)
	assert.Equal(t, start, start2)
	tr.Forget(t0.Add(time.Hour))
	assert.Zero(t, tr.Len(), "one sweep forgets GPUs and their users alike")
}

// A GPU that comes back after its series went stale must not hand the energy of the whole
// gap to whoever holds it now (the bug of the string-keyed tracker: the energy reading was
// stored under one key and never forgotten).
func TestEnergyAfterAGapStartsAfresh(t *testing.T) {
	for _, gap := range []time.Duration{10 * time.Minute, 45 * time.Minute} {
		tr := New(time.Minute)
		gpu := GPUKey("GPU-1")
		at := t0
		for range 3 {
			at = at.Add(10 * time.Second)
			tr.GPUEnergyDelta(gpu, 1000+at.Sub(t0).Seconds()*700, at)
			tr.Forget(at.Add(-30 * time.Minute))
		}
		// The GPU is gone for the gap; the processor keeps sweeping.
		for swept := at; swept.Before(at.Add(gap)); swept = swept.Add(time.Minute) {
			tr.Forget(swept.Add(-30 * time.Minute))
		}
		back := at.Add(gap)
		assert.Zero(t, tr.GPUEnergyDelta(gpu, 1000+back.Sub(t0).Seconds()*700, back), "gap %s", gap)
		next := back.Add(10 * time.Second)
		assert.InDelta(t, 7000, tr.GPUEnergyDelta(gpu, 1000+next.Sub(t0).Seconds()*700, next), 1e-6, "counts again after the gap %s", gap)
	}
}

// BenchmarkObserveFullWindow is what gpu_enrich does for one busy GPU at every batch once
// its window is full: the leak window (15 minutes) at 1 s collections, 900 samples,
// observed and read by the three signals with gpu_enrich's default rules.
func BenchmarkObserveFullWindow(b *testing.B) {
	const total = 80e9
	rule := LeakRule{Window: 15 * time.Minute, MinGrowth: 0.05, UtilizationTolerance: 0.25}
	tr := New(15 * time.Minute)
	at := t0
	sample := func() Sample {
		at = at.Add(time.Second)
		return Sample{T: at, Util: 0.9, HasUtil: true, Memory: 60e9}
	}
	for range 900 {
		tr.Observe(GPUKey("gpu"), sample())
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w := tr.Observe(GPUKey("gpu"), sample())
		_ = IdleFor(w, 0.05, 10*time.Minute)
		_ = Slope(Within(w, rule.Window))
		_ = LeakSuspected(w, total, rule)
	}
}
