package gpusim

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type stepClock struct{ t time.Time }

func (c *stepClock) Now() time.Time { return c.t }

func newTestSim(t *testing.T, system, scenario string, seed int64) (*Simulator, *stepClock) {
	t.Helper()
	clock := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, err := New(Options{System: system, Scenario: scenario, Seed: seed, Now: clock.Now})
	require.NoError(t, err)
	return s, clock
}

func TestEveryRequestedSystemAndScenarioExists(t *testing.T) {
	assert.Equal(t, []string{"dgxa100", "dgxb200", "dgxh100", "dgxh200", "l4", "vgpu-h100"}, Systems())
	for _, sc := range []string{"steady-training", "idle", "memory-leak"} {
		assert.Contains(t, Scenarios(), sc)
	}
	_, err := New(Options{System: "dgx1", Scenario: "idle"})
	assert.ErrorContains(t, err, "dgx1")
	_, err = New(Options{System: "dgxh100", Scenario: "melting"})
	assert.ErrorContains(t, err, "melting")
}

func TestSameSeedSameValuesOtherSeedOtherValues(t *testing.T) {
	read := func(seed int64) (string, uint32) {
		s, clock := newTestSim(t, "dgxh100", "steady-training", seed)
		clock.t = clock.t.Add(37 * time.Second)
		d, _ := s.DeviceGetHandleByIndex(2)
		uuid, _ := d.GetUUID()
		p, _ := d.GetPowerUsage()
		return uuid, p
	}
	u1, p1 := read(7)
	u2, p2 := read(7)
	u3, p3 := read(8)
	assert.Equal(t, u1, u2)
	assert.Equal(t, p1, p2)
	assert.NotEqual(t, u1, u3)
	assert.NotEqual(t, p1, p3)
}

func TestUUIDsAndBusIDsAreDistinct(t *testing.T) {
	s, _ := newTestSim(t, "dgxa100", "idle", 1)
	uuids, buses := map[string]bool{}, map[string]bool{}
	for i := range 8 {
		d, ret := s.DeviceGetHandleByIndex(i)
		require.Equal(t, nvml.SUCCESS, ret)
		u, _ := d.GetUUID()
		p, _ := d.GetPciInfo()
		uuids[u] = true
		buses[string(func() []byte {
			var b []byte
			for _, c := range p.BusId {
				if c == 0 {
					break
				}
				b = append(b, byte(c))
			}
			return b
		}())] = true
		byUUID, ret := s.DeviceGetHandleByUUID(u)
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Same(t, d, byUUID)
	}
	assert.Len(t, uuids, 8)
	assert.Len(t, buses, 8)
}

// TestMinorNumbersArePermutationsThatDifferFromIndexesOnSomeSystems: consumers that map
// device-node names (nvidia<minor>, gpu-<minor>) must be able to tell minor from index.
func TestMinorNumbersArePermutationsThatDifferFromIndexesOnSomeSystems(t *testing.T) {
	differs := map[string]bool{}
	for _, system := range Systems() {
		s, _ := newTestSim(t, system, "idle", 1)
		seen := map[int]bool{}
		count, _ := s.DeviceGetCount()
		for i := range count {
			d, _ := s.DeviceGetHandleByIndex(i)
			minor, ret := d.GetMinorNumber()
			require.Equal(t, nvml.SUCCESS, ret)
			assert.False(t, seen[minor], "%s: minor %d twice", system, minor)
			assert.True(t, minor >= 0 && minor < count)
			seen[minor] = true
			if minor != i {
				differs[system] = true
			}
		}
	}
	assert.True(t, differs["dgxh100"], "the demo's system numbers its device nodes apart from NVML's order")
	assert.False(t, differs["dgxa100"], "and some system keeps them equal, as many hosts do")
}

func TestEnergyOnlyGrowsAndMatchesPower(t *testing.T) {
	s, clock := newTestSim(t, "dgxb200", "steady-training", 3)
	d, _ := s.DeviceGetHandleByIndex(0)
	var last uint64
	for range 30 {
		clock.t = clock.t.Add(700 * time.Millisecond)
		e, ret := d.GetTotalEnergyConsumption()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.GreaterOrEqual(t, e, last)
		last = e
	}
	// 21 s at roughly 0.85 × 1000 W.
	assert.InDelta(t, 21*850_000, float64(last), 21*120_000)
}

func TestMemoryLeakGrowsStepwiseToNearFull(t *testing.T) {
	s, clock := newTestSim(t, "dgxh100", "memory-leak", 1)
	d, _ := s.DeviceGetHandleByIndex(0)
	var prev uint64
	var grew int
	for range 400 {
		clock.t = clock.t.Add(time.Second)
		m, ret := d.GetMemoryInfo()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.GreaterOrEqual(t, m.Used, prev)
		assert.Equal(t, m.Total, m.Used+m.Free)
		m2, _ := d.GetMemoryInfo_v2()
		assert.Equal(t, m2.Total, m2.Used+m2.Free+m2.Reserved)
		if m.Used > prev && prev > 0 {
			grew++
		}
		prev = m.Used
	}
	m, _ := d.GetMemoryInfo()
	assert.Greater(t, float64(m.Used)/float64(m.Total), 0.95, "ends near full")
	assert.Greater(t, grew, 20, "grows in many steps")
}

func TestSamplesRespectLastSeenAndBufferLength(t *testing.T) {
	s, clock := newTestSim(t, "dgxh200", "idle", 1)
	d, _ := s.DeviceGetHandleByIndex(1)
	clock.t = clock.t.Add(300 * time.Second)
	vt, all, ret := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, 0)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.VALUE_TYPE_UNSIGNED_INT, vt)
	assert.Len(t, all, sampleBufferLen)
	last := all[len(all)-1].TimeStamp
	clock.t = clock.t.Add(5 * time.Second)
	_, newer, _ := d.GetSamples(nvml.GPU_UTILIZATION_SAMPLES, last)
	assert.Len(t, newer, 5)
	_, _, ret = d.GetSamples(nvml.TOTAL_POWER_SAMPLES, 0)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
}

func TestLostGPUAnswersGPUIsLostAndComesBack(t *testing.T) {
	s, _ := newTestSim(t, "dgxh100", "idle", 1)
	d, _ := s.DeviceGetHandleByIndex(4)
	s.SetLost(4, true)
	_, ret := d.GetPowerUsage()
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, ret)
	assert.Equal(t, nvml.ERROR_GPU_IS_LOST, d.GetFieldValues([]nvml.FieldValue{{FieldId: nvml.FI_DEV_MEMORY_TEMP}}))
	other, _ := s.DeviceGetHandleByIndex(5)
	_, ret = other.GetPowerUsage()
	assert.Equal(t, nvml.SUCCESS, ret)
	s.SetLost(4, false)
	_, ret = d.GetPowerUsage()
	assert.Equal(t, nvml.SUCCESS, ret)
}

func TestUnimplementedCallsAnswerNotSupportedInsteadOfPanicking(t *testing.T) {
	s, _ := newTestSim(t, "dgxa100", "idle", 1)
	d, _ := s.DeviceGetHandleByIndex(0)
	_, ret := d.GetBoardPartNumber()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = d.GetDisplayActive()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
}

func TestCallsAreCounted(t *testing.T) {
	s, _ := newTestSim(t, "dgxa100", "idle", 1)
	d, _ := s.DeviceGetHandleByIndex(0)
	_, _ = d.GetPowerUsage()
	_, _ = d.GetPowerUsage()
	assert.Equal(t, int64(2), s.Calls()["DeviceGetPowerUsage"])
	assert.Equal(t, int64(3), s.TotalCalls())
}

// TestGPMThroughNVML: GPM is served the way NVML serves it (samples allocated by the
// caller, metrics between two samples of one target), so the receiver's production GPM
// code runs against the simulator.
func TestGPMThroughNVML(t *testing.T) {
	s, clock := newTestSim(t, "dgxh100", "mig", 1)
	gpu, _ := s.DeviceGetHandleByIndex(3)
	sup, ret := gpu.GpmQueryDeviceSupport()
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint32(1), sup.IsSupportedDevice)

	a, _ := s.GpmSampleAlloc()
	b, _ := s.GpmSampleAlloc()
	require.Equal(t, nvml.SUCCESS, gpu.GpmSampleGet(a))
	clock.t = clock.t.Add(10 * time.Second)
	require.Equal(t, nvml.SUCCESS, gpu.GpmSampleGet(b))
	req := &nvml.GpmMetricsGetType{Sample1: a, Sample2: b, NumMetrics: 4}
	req.Metrics[0].MetricId = uint32(nvml.GPM_METRIC_SM_UTIL)
	req.Metrics[1].MetricId = uint32(nvml.GPM_METRIC_NVDEC_6_UTIL)
	req.Metrics[2].MetricId = uint32(nvml.GPM_METRIC_NVDEC_7_UTIL) // H100 has seven NVDECs
	req.Metrics[3].MetricId = uint32(nvml.GPM_METRIC_NVENC_0_UTIL) // and no NVENC
	require.Equal(t, nvml.SUCCESS, s.GpmMetricsGet(req))
	assert.Equal(t, uint32(nvml.SUCCESS), req.Metrics[0].NvmlReturn)
	assert.InDelta(t, 80, req.Metrics[0].Value, 15, "SM activity of a training GPU, in percent")
	assert.Equal(t, uint32(nvml.SUCCESS), req.Metrics[1].NvmlReturn)
	assert.Equal(t, uint32(nvml.ERROR_NOT_SUPPORTED), req.Metrics[2].NvmlReturn)
	assert.Equal(t, uint32(nvml.ERROR_NOT_SUPPORTED), req.Metrics[3].NvmlReturn)

	// Samples of different targets cannot be compared; a GPU instance must exist.
	mig, _ := s.DeviceGetHandleByIndex(0)
	assert.Equal(t, nvml.ERROR_NOT_FOUND, mig.GpmMigSampleGet(99, a))
	require.Equal(t, nvml.SUCCESS, a.MigGet(mig, int(s.devices[0].migs[0].gi.id)))
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, s.GpmMetricsGet(&nvml.GpmMetricsGetType{Sample1: a, Sample2: b}))

	a100, _ := newTestSim(t, "dgxa100", "idle", 1)
	d, _ := a100.DeviceGetHandleByIndex(0)
	sup, _ = d.GpmQueryDeviceSupport()
	assert.Zero(t, sup.IsSupportedDevice, "A100s have no GPM")
	x, _ := a100.GpmSampleAlloc()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, d.GpmSampleGet(x))
}

// TestChurnEndsAProcessAndAMIGInstance: churnAt seconds in, GPU 0's data loader is gone
// from the process list and GPU 1's second MIG instance from its MIG devices (its handle
// answers NOT_FOUND, as a stale MIG handle does); the rest carries on.
func TestChurnEndsAProcessAndAMIGInstance(t *testing.T) {
	s, clock := newTestSim(t, "dgxh100", "churn", 1)
	gpu0, _ := s.DeviceGetHandleByIndex(0)
	gpu1, _ := s.DeviceGetHandleByIndex(churnMIGGPU)
	names := func() []string {
		procs, ret := gpu0.GetComputeRunningProcesses()
		require.Equal(t, nvml.SUCCESS, ret)
		var out []string
		for _, p := range procs {
			name, ret := s.SystemGetProcessName(int(p.Pid))
			require.Equal(t, nvml.SUCCESS, ret)
			out = append(out, name)
		}
		return out
	}
	migCount := func() int {
		n := 0
		for i := 0; i < maxMigDevices; i++ {
			if _, ret := gpu1.GetMigDeviceHandleByIndex(i); ret == nvml.SUCCESS {
				n++
			}
		}
		return n
	}
	mode, _, ret := gpu1.GetMigMode()
	require.Equal(t, nvml.SUCCESS, ret)
	require.Equal(t, nvml.DEVICE_MIG_ENABLE, mode)

	clock.t = clock.t.Add(time.Duration(churnAt-1) * time.Second)
	assert.ElementsMatch(t, []string{"python3", "dataloader"}, names())
	require.Equal(t, 2, migCount())
	doomed, _ := gpu1.GetMigDeviceHandleByIndex(churnDestroyedSlot)
	_, ret = doomed.GetMemoryInfo()
	require.Equal(t, nvml.SUCCESS, ret)
	mem0, _ := gpu0.GetMemoryInfo_v2()

	clock.t = clock.t.Add(2 * time.Second)
	assert.Equal(t, []string{"python3"}, names())
	assert.Equal(t, 1, migCount())
	_, ret = doomed.GetMemoryInfo()
	assert.Equal(t, nvml.ERROR_NOT_FOUND, ret, "a destroyed instance's handle")
	procs, _ := gpu1.GetComputeRunningProcesses()
	assert.Len(t, procs, 1, "the destroyed instance's process is gone with it")
	mem1, _ := gpu0.GetMemoryInfo_v2()
	assert.Less(t, mem1.Used, mem0.Used, "the exited process's memory is freed")
	assert.Contains(t, s.MIGDevices()[churnMIGGPU], doomed.(*MigDevice).uuid, "MIGDevices lists the layout the scenario started with")
}

// The event wait sleeps like a driver's: an injected XID wakes it at once, and with
// nothing to hand out it answers ERROR_TIMEOUT once the timeout has passed.
func TestEventWaitWakesOnInjectionAndOtherwiseSleepsUntilTimeout(t *testing.T) {
	s, _ := newTestSim(t, "dgxh100", "steady-training", 1)
	set, ret := s.EventSetCreate()
	require.Equal(t, nvml.SUCCESS, ret)
	d, _ := s.DeviceGetHandleByIndex(3)
	require.Equal(t, nvml.SUCCESS, d.RegisterEvents(nvml.EventTypeXidCriticalError, set))

	start := time.Now()
	go func() {
		time.Sleep(50 * time.Millisecond)
		s.InjectXID(3, 79, 1)
	}()
	ev, ret := set.Wait(10_000)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, uint64(79), ev.EventData)
	assert.Less(t, time.Since(start), 5*time.Second, "an injected XID ends the wait")

	start = time.Now()
	_, ret = set.Wait(300)
	assert.Equal(t, nvml.ERROR_TIMEOUT, ret)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
}
