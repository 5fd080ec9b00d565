package gpusim

import (
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func newDriverSim(t *testing.T, opts Options) (*Simulator, *stepClock) {
	t.Helper()
	clock := &stepClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts.Seed, opts.Now = 1, clock.Now
	if opts.Scenario == "" {
		opts.Scenario = "steady-training"
	}
	s, err := New(opts)
	require.NoError(t, err)
	clock.t = clock.t.Add(30 * time.Second)
	return s, clock
}

func field(t *testing.T, d nvml.Device, id uint32, scope uint32) nvml.Return {
	t.Helper()
	v := []nvml.FieldValue{{FieldId: id, ScopeId: scope}}
	require.Equal(t, nvml.SUCCESS, d.GetFieldValues(v))
	return nvml.Return(v[0].NvmlReturn)
}

func TestDriverVersionIsTheSimulatedRelease(t *testing.T) {
	s, _ := newDriverSim(t, Options{System: "dgxh100"})
	v, _ := s.SystemGetDriverVersion()
	assert.Equal(t, DefaultDriver, v)
	nv, _ := s.SystemGetNVMLVersion()
	assert.Equal(t, "13."+DefaultDriver, nv, "R580 ships NVML 13")

	s, _ = newDriverSim(t, Options{System: "dgxh100", Driver: "535.104.05"})
	v, _ = s.SystemGetDriverVersion()
	assert.Equal(t, "535.104.05", v)
	cuda, _ := s.SystemGetCudaDriverVersion()
	assert.Equal(t, 12020, cuda)

	_, err := New(Options{System: "dgxh100", Scenario: "idle", Driver: "r535"})
	assert.ErrorContains(t, err, "r535")
	_, err = New(Options{System: "dgxh100", Scenario: "idle", PIDNamespace: "pod"})
	assert.ErrorContains(t, err, "pod")
}

// PCIe byte counters (field ids 197/198) exist from R555 on; GetPcieThroughput everywhere.
func TestPCIeByteCountersFirstAppearWithR555(t *testing.T) {
	for driver, want := range map[string]nvml.Return{"535.230.02": nvml.ERROR_NOT_SUPPORTED, "550.127.05": nvml.ERROR_NOT_SUPPORTED, "555.42.06": nvml.SUCCESS, "580.95.05": nvml.SUCCESS} {
		s, _ := newDriverSim(t, Options{System: "dgxh100", Driver: driver})
		d, _ := s.DeviceGetHandleByIndex(0)
		assert.Equal(t, want, field(t, d, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, 0), driver)
		kbs, ret := d.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES)
		assert.Equal(t, nvml.SUCCESS, ret, driver)
		assert.Positive(t, kbs)
	}
}

// Blackwell answers NOT_SUPPORTED to the NVLink DL error fields and counts in NVLink5's.
func TestBlackwellReplacesTheNVLinkErrorFields(t *testing.T) {
	b200, _ := newDriverSim(t, Options{System: "dgxb200"})
	h100, _ := newDriverSim(t, Options{System: "dgxh100"})
	b, _ := b200.DeviceGetHandleByIndex(0)
	h, _ := h100.DeviceGetHandleByIndex(0)
	for _, id := range []uint32{nvml.FI_DEV_NVLINK_ERROR_DL_CRC, nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY, nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY} {
		assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, field(t, b, id, 0))
		assert.Equal(t, nvml.SUCCESS, field(t, h, id, 0))
	}
	for _, id := range []uint32{nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS} {
		assert.Equal(t, nvml.SUCCESS, field(t, b, id, 0))
		assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, field(t, h, id, 0), "NVLink5 only")
	}
}

// From 535.113 a caller in a PID namespace of its own is shown no other container's
// process; older releases list host PIDs to everyone.
func TestProcessListFollowsTheCallersPIDNamespace(t *testing.T) {
	for _, c := range []struct {
		driver, ns string
		listed     bool
	}{
		{"535.104.05", PIDNamespaceContainer, true},
		{"535.113.01", PIDNamespaceContainer, false},
		{"580.95.05", PIDNamespaceContainer, false},
		{"580.95.05", PIDNamespaceHost, true},
	} {
		s, _ := newDriverSim(t, Options{System: "dgxh100", Driver: c.driver, PIDNamespace: c.ns})
		d, _ := s.DeviceGetHandleByIndex(0)
		procs, ret := d.GetComputeRunningProcesses()
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, c.listed, len(procs) > 0, "%s in the %s namespace", c.driver, c.ns)
		mem, _ := d.GetMemoryInfo_v2()
		assert.Positive(t, mem.Used, "the memory is in use either way")
		samples, ret := d.GetProcessUtilization(0)
		assert.Equal(t, nvml.SUCCESS, ret, "samples are not filtered by namespace")
		assert.NotEmpty(t, samples)
	}
}

// 535.43.02-535.86 write 32-byte entries that go-nvml reads as 24-byte ones: shuffled.
func TestWideProcessEntriesComeBackShuffled(t *testing.T) {
	good, _ := newDriverSim(t, Options{System: "dgxh100", Scenario: "shared-gpu", Driver: "535.104.05"})
	bad, _ := newDriverSim(t, Options{System: "dgxh100", Scenario: "shared-gpu", Driver: "535.54.03"})
	g, _ := good.DeviceGetHandleByIndex(0)
	b, _ := bad.DeviceGetHandleByIndex(0)
	want, _ := g.GetComputeRunningProcesses()
	got, _ := b.GetComputeRunningProcesses()
	require.Greater(t, len(want), 1)
	require.Len(t, got, len(want))
	assert.Equal(t, want[0].Pid, got[0].Pid, "the first entry starts where go-nvml expects it")
	assert.NotEqual(t, want[1], got[1], "the others do not")
}

func TestProcessUtilizationSamplesAreUntidyAsRealOnes(t *testing.T) {
	s, clock := newDriverSim(t, Options{System: "dgxh100", Scenario: "steady-training"})
	d, _ := s.DeviceGetHandleByIndex(0)
	all, ret := d.GetProcessUtilization(0)
	require.Equal(t, nvml.SUCCESS, ret)
	over := false
	for _, smp := range all {
		over = over || smp.SmUtil > 100
	}
	assert.True(t, over, "some share above 100 %%")
	last := all[len(all)-1].TimeStamp
	clock.t = clock.t.Add(time.Second)
	newer, _ := d.GetProcessUtilization(last)
	assert.Equal(t, last, newer[0].TimeStamp, "the sample at lastSeen comes back")
}

func TestMIGProfilesAnswerWithTheDevicesOwnIDs(t *testing.T) {
	s, _ := newDriverSim(t, Options{System: "dgxh100", Scenario: "mig-mixed"})
	d, _ := s.DeviceGetHandleByIndex(0)
	for enum, id := range map[int]uint32{nvml.GPU_INSTANCE_PROFILE_1_SLICE: 19, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: 20,
		nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: 15, nvml.GPU_INSTANCE_PROFILE_3_SLICE: 9, nvml.GPU_INSTANCE_PROFILE_7_SLICE: 0} {
		info, ret := d.GetGpuInstanceProfileInfo(enum)
		require.Equal(t, nvml.SUCCESS, ret)
		assert.Equal(t, id, info.Id, "enum %d", enum)
	}
	_, ret := d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_COUNT)
	assert.Equal(t, nvml.ERROR_INVALID_ARGUMENT, ret, "the end of the enumeration")
	_, ret = d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_8_SLICE)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)

	// GPU instance 1 (3g.40gb) holds three compute instances, each a MIG device.
	var ofGI1 []nvml.Device
	for i := range maxMigDevices {
		m, ret := d.GetMigDeviceHandleByIndex(i)
		if ret != nvml.SUCCESS {
			continue
		}
		if gi, _ := m.GetGpuInstanceId(); gi == 1 {
			ofGI1 = append(ofGI1, m)
		}
	}
	require.Len(t, ofGI1, 3)
	gi, ret := d.GetGpuInstanceById(1)
	require.Equal(t, nvml.SUCCESS, ret)
	info, _ := gi.GetInfo()
	assert.Equal(t, uint32(9), info.ProfileId, "the unique id, not GPU_INSTANCE_PROFILE_3_SLICE (2)")
	attrs, _ := ofGI1[1].GetAttributes()
	assert.Equal(t, uint32(3), attrs.GpuInstanceSliceCount)
	assert.Equal(t, uint32(1), attrs.ComputeInstanceSliceCount)
	mem, _ := ofGI1[0].GetMemoryInfo_v2()
	assert.Equal(t, uint64(40448)*mib, mem.Total)
	assert.Positive(t, mem.Reserved)
}

// Without the MIG monitor capability the calls nvml.h marks "requires privileged user"
// answer NO_PERMISSION; per-instance reads still work.
func TestMIGWithoutTheMonitorCapability(t *testing.T) {
	s, _ := newDriverSim(t, Options{System: "dgxh100", Scenario: "mig-mixed", NoMIGMonitor: true})
	d, _ := s.DeviceGetHandleByIndex(0)
	_, ret := d.GetGpuInstanceById(1)
	assert.Equal(t, nvml.ERROR_NO_PERMISSION, ret)
	_, ret = d.GetComputeRunningProcesses()
	assert.Equal(t, nvml.ERROR_NO_PERMISSION, ret)
	_, ret = d.GetMemoryInfo_v2()
	assert.Equal(t, nvml.ERROR_NO_PERMISSION, ret)
	m, ret := d.GetMigDeviceHandleByIndex(0)
	require.Equal(t, nvml.SUCCESS, ret)
	procs, ret := m.GetComputeRunningProcesses()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Len(t, procs, 1)
	_, ret = m.GetAttributes()
	assert.Equal(t, nvml.SUCCESS, ret)
	_, ret = d.GetGpuInstanceProfileInfo(nvml.GPU_INSTANCE_PROFILE_1_SLICE)
	assert.Equal(t, nvml.SUCCESS, ret)
}

func TestTemperatureVFirstAppearsWithR570(t *testing.T) {
	old, _ := newDriverSim(t, Options{System: "dgxh100", Driver: "550.127.05"})
	cur, _ := newDriverSim(t, Options{System: "dgxh100"})
	assert.Error(t, old.LookupSymbol("nvmlDeviceGetTemperatureV"))
	assert.NoError(t, cur.LookupSymbol("nvmlDeviceGetTemperatureV"))
	d, _ := cur.DeviceGetHandleByIndex(0)
	temp, ret := d.(*Device).TemperatureV1(nvml.TEMPERATURE_GPU)
	require.Equal(t, nvml.SUCCESS, ret)
	assert.Positive(t, temp.Temperature)
}

func TestEncoderUtilizationWithAndWithoutNVENC(t *testing.T) {
	h100, _ := newDriverSim(t, Options{System: "dgxh100"})
	l4, _ := newDriverSim(t, Options{System: "l4"})
	h, _ := h100.DeviceGetHandleByIndex(0)
	u, _, ret := h.GetEncoderUtilization()
	assert.Equal(t, nvml.SUCCESS, ret, "nvidia-smi -q shows Encoder : 0 % on H100s")
	assert.Zero(t, u)
	n, _ := l4.DeviceGetCount()
	assert.Equal(t, 4, n)
	l, _ := l4.DeviceGetHandleByIndex(0)
	_, _, ret = l.GetEncoderUtilization()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, field(t, l, nvml.FI_DEV_MEMORY_TEMP, 0), "GDDR6 has no memory sensor")
	sup, _ := l.GpmQueryDeviceSupport()
	assert.Zero(t, sup.IsSupportedDevice, "Ada has no GPM")
}

// A vGPU guest claims GPM but cannot sample it, and the hypervisor keeps power and
// temperatures.
func TestVGPUGuest(t *testing.T) {
	s, _ := newDriverSim(t, Options{System: "vgpu-h100"})
	d, _ := s.DeviceGetHandleByIndex(0)
	sup, _ := d.GpmQueryDeviceSupport()
	assert.Equal(t, uint32(1), sup.IsSupportedDevice)
	smp, _ := s.GpmSampleAlloc()
	assert.Equal(t, nvml.ERROR_NOT_FOUND, d.GpmSampleGet(smp))
	_, ret := d.GetPowerUsage()
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	_, ret = d.GetTemperature(nvml.TEMPERATURE_GPU)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, field(t, d, nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION, 0))
	_, ret = d.GetPcieThroughput(nvml.PCIE_UTIL_TX_BYTES)
	assert.Equal(t, nvml.ERROR_NOT_SUPPORTED, ret)
	mem, ret := d.GetMemoryInfo_v2()
	assert.Equal(t, nvml.SUCCESS, ret)
	assert.Positive(t, mem.Used)
}
