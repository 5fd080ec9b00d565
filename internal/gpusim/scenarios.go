package gpusim

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// reading is what one simulated GPU shows at one instant. Percentages are 0–100, the
// framebuffer is a fraction of the total, cumulative counters are totals since the start.
type reading struct {
	utilization    float64
	memoryCopyUtil float64
	decoderUtil    float64
	fbUsedFraction float64
	gpuTempC       float64
	memTempC       float64
	powerW         float64
	smClockMHz     uint32
	pstate         int
	// pcieReplaysPerHour drives the cumulative PCIe replay counter.
	pcieReplaysPerHour float64

	// clockEvents is NVML's clock-event reason bit mask.
	clockEvents uint64
	// throttleSeconds is the cumulative time held down per cause (power, thermal,
	// sync boost, board limit, low utilization, reliability).
	throttleSeconds [6]float64

	eccCorrected   uint64 // cumulative, volatile (aggregate adds a lifetime base)
	eccUncorrected uint64
	remapPending   bool
	remapFailed    bool

	// xids lists the XID codes with how many of each the driver has raised since start.
	xids []xidCount

	lost bool

	// nvlinkErrorsPerSecond are CRC errors on NVLink link 3 (a flaky link).
	nvlinkErrorsPerSecond float64

	// processes on the GPU (not under MIG); their memory and SM shares add up to the
	// device's.
	processes []process

	// GPM activity ratios 0–1 (graphics, sm_active, sm_occupancy, tensor, dram, fp64,
	// fp32, fp16).
	gpm [8]float64
}

type xidCount struct {
	code  uint64
	count uint64
}

// process is one simulated GPU process.
type process struct {
	pid      uint32
	name     string
	memShare float64 // share of the framebuffer in use
	smShare  float64 // share of the device utilization
	graphics bool
}

// Throttle causes, indexes into reading.throttleSeconds.
const (
	causePower = iota
	causeThermal
	causeSyncBoost
	causeBoardLimit
	causeLowUtilization
	causeReliability
)

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

// derive fills what follows from how busy the GPU is: temperature, power, clocks,
// p-state, profiling activity, and a single training process holding the memory.
func (m *machine) derive(r *reading, gpu int, t float64) {
	busy := r.utilization / 100
	r.powerW = m.sys.idlePowerW + busy*(0.85*m.sys.powerLimitW-m.sys.idlePowerW) + 4*m.noise(gpu, 10, t)
	r.gpuTempC = 33 + busy*38 + 0.8*m.noise(gpu, 11, t)
	r.memTempC = r.gpuTempC + 4 + 0.5*m.noise(gpu, 12, t)
	if busy > 0.05 {
		r.smClockMHz = m.sys.smClockMax - uint32(15*(1+m.noise(gpu, 13, t)))
		r.pstate = 0
	} else {
		r.smClockMHz = m.sys.smClockIdle
		r.pstate = 0
		r.clockEvents |= nvml.ClocksEventReasonGpuIdle
		r.throttleSeconds[causeLowUtilization] = t
	}
	r.gpm = [8]float64{busy, busy * 0.93, busy * 0.55, busy * 0.62, r.memoryCopyUtil / 100, busy * 0.02, busy * 0.21, busy * 0.05}
	if r.fbUsedFraction > 0.01 {
		r.processes = []process{{pid: uint32(20000 + gpu), name: "python3", memShare: 1, smShare: 1}}
	}
}

func clampPercent(v float64) float64 { return math.Max(0, math.Min(100, v)) }

// steadyTraining: every GPU busy at 82–94 % (below the saturation alert), framebuffer
// stable around 78 %, nothing wrong.
func steadyTraining(m *machine, gpu int, t float64) reading {
	r := reading{
		utilization:        clampPercent(88 + 4*m.wave(gpu, 60, t) + 1.5*m.noise(gpu, 1, t)),
		memoryCopyUtil:     clampPercent(48 + 8*m.wave(gpu, 45, t) + 3*m.noise(gpu, 2, t)),
		fbUsedFraction:     0.78 + 0.002*m.noise(gpu, 3, t),
		pcieReplaysPerHour: 2,
	}
	m.derive(&r, gpu, t)
	return r
}

// idle: the GPUs hold a loaded model (framebuffer 31 %) but do no work.
func idle(m *machine, gpu int, t float64) reading {
	r := reading{
		utilization:    clampPercent(0.4 + 0.4*m.noise(gpu, 1, t)),
		fbUsedFraction: 0.31,
	}
	m.derive(&r, gpu, t)
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
	m.derive(&r, gpu, t)
	return r
}

// hotGPUs overheat in thermal-throttle.
var hotGPUs = map[int]bool{2: true, 5: true}

// thermalThrottle: training, but GPUs 2 and 5 run at 88–92 °C and the driver slows them
// down (SW and HW thermal slowdown), at about 60 % of their clock.
func thermalThrottle(m *machine, gpu int, t float64) reading {
	r := steadyTraining(m, gpu, t)
	if hotGPUs[gpu] {
		r.gpuTempC = 90 + 2*m.noise(gpu, 20, t)
		r.memTempC = r.gpuTempC + 6
		r.smClockMHz = uint32(float64(m.sys.smClockMax) * 0.6)
		r.clockEvents |= nvml.ClocksEventReasonSwThermalSlowdown | nvml.ClocksThrottleReasonHwThermalSlowdown
		r.throttleSeconds[causeThermal] = t
		r.powerW *= 0.8
	}
	return r
}

// powerCapped: every GPU is held at its power limit (SW power cap), clocks at ~85 %. As on
// a real board, the cap lets go in the seconds the draw dips under the limit (about one in
// seven), so its clock-event reason comes and goes.
func powerCapped(m *machine, gpu int, t float64) reading {
	r := steadyTraining(m, gpu, t)
	dip := m.noise(gpu, 21, t)
	r.powerW = m.sys.powerLimitW - 2 + dip
	r.smClockMHz = uint32(float64(m.sys.smClockMax) * 0.85)
	if dip >= -0.7 {
		r.clockEvents |= nvml.ClocksEventReasonSwPowerCap
	}
	r.throttleSeconds[causePower] = t * 0.9
	return r
}

// xidStorm: GPU 0 raises XID 13 (graphics engine exception) 20 times a second, GPU 1
// XID 31 (MMU fault) twice a second, GPU 2 XID 94 (contained ECC error) every 10 s, and
// GPU 3 XID 43 (GPU stopped processing) once at 5 s, then XID 45 (preemptive cleanup)
// once at 20 s: its last XID changes from one code to another.
func xidStorm(m *machine, gpu int, t float64) reading {
	r := steadyTraining(m, gpu, t)
	switch gpu {
	case 0:
		r.xids = []xidCount{{code: 13, count: uint64(t * 20)}}
	case 1:
		r.xids = []xidCount{{code: 31, count: uint64(t * 2)}}
	case 2:
		r.xids = []xidCount{{code: 94, count: uint64(t / 10)}}
	case 3:
		if t >= 5 {
			r.xids = append(r.xids, xidCount{code: 43, count: 1})
		}
		if t >= 20 {
			r.xids = append(r.xids, xidCount{code: 45, count: 1})
		}
	}
	return r
}

// The lost GPU of gpu-lost falls off the bus for lostFor seconds of every lostCycle.
const (
	lostGPU    = 3
	lostCycle  = 60.0
	lostAfter  = 15.0
	lostFor    = 20.0
	xidOffBus  = 79
	xidRowRmap = 63
)

// gpuLost: training; GPU 3 falls off the bus (XID 79, then ERROR_GPU_IS_LOST to every
// call) 15 s into every minute and comes back 20 s later.
func gpuLost(m *machine, gpu int, t float64) reading {
	r := steadyTraining(m, gpu, t)
	if gpu == lostGPU {
		cycles := math.Floor(t / lostCycle)
		phase := t - cycles*lostCycle
		r.lost = phase >= lostAfter && phase < lostAfter+lostFor
		falls := cycles
		if phase >= lostAfter {
			falls++
		}
		r.xids = []xidCount{{code: xidOffBus, count: uint64(falls)}}
	}
	return r
}

// eccDegrading: training; GPU 6's memory wears out: corrected errors grow faster and
// faster, and 30 s in an uncorrectable error forces a row remap that waits for a reset
// (XID 63), which makes the GPU degraded. GPU 4's riser is going bad: its PCIe link
// retransmits about once a second. GPU 5's NVLink link 3 is flaky: CRC errors twice a second.
func eccDegrading(m *machine, gpu int, t float64) reading {
	r := steadyTraining(m, gpu, t)
	switch gpu {
	case 4:
		r.pcieReplaysPerHour = 3600
	case 5:
		r.nvlinkErrorsPerSecond = 2
	}
	if gpu == 6 {
		r.eccCorrected = uint64(t * t / 20)
		if t >= 30 {
			r.eccUncorrected = 1
			r.remapPending = true
			r.xids = []xidCount{{code: xidRowRmap, count: 1}}
		}
	}
	return r
}

// sharedGPU: training, and GPU 0 is time-sliced between three processes from different
// containers, each with its own memory and SM share.
func sharedGPU(m *machine, gpu int, t float64) reading {
	r := steadyTraining(m, gpu, t)
	if gpu == 0 {
		r.processes = []process{
			{pid: 41001, name: "python3", memShare: 0.5, smShare: 0.55},
			{pid: 41002, name: "tritonserver", memShare: 0.3, smShare: 0.30},
			{pid: 41003, name: "python3", memShare: 0.2, smShare: 0.15},
		}
	}
	return r
}

// mig: training on the non-MIG GPUs; GPUs 0 and 1 run MIG (the layout is set up by
// migLayouts) and their instances are busy. mig-mixed is the same work on a layout with a
// GPU instance of three compute instances, the +me and the double-memory 1-slice profiles.
func mig(m *machine, gpu int, t float64) reading {
	return steadyTraining(m, gpu, t)
}

// churnAt is when things end in `churn`, in simulated seconds: late enough for a test to see
// them first on a loaded machine.
const churnAt = 40.0

// churnProcesses are GPU 0's processes in `churn` until churnAt: a trainer and its data
// loader, which then exits, freeing its memory.
var churnProcesses = []process{
	{pid: 43001, name: "python3", memShare: 0.7, smShare: 0.85},
	{pid: 43002, name: "dataloader", memShare: 0.3, smShare: 0.15},
}

// churn: training, and things end churnAt seconds in: on GPU 0 the data-loader process
// exits (its memory is freed), and GPU 1, split into two MIG halves (migLayouts), loses the
// second half (destroyed, as mig-parted or a DRA driver would). Pods ending is the
// kubelet's business, not the GPU's.
func churn(m *machine, gpu int, t float64) reading {
	r := steadyTraining(m, gpu, t)
	if gpu == 0 {
		if t < churnAt {
			r.processes = churnProcesses
		} else {
			r.fbUsedFraction *= churnProcesses[0].memShare
			r.processes = []process{{pid: churnProcesses[0].pid, name: churnProcesses[0].name, memShare: 1, smShare: 1}}
		}
	}
	return r
}

var scenarios = map[string]scenario{
	"steady-training":  steadyTraining,
	"idle":             idle,
	"memory-leak":      memoryLeak,
	"thermal-throttle": thermalThrottle,
	"power-capped":     powerCapped,
	"xid-storm":        xidStorm,
	"gpu-lost":         gpuLost,
	"ecc-degrading":    eccDegrading,
	"shared-gpu":       sharedGPU,
	"mig":              mig,
	"mig-mixed":        mig,
	"churn":            churn,
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
