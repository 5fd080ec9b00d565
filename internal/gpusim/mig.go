package gpusim

import (
	"crypto/sha256"
	"fmt"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// MIG as the driver presents it (nvml.h, the MIG user guide): a GPU instance (GI) owns a
// profile's slices and memory; one or more compute instances (CI) share it, and each CI is
// one MIG device with its own handle and MIG UUID. The GI's profile id is the device's
// unique id (migprofiles.go). Calls that "require privileged user" in nvml.h answer
// NO_PERMISSION to a caller without the MIG monitor capability, which is what the driver
// checks (NV_RM_CAP_SYS_SMC_MONITOR, /proc/driver/nvidia/capabilities/mig/monitor).

// MIGInstance is one GPU instance of a layout: its profile, an NVML_GPU_INSTANCE_PROFILE_*
// enum, and how many compute instances split it (0 or 1: one using all of it).
type MIGInstance struct {
	Profile          int
	ComputeInstances int
}

// migLayouts are the MIG layouts scenarios start with, by scenario and GPU index. In `mig`
// GPU 0 is split into mixed sizes, GPU 1 into seven of the smallest; `mig-mixed` adds a GPU
// instance shared by three compute instances and the +me profile; in `churn` GPU 1 is split
// in two halves, the second of which is destroyed churnAt seconds in (churnDestroyedSlot).
// The other GPUs run without MIG.
var migLayouts = map[string]map[int][]MIGInstance{
	"mig": {
		0: instances(nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE),
		1: instances(nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE,
			nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE),
	},
	"mig-mixed": {
		0: {{Profile: nvml.GPU_INSTANCE_PROFILE_3_SLICE, ComputeInstances: 3}, {Profile: nvml.GPU_INSTANCE_PROFILE_2_SLICE},
			{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1}, {Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE}},
		1: instances(nvml.GPU_INSTANCE_PROFILE_4_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2, nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2),
		2: instances(nvml.GPU_INSTANCE_PROFILE_7_SLICE),
	},
	"churn": {
		churnMIGGPU: instances(nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE),
	},
}

func instances(profiles ...int) []MIGInstance {
	out := make([]MIGInstance, len(profiles))
	for i, p := range profiles {
		out[i] = MIGInstance{Profile: p}
	}
	return out
}

// The MIG instance of `churn` that is destroyed churnAt seconds in.
const (
	churnMIGGPU        = 1
	churnDestroyedSlot = 1
)

// maxMigDevices is the most MIG devices one GPU can hold.
const maxMigDevices = 7

// gpuInstance is one GPU instance.
type gpuInstance struct {
	parent  *Device
	id      uint32
	enum    int
	profile migProfile
	// slot is its place in the layout, which sets how busy it is.
	slot int
}

// MigDevice is one MIG device: a compute instance of a GPU instance, with one process.
type MigDevice struct {
	*mock.Device
	parent   *Device
	gi       *gpuInstance
	ci       uint32
	ciSlices uint32
	// ciCount is how many compute instances share the GPU instance.
	ciCount int
	uuid    string
	pid     uint32
	// destroyed instances answer NOT_FOUND, as NVML does for a stale MIG handle.
	destroyed atomic.Bool
	// endsAt, when positive, is the simulated second from which the instance is destroyed
	// (a scenario tearing it down while the receiver runs).
	endsAt float64
}

var _ nvml.Device = (*MigDevice)(nil)

// setUpMIG enables MIG on the GPUs of the scenario's layout and creates their instances.
func (s *Simulator) setUpMIG(scenario string) error {
	for index, layout := range migLayouts[scenario] {
		if index < len(s.devices) {
			if err := s.SetMIGInstances(index, layout); err != nil {
				return err
			}
		}
	}
	if scenario == "churn" && churnMIGGPU < len(s.devices) {
		s.devices[churnMIGGPU].migs[churnDestroyedSlot].endsAt = churnAt
	}
	return nil
}

// gone reports whether the instance has been destroyed (by a new layout or its scenario).
func (m *MigDevice) gone() bool {
	return m.destroyed.Load() || m.endsAt > 0 && m.parent.sim.elapsed() >= m.endsAt
}

// liveMIGs are the GPU's MIG devices that exist now.
func (d *Device) liveMIGs() []*MigDevice {
	out := make([]*MigDevice, 0, len(d.migs))
	for _, m := range d.migs {
		if !m.gone() {
			out = append(out, m)
		}
	}
	return out
}

// SetMIGLayout changes the MIG layout of GPU `index` as mig-parted or a DRA driver would:
// one GPU instance per profile (an NVML_GPU_INSTANCE_PROFILE_* enum), each with one compute
// instance using all of it. No profiles turn MIG off. Not safe during a scrape.
func (s *Simulator) SetMIGLayout(index int, profiles []int) error {
	return s.SetMIGInstances(index, instances(profiles...))
}

// SetMIGInstances is SetMIGLayout with the compute instances of each GPU instance given.
func (s *Simulator) SetMIGInstances(index int, layout []MIGInstance) error {
	if index < 0 || index >= len(s.devices) {
		return fmt.Errorf("no GPU %d", index)
	}
	d := s.devices[index]
	table := s.machine.sys.mig
	for _, m := range d.migs {
		m.destroyed.Store(true)
	}
	d.migs = nil
	d.migLayouts++
	for slot, inst := range layout {
		p, ok := table[inst.Profile]
		if !ok {
			return fmt.Errorf("MIG profile %d is not offered by %s", inst.Profile, s.system)
		}
		cis := max(1, inst.ComputeInstances)
		if p.slices%uint32(cis) != 0 {
			return fmt.Errorf("%d compute instances do not split a %d-slice GPU instance", cis, p.slices)
		}
		gi := &gpuInstance{parent: d, id: uint32(slot + 1), enum: inst.Profile, profile: p, slot: slot}
		for ci := 0; ci < cis; ci++ {
			m := &MigDevice{
				Device:   &mock.Device{},
				parent:   d,
				gi:       gi,
				ci:       uint32(ci),
				ciSlices: p.slices / uint32(cis),
				ciCount:  cis,
				uuid:     migUUID(s.system, s.seed, index, len(d.migs), d.migLayouts),
				pid:      uint32(30000 + index*10 + len(d.migs)),
			}
			FillNotSupported(m.Device)
			d.migs = append(d.migs, m)
		}
	}
	if len(d.migs) > maxMigDevices {
		return fmt.Errorf("%d MIG devices on GPU %d: at most %d", len(d.migs), index, maxMigDevices)
	}
	return nil
}

// migUUID is deterministic; the first layout of a GPU keeps the UUIDs it always had, a
// later one gets new ones.
func migUUID(system string, seed int64, index, slot, layout int) string {
	key := fmt.Sprintf("mig/%s/%d/%d/%d", system, seed, index, slot)
	if layout > 1 {
		key += fmt.Sprintf("/%d", layout)
	}
	b := sha256.Sum256([]byte(key))
	return fmt.Sprintf("MIG-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func (d *Device) migEnabled() bool { return len(d.migs) > 0 }

// GetMigMode reports whether MIG is enabled (current and pending).
func (d *Device) GetMigMode() (int, int, nvml.Return) {
	if ret := d.ret("DeviceGetMigMode"); ret != nvml.SUCCESS {
		return 0, 0, ret
	}
	if d.sim.machine.sys.mig == nil {
		return 0, 0, nvml.ERROR_NOT_SUPPORTED
	}
	if d.migEnabled() {
		return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
	}
	return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
}

// GetMaxMigDeviceCount returns how many MIG devices the GPU can hold.
func (d *Device) GetMaxMigDeviceCount() (int, nvml.Return) {
	if ret := d.ret("DeviceGetMaxMigDeviceCount"); ret != nvml.SUCCESS {
		return 0, ret
	}
	if d.sim.machine.sys.mig == nil {
		return 0, nvml.ERROR_NOT_SUPPORTED
	}
	return maxMigDevices, nvml.SUCCESS
}

// GetMigDeviceHandleByIndex returns MIG device i, NOT_FOUND for an empty slot.
func (d *Device) GetMigDeviceHandleByIndex(i int) (nvml.Device, nvml.Return) {
	if ret := d.ret("DeviceGetMigDeviceHandleByIndex"); ret != nvml.SUCCESS {
		return nil, ret
	}
	live := d.liveMIGs()
	if i < 0 || i >= len(live) {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return live[i], nvml.SUCCESS
}

// GetGpuInstanceById returns the GPU instance with that id. nvml.h: "Requires privileged user".
func (d *Device) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	if ret := d.ret("DeviceGetGpuInstanceById"); ret != nvml.SUCCESS {
		return nil, ret
	}
	if !d.sim.migMonitor {
		return nil, nvml.ERROR_NO_PERMISSION
	}
	for _, m := range d.liveMIGs() {
		if int(m.gi.id) == id {
			gi := m.gi
			inst := &mock.GpuInstance{}
			FillNotSupported(inst)
			inst.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) {
				d.sim.count("GpuInstanceGetInfo")
				return nvml.GpuInstanceInfo{Device: d, Id: gi.id, ProfileId: gi.profile.id,
					Placement: nvml.GpuInstancePlacement{Start: uint32(gi.slot), Size: gi.profile.slices}}, nvml.SUCCESS
			}
			return inst, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// GetGpuInstanceProfileInfo describes a profile, asked for by its enum; the answer's Id is
// the device's unique profile id. Enums past the last answer INVALID_ARGUMENT (how nvml.h
// says to enumerate them), profiles the GPU lacks NOT_SUPPORTED.
func (d *Device) GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if ret := d.ret("DeviceGetGpuInstanceProfileInfo"); ret != nvml.SUCCESS {
		return nvml.GpuInstanceProfileInfo{}, ret
	}
	if profile < 0 || profile >= nvml.GPU_INSTANCE_PROFILE_COUNT {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
	}
	p, ok := d.sim.machine.sys.mig[profile]
	if !ok {
		return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
	}
	return p.info(), nvml.SUCCESS
}

// GpuInstanceProfileName answers nvmlDeviceGetGpuInstanceProfileInfoV's v2 name of a
// profile, asked for by its enum ("MIG 1g.10gb"). go-nvml's GetGpuInstanceProfileInfoV
// returns a handler that calls the C library itself, so the simulator offers the call under
// this name (nvmlclient uses it for simulated devices). It needs no privilege.
func (d *Device) GpuInstanceProfileName(profile int) (string, nvml.Return) {
	if ret := d.ret("DeviceGetGpuInstanceProfileInfoV"); ret != nvml.SUCCESS {
		return "", ret
	}
	if profile < 0 || profile >= nvml.GPU_INSTANCE_PROFILE_COUNT {
		return "", nvml.ERROR_INVALID_ARGUMENT
	}
	p, ok := d.sim.machine.sys.mig[profile]
	if !ok {
		return "", nvml.ERROR_NOT_SUPPORTED
	}
	return p.name, nvml.SUCCESS
}

// migMemory is what the GPU instance's processes hold, and the driver's reservation in it.
func (gi *gpuInstance) memory() (used, reserved, total uint64) {
	total = gi.profile.memoryMiB * mib
	reserved = total / 256
	used = uint64(float64(total) * (0.4 + 0.15*float64(gi.slot%4)))
	return used, reserved, total
}

// migProcesses lists the processes of the live MIG devices, as the parent handle does for
// a caller with the MIG monitor capability.
func (d *Device) migProcesses() []nvml.ProcessInfo {
	live := d.liveMIGs()
	out := make([]nvml.ProcessInfo, 0, len(live))
	for _, m := range live {
		out = append(out, m.process())
	}
	return out
}

// process is the MIG device's process: its compute instance's share of the GPU
// instance's memory.
func (m *MigDevice) process() nvml.ProcessInfo {
	used, _, _ := m.gi.memory()
	return nvml.ProcessInfo{Pid: m.pid, UsedGpuMemory: used / uint64(m.ciCount), GpuInstanceId: m.gi.id, ComputeInstanceId: m.ci}
}

func (m *MigDevice) read(call string) nvml.Return {
	if ret := m.parent.ret(call); ret != nvml.SUCCESS {
		return ret
	}
	if m.gone() {
		return nvml.ERROR_NOT_FOUND
	}
	return nvml.SUCCESS
}

// GetUUID returns the MIG UUID.
func (m *MigDevice) GetUUID() (string, nvml.Return) {
	if ret := m.read("MigDeviceGetUUID"); ret != nvml.SUCCESS {
		return "", ret
	}
	return m.uuid, nvml.SUCCESS
}

// IsMigDeviceHandle is true for a MIG device.
func (m *MigDevice) IsMigDeviceHandle() (bool, nvml.Return) {
	return true, m.read("MigDeviceIsMigDeviceHandle")
}

// GetGpuInstanceId returns the GPU instance id.
func (m *MigDevice) GetGpuInstanceId() (int, nvml.Return) {
	return int(m.gi.id), m.read("MigDeviceGetGpuInstanceId")
}

// GetComputeInstanceId returns the compute instance id.
func (m *MigDevice) GetComputeInstanceId() (int, nvml.Return) {
	return int(m.ci), m.read("MigDeviceGetComputeInstanceId")
}

// GetDeviceHandleFromMigDeviceHandle returns the parent GPU.
func (m *MigDevice) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	return m.parent, m.read("MigDeviceGetDeviceHandleFromMigDeviceHandle")
}

// GetAttributes describes the MIG device: its compute instance's share of the SMs, its GPU
// instance's slices, engines and memory. It needs no privilege.
func (m *MigDevice) GetAttributes() (nvml.DeviceAttributes, nvml.Return) {
	if ret := m.read("MigDeviceGetAttributes"); ret != nvml.SUCCESS {
		return nvml.DeviceAttributes{}, ret
	}
	p := m.gi.profile
	return nvml.DeviceAttributes{
		MultiprocessorCount:       p.multiprocessors * m.ciSlices / p.slices,
		SharedCopyEngineCount:     p.slices,
		SharedDecoderCount:        p.decoders,
		SharedJpegCount:           p.jpegs,
		SharedOfaCount:            p.ofas,
		GpuInstanceSliceCount:     p.slices,
		ComputeInstanceSliceCount: m.ciSlices,
		MemorySizeMB:              p.memoryMiB,
	}, nvml.SUCCESS
}

// GetMemoryInfo returns the GPU instance's framebuffer; the v1 call counts the driver's
// reservation as used.
func (m *MigDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	if ret := m.read("MigDeviceGetMemoryInfo"); ret != nvml.SUCCESS {
		return nvml.Memory{}, ret
	}
	used, reserved, total := m.gi.memory()
	return nvml.Memory{Total: total, Used: used + reserved, Free: total - used - reserved}, nvml.SUCCESS
}

// GetMemoryInfo_v2 reports the reservation apart from Used.
func (m *MigDevice) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) {
	if ret := m.read("MigDeviceGetMemoryInfo_v2"); ret != nvml.SUCCESS {
		return nvml.Memory_v2{}, ret
	}
	used, reserved, total := m.gi.memory()
	return nvml.Memory_v2{Version: nvml.STRUCT_VERSION(nvml.Memory_v2{}, 2), Total: total, Reserved: reserved, Used: used, Free: total - used - reserved}, nvml.SUCCESS
}

// GetComputeRunningProcesses lists the MIG device's process; per-instance queries need no
// privilege. The caller's PID namespace applies as on the whole GPU.
func (m *MigDevice) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	if ret := m.read("MigDeviceGetComputeRunningProcesses"); ret != nvml.SUCCESS {
		return nil, ret
	}
	return m.parent.visible([]nvml.ProcessInfo{m.process()}), nvml.SUCCESS
}

// GetGraphicsRunningProcesses: MIG supports no graphics.
func (m *MigDevice) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	if ret := m.read("MigDeviceGetGraphicsRunningProcesses"); ret != nvml.SUCCESS {
		return nil, ret
	}
	return nil, nvml.SUCCESS
}

// GpmQueryDeviceSupport: the parent's answer.
func (m *MigDevice) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	return m.parent.GpmQueryDeviceSupport()
}

// GpmSampleGet samples the MIG device (nvml.h: "supports the device handle and MIG device handle").
func (m *MigDevice) GpmSampleGet(sample nvml.GpmSample) nvml.Return {
	if ret := m.read("MigDeviceGpmSampleGet"); ret != nvml.SUCCESS {
		return ret
	}
	return m.parent.takeGpmSample("GpmSampleGet", sample, int(m.gi.id), int(m.ci))
}

// MIGDevices returns the MIG UUIDs of each GPU that has MIG instances, by GPU index (the
// instances a scenario destroys later included).
func (s *Simulator) MIGDevices() map[int][]string {
	out := map[int][]string{}
	for _, d := range s.devices {
		for _, m := range d.migs {
			out[d.index] = append(out[d.index], m.uuid)
		}
	}
	return out
}
