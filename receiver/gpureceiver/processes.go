package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"slices"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetComputeProcesses  = "nvmlDeviceGetComputeRunningProcesses"
	callGetGraphicsProcesses = "nvmlDeviceGetGraphicsRunningProcesses"
	callGetProcessUtil       = "nvmlDeviceGetProcessUtilization"
	// notAvailable is what NVML puts in UsedGpuMemory when it cannot tell (e.g. without
	// permission on Windows-style drivers).
	notAvailable = ^uint64(0)
)

// gpuProcess is one process seen on a GPU in this scrape.
type gpuProcess struct {
	pid      uint32
	memory   uint64
	hasMem   bool
	graphics bool
	// mig is the MIG device the process runs on, nil outside MIG.
	mig *migInstance
}

// processUtil is one process's average engine utilization (percent) over the interval.
type processUtil struct {
	sm, mem, enc, dec float64
	n                 int
}

// hiddenProcessesMemory is how much of a GPU's framebuffer (the driver's reservation
// excluded) must be in use for "NVML lists no process" to mean processes are hidden from
// the agent rather than that none runs: a CUDA context alone takes a few hundred MiB.
const hiddenProcessesMemory = 256 << 20

// processesWanted reports whether this collection reads the GPU's processes.
func (r *deviceRead) processesWanted() bool {
	m := r.metrics
	return !r.gone && r.dev.handle != nil && !r.processListUnsafe &&
		(m.NvidiaGpuProcessMemoryUsage.Enabled || m.NvidiaGpuProcessUtilization.Enabled || m.NvidiaGpuProcessesHidden.Enabled)
}

// listProcesses reads the processes of a GPU outside MIG mode, before the GPU's own
// resource is emitted, so that nvidia.gpu.processes.hidden goes with it. Under MIG the
// instances are listed one by one (recordProcesses).
func (r *deviceRead) listProcesses() {
	if !r.processesWanted() {
		return
	}
	r.refreshMIG()
	if r.dev.mig.enabled {
		return
	}
	r.procs, r.procsListed = r.readProcesses(r.dev.handle, nil)
	r.recordHiddenProcesses()
}

// recordHiddenProcesses says so when NVML lists no process on a GPU whose memory is in use:
// the agent cannot see the processes, which must not read as an idle GPU.
func (r *deviceRead) recordHiddenProcesses() {
	hidden := r.procsListed && len(r.procs) == 0 && r.memoryRead && r.memoryReservedApart && r.memoryUsed > hiddenProcessesMemory
	if hidden && r.metrics.NvidiaGpuProcessesHidden.Enabled {
		r.mb.RecordNvidiaGpuProcessesHiddenDataPoint(r.now, 1)
	}
	if hidden && !r.dev.processesHidden {
		r.logger.Warn("NVML lists no process on this GPU while its memory is in use: per-process and per-pod values of it are missing (nvidia.gpu.processes.hidden)",
			zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid), zap.Uint64("memory_used_bytes", r.memoryUsed),
			zap.String("likely_cause", r.hiddenProcessesCause))
	}
	if r.procsListed && r.memoryRead {
		r.dev.processesHidden = hidden
	}
}

// readProcesses lists the compute and graphics processes of a GPU or of one MIG device
// (mi). A process using both appears in both lists; it is reported once, as compute.
// listed is whether any list call answered.
func (r *deviceRead) readProcesses(h nvml.Device, mi *migInstance) (out []gpuProcess, listed bool) {
	seen := map[uint32]bool{}
	for _, q := range []struct {
		call     string
		graphics bool
		list     func() ([]nvml.ProcessInfo, nvml.Return)
	}{
		{callGetComputeProcesses, false, h.GetComputeRunningProcesses},
		{callGetGraphicsProcesses, true, h.GetGraphicsRunningProcesses},
	} {
		// MIG supports no graphics: a MIG device has no graphics processes to list.
		if r.skip(q.call) || q.graphics && mi != nil {
			continue
		}
		infos, ret := q.list()
		if mi != nil && (ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT) {
			r.dev.mig.recheck = true // the MIG device was destroyed since it was listed
			continue
		}
		if !r.ok(q.call, ret) {
			continue
		}
		listed = true
		for _, p := range infos {
			if p.Pid == 0 || seen[p.Pid] {
				continue
			}
			seen[p.Pid] = true
			out = append(out, gpuProcess{
				pid:      p.Pid,
				memory:   p.UsedGpuMemory,
				hasMem:   p.UsedGpuMemory != notAvailable,
				graphics: q.graphics,
				mig:      mi,
			})
		}
	}
	return out, listed
}

// callGetMIGParentProcesses is the whole GPU's process list in MIG mode, which needs the
// MIG monitor capability; without it each MIG device is asked on its own handle.
const callGetMIGParentProcesses = "nvmlDeviceGetComputeRunningProcesses(mig parent)"

// readMIGProcesses lists the processes of a MIG-enabled GPU's instances: in one call on
// the GPU where the agent may (each process names its GPU and compute instance), else one
// call per MIG device.
func (r *deviceRead) readMIGProcesses(migs []*migInstance) []gpuProcess {
	if !r.skip(callGetMIGParentProcesses) {
		infos, ret := r.dev.handle.GetComputeRunningProcesses()
		if r.ok(callGetMIGParentProcesses, ret) {
			byInstance := make(map[[2]uint32]*migInstance, len(migs))
			for _, mi := range migs {
				byInstance[[2]uint32{uint32(mi.gpuInstance), uint32(mi.compute)}] = mi
			}
			var out []gpuProcess
			for _, p := range infos {
				mi := byInstance[[2]uint32{p.GpuInstanceId, p.ComputeInstanceId}]
				if p.Pid == 0 || mi == nil {
					continue // an instance created since the listing: next time
				}
				out = append(out, gpuProcess{pid: p.Pid, memory: p.UsedGpuMemory, hasMem: p.UsedGpuMemory != notAvailable, mig: mi})
			}
			return out
		}
	}
	var out []gpuProcess
	for _, mi := range migs {
		found, _ := r.readProcesses(mi.handle, mi)
		out = append(out, found...)
	}
	return out
}

// readProcessUtilization averages the per-process samples taken since the last scrape
// (nvmlDeviceGetProcessUtilization; the newer GetProcessesUtilizationInfo is broken in
// go-nvml), as real drivers return them: a sample no newer than the last one seen, a
// share above 100 %, or a PID that is not in the process list (an exited process still
// in the driver's buffer; another PID namespace's process, whose samples are not
// filtered) is dropped (as nvtop does). A listed process with no sample was idle - NVML
// keeps samples only of processes that did something - once a sample period has passed:
// idleIfMissing says so, and is false when the call failed and nothing can be said.
func (r *deviceRead) readProcessUtilization(procs []gpuProcess) (utils map[uint32]*processUtil, idleIfMissing bool) {
	if r.skip(callGetProcessUtil) || !r.metrics.NvidiaGpuProcessUtilization.Enabled {
		return nil, false
	}
	since := r.dev.lastProcessTS
	samples, ret := r.dev.handle.GetProcessUtilization(since)
	if ret == nvml.ERROR_NOT_FOUND {
		// No process was active since the last sample seen - if a sample period has passed
		// since (at short collection intervals the next one may simply not be taken yet).
		return nil, r.samplePeriodPassed(since)
	}
	if !r.ok(callGetProcessUtil, ret) {
		return nil, false
	}
	listed := make(map[uint32]bool, len(procs))
	for _, p := range procs {
		listed[p.pid] = true
	}
	utils = map[uint32]*processUtil{}
	newest := since
	for _, smp := range samples {
		if smp.TimeStamp <= since {
			continue
		}
		newest = max(newest, smp.TimeStamp)
		if !listed[smp.Pid] {
			continue
		}
		u := utils[smp.Pid]
		if u == nil {
			// n stays 0 while every sample of the process is impossible: it was active,
			// by how much is unknown - reported as nothing, not as idle.
			u = &processUtil{}
			utils[smp.Pid] = u
		}
		if smp.SmUtil > 100 || smp.MemUtil > 100 || smp.EncUtil > 100 || smp.DecUtil > 100 {
			continue
		}
		u.sm += float64(smp.SmUtil)
		u.mem += float64(smp.MemUtil)
		u.enc += float64(smp.EncUtil)
		u.dec += float64(smp.DecUtil)
		u.n++
	}
	r.dev.lastProcessTS = newest
	// A newer sample of any process means a sample period passed in which the others did
	// nothing.
	return utils, newest > since || r.samplePeriodPassed(since)
}

// processSamplePeriod bounds how often the driver takes per-process samples: once this long
// has passed since the last sample seen without a newer one, the processes were idle.
const processSamplePeriod = 2 * time.Second

// samplePeriodPassed reports whether a per-process sample period has passed since the
// sample time since (µs since the epoch, the driver's CPU timestamps; 0 = never).
func (r *deviceRead) samplePeriodPassed(since uint64) bool {
	return since == 0 || r.clock().Sub(time.UnixMicro(int64(since))) >= processSamplePeriod
}

// recordProcesses emits one resource per process on the GPU: the GPU's identity (or its
// MIG device's) plus the process's, so that shared GPUs can be told apart per process
// and, downstream, per pod. Under MIG each MIG device's processes are listed on its own
// handle, which needs no privilege (the whole GPU's list does).
func (r *deviceRead) recordProcesses(migs []*migInstance) {
	if !r.processesWanted() {
		return
	}
	m := r.metrics
	procs := r.procs
	if r.dev.mig.enabled {
		procs = r.readMIGProcesses(migs)
	}
	if len(procs) == 0 || !m.NvidiaGpuProcessMemoryUsage.Enabled && !m.NvidiaGpuProcessUtilization.Enabled {
		return
	}
	utils, idleIfMissing := r.readProcessUtilization(procs)
	for _, p := range procs {
		if p.hasMem && m.NvidiaGpuProcessMemoryUsage.Enabled {
			r.mb.RecordNvidiaGpuProcessMemoryUsageDataPoint(r.now, int64(p.memory))
		}
		switch u := utils[p.pid]; {
		case u != nil && u.n > 0:
			r.recordProcessUtilization(u)
		case u == nil && idleIfMissing:
			// No sample at all: NVML keeps samples only of processes that did something.
			r.recordProcessUtilization(&processUtil{n: 1})
		}
		subject := resourceSubject{process: true, pid: p.pid, name: r.procNames.lookup(r.lib, p.pid), graphics: p.graphics, mig: p.mig}
		res := r.dev.resources.get(subject, func() pcommon.Resource {
			rb := r.identity()
			if subject.mig != nil {
				subject.mig.describe(rb, r.dev)
			}
			rb.SetProcessPid(int64(p.pid))
			rb.SetProcessExecutableName(subject.name)
			if p.graphics {
				rb.SetNvidiaGpuProcessType("graphics")
			} else {
				rb.SetNvidiaGpuProcessType("compute")
			}
			return rb.Emit()
		})
		r.mb.EmitForResource(metadata.WithResource(res))
	}
}

// processNames caches process names by PID: NVML is asked once per PID, for as long as
// the PID is seen (the scraper forgets the others after each scrape).
type processNames struct {
	seenCache[uint32, string]
}

func newProcessNames() *processNames { return &processNames{} }

func (c *processNames) lookup(lib nvml.Interface, pid uint32) string {
	return c.get(pid, func() string {
		if n, ret := lib.SystemGetProcessName(int(pid)); ret == nvml.SUCCESS {
			return n
		}
		return ""
	})
}

// engineSelection are the engines processes.engines selects.
type engineSelection struct{ sm, memory, encoder, decoder bool }

func selectedProcessEngines(names []string) engineSelection {
	return engineSelection{
		sm:      slices.Contains(names, metadata.AttributeNvidiaGpuEngineSm.String()),
		memory:  slices.Contains(names, metadata.AttributeNvidiaGpuEngineMemory.String()),
		encoder: slices.Contains(names, metadata.AttributeNvidiaGpuEngineEncoder.String()),
		decoder: slices.Contains(names, metadata.AttributeNvidiaGpuEngineDecoder.String()),
	}
}

// recordProcessUtilization reports a process's share of each selected engine over the
// interval. NVML answers 0 for an engine the GPU lacks (NVENC on A100, H100, H200, B200):
// an encoder or decoder share is reported only where the GPU's own is (recordUtilization),
// or where the receiver did not read the GPU's.
func (r *deviceRead) recordProcessUtilization(u *processUtil) {
	n := float64(u.n) * percent
	sel := r.processEngines
	if sel.sm {
		r.mb.RecordNvidiaGpuProcessUtilizationDataPoint(r.now, u.sm/n, metadata.AttributeNvidiaGpuEngineSm)
	}
	if sel.memory {
		r.mb.RecordNvidiaGpuProcessUtilizationDataPoint(r.now, u.mem/n, metadata.AttributeNvidiaGpuEngineMemory)
	}
	if sel.encoder && (!r.gpuEngines.known || r.gpuEngines.encoder) {
		r.mb.RecordNvidiaGpuProcessUtilizationDataPoint(r.now, u.enc/n, metadata.AttributeNvidiaGpuEngineEncoder)
	}
	if sel.decoder && (!r.gpuEngines.known || r.gpuEngines.decoder) {
		r.mb.RecordNvidiaGpuProcessUtilizationDataPoint(r.now, u.dec/n, metadata.AttributeNvidiaGpuEngineDecoder)
	}
}
