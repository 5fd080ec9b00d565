package tracking

import (
	"sort"
	"time"
)

// Covers reports whether the samples span at least `window` (the signal has seen enough).
func Covers(samples []Sample, window time.Duration) bool {
	return len(samples) >= 2 && samples[len(samples)-1].T.Sub(samples[0].T) >= window
}

// Within returns the samples of the last `window` (plus the one just before it, so the
// window is covered when data goes back that far).
func Within(samples []Sample, window time.Duration) []Sample {
	if len(samples) == 0 {
		return nil
	}
	last := samples[len(samples)-1].T
	// Samples are in time order: the first one inside the window is found by bisection,
	// and the one before it (the newest at least `window` old) is kept too.
	inside := sort.Search(len(samples), func(i int) bool { return last.Sub(samples[i].T) < window })
	return samples[max(inside-1, 0):]
}

// IdleFor reports whether utilization stayed under threshold over a fully covered window.
func IdleFor(samples []Sample, threshold float64, window time.Duration) bool {
	w := Within(samples, window)
	if !Covers(w, window) {
		return false
	}
	for _, s := range w {
		if !s.HasUtil || s.Util >= threshold {
			return false
		}
	}
	return true
}

// Slope is the least-squares slope of memory over time, in bytes per second.
func Slope(samples []Sample) float64 {
	n := float64(len(samples))
	if n < 2 {
		return 0
	}
	t0 := samples[0].T.UnixNano()
	var sx, sy, sxx, sxy float64
	for _, s := range samples {
		x := float64(s.T.UnixNano()-t0) / 1e9
		sx += x
		sy += s.Memory
		sxx += x * x
		sxy += x * s.Memory
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / den
}

// LeakRule holds the thresholds of LeakSuspected.
type LeakRule struct {
	Window time.Duration
	// MinGrowth is the least growth over the window, as a share of the total memory.
	MinGrowth float64
	// UtilizationTolerance is the widest utilization range (max - min) still "steady".
	UtilizationTolerance float64
}

// persistentShare is the share of steps that must not go down for growth to be persistent.
const persistentShare = 0.9

// LeakSuspected reports whether memory grew persistently over a fully covered window
// while utilization stayed steady: in at least 90 % of the steps memory did not go down,
// it grew by at least MinGrowth × total, and utilization moved less than the tolerance.
func LeakSuspected(samples []Sample, total float64, rule LeakRule) bool {
	w := Within(samples, rule.Window)
	if !Covers(w, rule.Window) || len(w) < 3 || total <= 0 {
		return false
	}
	if w[len(w)-1].Memory-w[0].Memory < rule.MinGrowth*total {
		return false
	}
	notDown := 0
	for i := 1; i < len(w); i++ {
		if w[i].Memory >= w[i-1].Memory {
			notDown++
		}
	}
	if float64(notDown) < persistentShare*float64(len(w)-1) {
		return false
	}
	lo, hi, any := 1.0, 0.0, false
	for _, s := range w {
		if s.HasUtil {
			lo, hi, any = min(lo, s.Util), max(hi, s.Util), true
		}
	}
	return !any || hi-lo <= rule.UtilizationTolerance
}
