package gpusim

import (
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
		return d.migProcesses(), nvml.SUCCESS
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
	return out, nvml.SUCCESS
}

// GetComputeRunningProcesses lists the CUDA processes on the GPU.
func (d *Device) GetComputeRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.processInfos("DeviceGetComputeRunningProcesses", false)
}

// GetGraphicsRunningProcesses lists the graphics processes on the GPU.
func (d *Device) GetGraphicsRunningProcesses() ([]nvml.ProcessInfo, nvml.Return) {
	return d.processInfos("DeviceGetGraphicsRunningProcesses", true)
}

// GetProcessUtilization returns one sample per process per simulated second newer than
// lastSeen; NOT_FOUND when there is none (as the real driver does); NOT_SUPPORTED under MIG.
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
		if ts <= lastSeen {
			continue
		}
		r := d.sim.scenario(d.sim.machine, d.index, float64(k))
		for _, p := range r.processes {
			out = append(out, nvml.ProcessUtilizationSample{
				Pid:       p.pid,
				TimeStamp: ts,
				SmUtil:    roundU32(r.utilization * p.smShare),
				MemUtil:   roundU32(r.memoryCopyUtil * p.smShare),
				DecUtil:   roundU32(r.decoderUtil * p.smShare),
			})
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
