package simulator

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// reading is what one simulated GPU shows at one instant. Percentages are 0–100, the
// framebuffer is a fraction of the total.
type reading struct {
	utilization    float64
	memoryCopyUtil float64
	encoderUtil    float64
	decoderUtil    float64
	fbUsedFraction float64
	gpuTempC       float64
	memTempC       float64
	powerW         float64
	smClockMHz     uint32
	// pcieReplaysPerHour drives the cumulative PCIe replay counter.
	pcieReplaysPerHour float64
}

// scenario computes the reading of GPU `gpu` at t seconds after the simulator started.
// It must be a pure function of its arguments (and the seed-driven noise) so that runs are
// reproducible.
type scenario func(m *machine, gpu int, t float64) reading

// machine is what a scenario may use: the system's envelope and seeded noise.
type machine struct {
	sys  system
	seed int64
}

// noise is a deterministic value in [-1, 1] for (seed, gpu, channel, whole second).
func (m *machine) noise(gpu int, channel uint64, t float64) float64 {
	x := uint64(m.seed)*0x9E3779B97F4A7C15 ^ uint64(gpu+1)*0xBF58476D1CE4E5B9 ^ channel*0x94D049BB133111EB ^ uint64(int64(math.Floor(t)))
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	x ^= x >> 31
	return float64(x>>11)/float64(1<<52)*2 - 1
}

// wave is a slow oscillation in [-1, 1] whose phase differs per GPU.
func (m *machine) wave(gpu int, period, t float64) float64 {
	phase := float64((int64(gpu)*7+m.seed)%13) / 13 * 2 * math.Pi
	return math.Sin(2*math.Pi*t/period + phase)
}

// thermal derives temperature, power and clocks from how busy the GPU is.
func (m *machine) thermal(r *reading, gpu int, t float64) {
	busy := r.utilization / 100
	r.powerW = m.sys.idlePowerW + busy*(0.85*m.sys.powerLimitW-m.sys.idlePowerW) + 4*m.noise(gpu, 10, t)
	r.gpuTempC = 33 + busy*38 + 0.8*m.noise(gpu, 11, t)
	r.memTempC = r.gpuTempC + 4 + 0.5*m.noise(gpu, 12, t)
	if busy > 0.05 {
		r.smClockMHz = m.sys.smClockMax - uint32(15*(1+m.noise(gpu, 13, t)))
	} else {
		r.smClockMHz = m.sys.smClockIdle
	}
}

func clampPercent(v float64) float64 { return math.Max(0, math.Min(100, v)) }

// steadyTraining: every GPU busy at 85–99 %, framebuffer stable around 78 %.
func steadyTraining(m *machine, gpu int, t float64) reading {
	r := reading{
		utilization:        clampPercent(92 + 5*m.wave(gpu, 60, t) + 2*m.noise(gpu, 1, t)),
		memoryCopyUtil:     clampPercent(48 + 8*m.wave(gpu, 45, t) + 3*m.noise(gpu, 2, t)),
		fbUsedFraction:     0.78 + 0.002*m.noise(gpu, 3, t),
		pcieReplaysPerHour: 2,
	}
	m.thermal(&r, gpu, t)
	return r
}

// idle: the GPUs hold a loaded model (framebuffer 31 %) but do no work.
func idle(m *machine, gpu int, t float64) reading {
	r := reading{
		utilization:    clampPercent(0.4 + 0.4*m.noise(gpu, 1, t)),
		memoryCopyUtil: 0,
		fbUsedFraction: 0.31,
	}
	m.thermal(&r, gpu, t)
	return r
}

// Leak shape: framebuffer use starts at leakStart and grows by leakStep every
// leakStepSeconds until it reaches leakCeiling, where it stays (the job is about to OOM).
const (
	leakStart       = 0.25
	leakStep        = 0.015
	leakStepSeconds = 5.0
	leakCeiling     = 0.98
)

// memoryLeak: steady utilization while framebuffer use climbs step-wise towards full.
func memoryLeak(m *machine, gpu int, t float64) reading {
	steps := math.Floor(t / leakStepSeconds)
	r := reading{
		utilization:        clampPercent(64 + 3*m.wave(gpu, 90, t) + 2*m.noise(gpu, 1, t)),
		memoryCopyUtil:     clampPercent(30 + 4*m.noise(gpu, 2, t)),
		fbUsedFraction:     math.Min(leakCeiling, leakStart+steps*leakStep),
		pcieReplaysPerHour: 2,
	}
	m.thermal(&r, gpu, t)
	return r
}

var scenarios = map[string]scenario{
	"steady-training": steadyTraining,
	"idle":            idle,
	"memory-leak":     memoryLeak,
}

// Scenarios lists the scenario names.
func Scenarios() []string {
	out := make([]string, 0, len(scenarios))
	for name := range scenarios {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

func lookupScenario(name string) (scenario, error) {
	s, ok := scenarios[name]
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, strings.Join(Scenarios(), ", "))
	}
	return s, nil
}
