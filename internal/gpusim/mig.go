package gpusim

import (
	"crypto/sha256"
	"fmt"
	"sync/atomic"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

// migLayouts are the MIG layouts scenarios start with, by scenario and GPU index. In `mig`
// GPU 0 is split into mixed sizes, GPU 1 into seven of the smallest; in `churn` GPU 1 is
// split in two halves, the second of which is destroyed churnAt seconds in
// (churnDestroyedSlot). The other GPUs run without MIG.
var migLayouts = map[string]map[int][]int{
	"mig": {
		0: {nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_2_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE},
		1: {nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE,
			nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE, nvml.GPU_INSTANCE_PROFILE_1_SLICE},
	},
	"churn": {
		churnMIGGPU: {nvml.GPU_INSTANCE_PROFILE_3_SLICE, nvml.GPU_INSTANCE_PROFILE_3_SLICE},
	},
}

// The MIG instance of `churn` that is destroyed churnAt seconds in.
const (
	churnMIGGPU        = 1
	churnDestroyedSlot = 1
)

// maxMigDevices is the most MIG instances one GPU can hold.
const maxMigDevices = 7

// MigDevice is one MIG instance: a GPU instance with one compute instance using all of it,
// and one process.
type MigDevice struct {
	*mock.Device
	parent  *Device
	gi      nvml.GpuInstance
	slot    int
	giID    uint32
	uuid    string
	total   uint64
	pid     uint32
	profile nvml.GpuInstanceProfileInfo
	// destroyed instances answer NOT_FOUND, as NVML does for a stale MIG handle.
	destroyed atomic.Bool
	// endsAt, when positive, is the simulated second from which the instance is destroyed
	// (a scenario tearing it down while the receiver runs).
	endsAt float64
}

var _ nvml.Device = (*MigDevice)(nil)

// setUpMIG enables MIG on the GPUs of the scenario's layout and creates their instances.
func (s *Simulator) setUpMIG(scenario string) error {
	for index, profiles := range migLayouts[scenario] {
		if index < len(s.devices) {
			if err := s.SetMIGLayout(index, profiles); err != nil {
				return err
			}
		}
	}
	if scenario == "churn" && churnMIGGPU < len(s.devices) {
		s.devices[churnMIGGPU].migs[churnDestroyedSlot].endsAt = churnAt
	}
	return nil
}

// gone reports whether the instance has been destroyed (by SetMIGLayout or its scenario).
func (m *MigDevice) gone() bool {
	return m.destroyed.Load() || m.endsAt > 0 && m.parent.sim.elapsed() >= m.endsAt
}

// liveMIGs are the GPU's MIG instances that exist now.
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
// the GPU's instances are destroyed and one is created per profile (a
// nvml.GPU_INSTANCE_PROFILE_*), through the mock server so that GPU-instance look-ups on
// the parent answer consistently. No profiles turn MIG off. Not safe during a scrape.
func (s *Simulator) SetMIGLayout(index int, profiles []int) error {
	if index < 0 || index >= len(s.devices) {
		return fmt.Errorf("no GPU %d", index)
	}
	d := s.devices[index]
	for _, m := range d.migs {
		m.destroyed.Store(true)
		m.gi.Destroy()
	}
	d.migs = nil
	d.migLayouts++
	d.Device.MigMode = nvml.DEVICE_MIG_DISABLE
	if len(profiles) > 0 {
		d.Device.MigMode = nvml.DEVICE_MIG_ENABLE
	}
	for slot, profileID := range profiles {
		info, ret := d.Device.GetGpuInstanceProfileInfo(profileID)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("MIG profile %d on %s: %d", profileID, s.system, ret)
		}
		gi, ret := d.Device.CreateGpuInstance(&info)
		if ret != nvml.SUCCESS {
			return fmt.Errorf("create MIG instance on %s: %d", s.system, ret)
		}
		giInfo, _ := gi.GetInfo()
		m := &MigDevice{
			Device:  &mock.Device{},
			parent:  d,
			gi:      gi,
			slot:    slot,
			giID:    giInfo.Id,
			uuid:    migUUID(s.system, s.seed, index, slot, d.migLayouts),
			total:   info.MemorySizeMB * mib,
			pid:     uint32(30000 + index*10 + slot),
			profile: info,
		}
		FillNotSupported(m.Device)
		d.migs = append(d.migs, m)
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

// GetGpuInstanceById returns the GPU instance with that id.
func (d *Device) GetGpuInstanceById(id int) (nvml.GpuInstance, nvml.Return) {
	if ret := d.ret("DeviceGetGpuInstanceById"); ret != nvml.SUCCESS {
		return nil, ret
	}
	d.Device.RLock()
	defer d.Device.RUnlock()
	for gi := range d.Device.GpuInstances {
		if int(gi.Info.Id) == id {
			return gi, nvml.SUCCESS
		}
	}
	return nil, nvml.ERROR_NOT_FOUND
}

// GetGpuInstanceProfileInfo returns a MIG profile's size.
func (d *Device) GetGpuInstanceProfileInfo(profile int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
	if ret := d.ret("DeviceGetGpuInstanceProfileInfo"); ret != nvml.SUCCESS {
		return nvml.GpuInstanceProfileInfo{}, ret
	}
	return d.Device.GetGpuInstanceProfileInfo(profile)
}

func (d *Device) migProcesses() []nvml.ProcessInfo {
	live := d.liveMIGs()
	out := make([]nvml.ProcessInfo, 0, len(live))
	for _, m := range live {
		out = append(out, nvml.ProcessInfo{Pid: m.pid, UsedGpuMemory: m.used(), GpuInstanceId: m.giID, ComputeInstanceId: 0})
	}
	return out
}

// used is the instance's framebuffer in use: its process holds 40–85 % depending on size.
func (m *MigDevice) used() uint64 {
	return uint64(float64(m.total) * (0.4 + 0.15*float64(m.slot%4)))
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
	return int(m.giID), m.read("MigDeviceGetGpuInstanceId")
}

// GetComputeInstanceId returns the compute instance id.
func (m *MigDevice) GetComputeInstanceId() (int, nvml.Return) {
	return 0, m.read("MigDeviceGetComputeInstanceId")
}

// GetDeviceHandleFromMigDeviceHandle returns the parent GPU.
func (m *MigDevice) GetDeviceHandleFromMigDeviceHandle() (nvml.Device, nvml.Return) {
	return m.parent, m.read("MigDeviceGetDeviceHandleFromMigDeviceHandle")
}

// GetMemoryInfo returns the instance's framebuffer.
func (m *MigDevice) GetMemoryInfo() (nvml.Memory, nvml.Return) {
	if ret := m.read("MigDeviceGetMemoryInfo"); ret != nvml.SUCCESS {
		return nvml.Memory{}, ret
	}
	used := m.used()
	return nvml.Memory{Total: m.total, Used: used, Free: m.total - used}, nvml.SUCCESS
}

// GetMemoryInfo_v2 returns the instance's framebuffer (no separate reservation).
func (m *MigDevice) GetMemoryInfo_v2() (nvml.Memory_v2, nvml.Return) {
	mem, ret := m.GetMemoryInfo()
	return nvml.Memory_v2{Total: mem.Total, Used: mem.Used, Free: mem.Free}, ret
}

// GetComputeRunningProcesses lists the instance's process.
func (m *MigDevice) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	if ret := m.read("MigDeviceGetComputeRunningProcesses"); ret != nvml.SUCCESS {
		return nil, ret
	}
	return []nvml.ProcessInfo{{Pid: m.pid, UsedGpuMemory: m.used(), GpuInstanceId: m.giID}}, nvml.SUCCESS
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
