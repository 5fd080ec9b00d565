package gpusim

import (
	"encoding/binary"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// noInstance is what NVML puts in ProcessInfo.GpuInstanceId outside MIG.
const noInstance = 0xFFFFFFFF

func (d *Device) processInfos(call string, graphics bool) ([]nvml.ProcessInfo, nvml.Return) {
	_, r, ret := d.read(call)
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	if d.migEnabled() {
		if graphics {
			return nil, nvml.SUCCESS
		}
		// The parent handle lists every instance's processes only to a caller with the MIG
		// monitor capability (subdeviceCtrlCmdGpuGetPids: NV_ERR_INSUFFICIENT_PERMISSIONS).
		if !d.sim.migMonitor {
			return nil, nvml.ERROR_NO_PERMISSION
		}
		return d.asGoNVMLReads(d.visible(d.migProcesses())), nvml.SUCCESS
	}
	used, _, _ := d.memory(r)
	var out []nvml.ProcessInfo
	for _, p := range r.processes {
		if p.graphics != graphics {
			continue
		}
		out = append(out, nvml.ProcessInfo{
			Pid:               p.pid,
			UsedGpuMemory:     uint64(p.memShare * float64(used)),
			GpuInstanceId:     noInstance,
			ComputeInstanceId: noInstance,
		})
	}
	return d.asGoNVMLReads(d.visible(out)), nvml.SUCCESS
}

// visible is what the driver lists to the caller: from 535.113 on, only the processes of
// the caller's PID namespace (_gpuConvertPid drops the others). The simulated processes
// all run in other containers, so a caller with a namespace of its own sees none.
func (d *Device) visible(infos []nvml.ProcessInfo) []nvml.ProcessInfo {
	if d.sim.hostPIDNamespace || !d.sim.driver.listsOnlyOwnPIDNamespace() {
		return infos
	}
	return nil
}

// asGoNVMLReads is what go-nvml decodes from the list. Releases 535.43.02 to 535.86 write
// 32-byte entries (with usedGpuCcProtectedMemory) into go-nvml's 24-byte ones: go-nvml
// then reads PIDs and memory from the wrong offsets (go-nvml#75), and the real library
// writes past go-nvml's buffer, which the simulator cannot show.
func (d *Device) asGoNVMLReads(infos []nvml.ProcessInfo) []nvml.ProcessInfo {
	if !d.sim.driver.writesWideProcessInfo() || len(infos) == 0 {
		return infos
	}
	const wide, narrow = 32, 24
	raw := make([]byte, wide*len(infos))
	for i, p := range infos {
		b := raw[i*wide:]
		binary.LittleEndian.PutUint32(b[0:], p.Pid)
		binary.LittleEndian.PutUint64(b[8:], p.UsedGpuMemory)
		binary.LittleEndian.PutUint32(b[16:], p.GpuInstanceId)
		binary.LittleEndian.PutUint32(b[20:], p.ComputeInstanceId)
		binary.LittleEndian.PutUint64(b[24:], 0) // usedGpuCcProtectedMemory
	}
	out := make([]nvml.ProcessInfo, len(infos))
	for i := range out {
		b := raw[i*narrow:]
		out[i] = nvml.ProcessInfo{
			Pid:               binary.LittleEndian.Uint32(b[0:]),
			UsedGpuMemory:     binary.LittleEndian.Uint64(b[8:]),
			GpuInstanceId:     binary.LittleEndian.Uint32(b[16:]),
			ComputeInstanceId: binary.LittleEndian.Uint32(b[20:]),
		}
	}
	return out
}

// GetComputeRunningProcesses lists the CUDA processes on the GPU.
func (d *Device) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.processInfos("DeviceGetComputeRunningProcesses", false)
}

// GetGraphicsRunningProcesses lists the graphics processes on the GPU.
func (d *Device) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.processInfos("DeviceGetGraphicsRunningProcesses", true)
}

// overrangeSampleEvery: now and then a glitched sample with a share above 100 % sits beside
// a process's real one, as real drivers return them (nvtop#110).
const overrangeSampleEvery = 13

// GetProcessUtilization returns one sample per active process per simulated second newer
// than lastSeen, plus the one at lastSeen itself (real drivers return samples no newer
// than asked for, which callers must drop); NOT_FOUND when there is none (as the real
// driver does); NOT_SUPPORTED under MIG. A process that did nothing in a second has no
// sample for it (nvml.h: "per process running, that had some non-zero utilization"), and
// a process that has exited keeps its samples in the buffer. Samples are not filtered by
// the caller's PID namespace: a caller with one of its own gets the other containers'
// samples with their host PIDs (570.86.15 translates only the PIDs it can see), while the
// process list shows none of them.
func (d *Device) GetProcessUtilization(lastSeen uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
	t, _, ret := d.read("DeviceGetProcessUtilization")
	if ret != nvml.SUCCESS {
		return nil, ret
	}
	if d.migEnabled() {
		return nil, nvml.ERROR_NOT_SUPPORTED
	}
	startMicros := uint64(d.sim.start.UnixMicro())
	last := int64(t)
	first := max(0, last-sampleBufferLen+1)
	var out []nvml.ProcessUtilizationSample
	for k := first; k <= last; k++ {
		ts := startMicros + uint64(k)*1_000_000
		if ts < lastSeen {
			continue
		}
		r := d.sim.scenario(d.sim.machine, d.index, float64(k))
		for i, p := range r.processes {
			if p.smShare == 0 {
				continue
			}
			s := nvml.ProcessUtilizationSample{
				Pid:       p.pid,
				TimeStamp: ts,
				SmUtil:    roundU32(r.utilization * p.smShare),
				MemUtil:   roundU32(r.memoryCopyUtil * p.smShare),
				EncUtil:   roundU32(d.encoderUtil(r) * p.smShare),
				DecUtil:   roundU32(r.decoderUtil * p.smShare),
			}
			out = append(out, s)
			if i == 0 && k%overrangeSampleEvery == 0 {
				// A glitched entry beside the real one, for the same process and time.
				bad := s
				bad.SmUtil += 100
				out = append(out, bad)
			}
		}
	}
	if len(out) == 0 {
		return nil, nvml.ERROR_NOT_FOUND
	}
	return out, nvml.SUCCESS
}

// SystemGetProcessName returns the name of a simulated process.
func (s *Simulator) SystemGetProcessName(pid int) (string, nvml.Return) {
	s.count("SystemGetProcessName")
	t := s.elapsed()
	for _, d := range s.devices {
		for _, p := range s.scenario(s.machine, d.index, t).processes {
			if int(p.pid) == pid {
				return p.name, nvml.SUCCESS
			}
		}
		for _, m := range d.migs {
			if int(m.pid) == pid {
				return "python3", nvml.SUCCESS
			}
		}
	}
	return "", nvml.ERROR_NOT_FOUND
}
