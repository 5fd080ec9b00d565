package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetComputeProcesses  = "nvmlDeviceGetComputeRunningProcesses"
	callGetGraphicsProcesses = "nvmlDeviceGetGraphicsRunningProcesses"
	callGetProcessUtil       = "nvmlDeviceGetProcessUtilization"
	// notAvailable is what NVML puts in UsedGpuMemory when it cannot tell (e.g. without
	// permission on Windows-style drivers).
	notAvailable = ^uint64(0)
	// noInstance is what NVML puts in the MIG instance ids of a process outside MIG.
	noInstance = 0xFFFFFFFF
)

// gpuProcess is one process seen on a GPU in this scrape.
type gpuProcess struct {
	pid      uint32
	memory   uint64
	hasMem   bool
	graphics bool
	// gpuInstance is the MIG GPU instance the process runs in, noInstance outside MIG.
	gpuInstance uint32
}

// processUtil is one process's average engine utilization (percent) over the interval.
type processUtil struct {
	sm, mem, enc, dec float64
	n                 int
}

// readProcesses lists the compute and graphics processes of a GPU. A process using both
// appears in both lists; it is reported once, as compute.
func (r *deviceRead) readProcesses() []gpuProcess {
	var out []gpuProcess
	seen := map[uint32]bool{}
	for _, q := range []struct {
		call     string
		graphics bool
		list     func() ([]nvml.ProcessInfo, nvml.Return)
	}{
		{callGetComputeProcesses, false, r.dev.handle.GetComputeRunningProcesses},
		{callGetGraphicsProcesses, true, r.dev.handle.GetGraphicsRunningProcesses},
	} {
		// MIG supports no graphics: a MIG-enabled GPU has no graphics processes to list.
		if r.skip(q.call) || q.graphics && r.dev.mig.enabled {
			continue
		}
		infos, ret := q.list()
		if !r.ok(q.call, ret) {
			continue
		}
		for _, p := range infos {
			// go-nvml#75: some drivers return shuffled entries; a PID of 0 is one of them.
			if p.Pid == 0 || seen[p.Pid] {
				continue
			}
			seen[p.Pid] = true
			out = append(out, gpuProcess{
				pid:         p.Pid,
				memory:      p.UsedGpuMemory,
				hasMem:      p.UsedGpuMemory != notAvailable,
				graphics:    q.graphics,
				gpuInstance: p.GpuInstanceId,
			})
		}
	}
	return out
}

// readProcessUtilization averages the per-process samples taken since the last scrape
// (nvmlDeviceGetProcessUtilization; the newer GetProcessesUtilizationInfo is broken in
// go-nvml). NOT_FOUND means no process ran in the interval.
func (r *deviceRead) readProcessUtilization() map[uint32]*processUtil {
	if r.skip(callGetProcessUtil) || !r.metrics.NvidiaGpuProcessUtilization.Enabled {
		return nil
	}
	samples, ret := r.dev.handle.GetProcessUtilization(r.dev.lastProcessTS)
	if !r.ok(callGetProcessUtil, ret) {
		return nil
	}
	out := map[uint32]*processUtil{}
	for _, smp := range samples {
		u := out[smp.Pid]
		if u == nil {
			u = &processUtil{}
			out[smp.Pid] = u
		}
		u.sm += float64(smp.SmUtil)
		u.mem += float64(smp.MemUtil)
		u.enc += float64(smp.EncUtil)
		u.dec += float64(smp.DecUtil)
		u.n++
		r.dev.lastProcessTS = max(r.dev.lastProcessTS, smp.TimeStamp)
	}
	return out
}

// recordProcesses emits one resource per process on the GPU: the GPU's identity (or its
// MIG instance's) plus the process's, so that shared GPUs can be told apart per process
// and, downstream, per pod.
func (r *deviceRead) recordProcesses(migs map[uint32]*migInstance) {
	m := r.metrics
	if r.gone || r.dev.handle == nil || (!m.NvidiaGpuProcessMemoryUsage.Enabled && !m.NvidiaGpuProcessUtilization.Enabled) {
		return
	}
	procs := r.readProcesses()
	if len(procs) == 0 {
		return
	}
	utils := r.readProcessUtilization()
	for _, p := range procs {
		if p.hasMem {
			r.mb.RecordNvidiaGpuProcessMemoryUsageDataPoint(r.now, int64(p.memory))
		}
		if u := utils[p.pid]; u != nil && u.n > 0 {
			r.recordProcessUtilization(u)
		}
		subject := resourceSubject{process: true, pid: p.pid, name: r.procNames.lookup(r.lib, p.pid), graphics: p.graphics}
		if mi := migs[p.gpuInstance]; p.gpuInstance != noInstance && mi != nil {
			subject.mig = mi
		}
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
