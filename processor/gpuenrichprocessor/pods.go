package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/tracking"
)

// podOnGPU aggregates what one pod does on one GPU (or MIG instance).
type podOnGPU struct {
	pod           podRef
	mem, sm       float64
	hasMem, hasSM bool
	fromProcesses bool
}

// podsOnGPU lists the pods on a GPU: those its processes belong to, and those the kubelet
// says hold it (a pod may hold a GPU without running anything on it yet). Processes whose
// pod is unknown are not attributed.
func podsOnGPU(g *gpuView) []*podOnGPU {
	byKey := map[string]*podOnGPU{}
	for _, proc := range g.processes {
		if !proc.pod.known() {
			continue
		}
		agg := byKey[proc.pod.key()]
		if agg == nil {
			agg = &podOnGPU{pod: proc.pod}
			byKey[proc.pod.key()] = agg
		}
		agg.fromProcesses = true
		if proc.hasMem {
			agg.mem, agg.hasMem = agg.mem+proc.mem, true
		}
		if proc.hasSM {
			agg.sm, agg.hasSM = agg.sm+proc.sm, true
		}
		if agg.pod.Container != proc.pod.Container {
			agg.pod.Container = "" // several containers of the pod use the GPU
		}
	}
	for _, held := range g.pods {
		if byKey[held.key()] == nil {
			byKey[held.key()] = &podOnGPU{pod: held}
		}
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]*podOnGPU, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	// A GPU held by one pod with no process listed (NVML may not see processes in other
	// PID namespaces on some setups): the pod's values are the GPU's.
	if len(out) == 1 && !out[0].fromProcesses {
		only := out[0]
		only.mem, only.hasMem = g.memUsed, g.hasMem
		only.sm, only.hasSM = g.util, g.hasUtil
	}
	return out
}

// energyShares splits a GPU's energy between its pods: by SM utilization share; by
// framebuffer share when no process is busy; equally when nothing is known.
func energyShares(pods []*podOnGPU) []float64 {
	shares := make([]float64, len(pods))
	var smSum, memSum float64
	for _, p := range pods {
		smSum += p.sm
		memSum += p.mem
	}
	for i, p := range pods {
		switch {
		case smSum > 0:
			shares[i] = p.sm / smSum
		case memSum > 0:
			shares[i] = p.mem / memSum
		default:
			shares[i] = 1 / float64(len(pods))
		}
	}
	return shares
}

// derivePods adds one resource per pod on the GPU: the GPU's identity plus the pod's,
// with the pod's own memory, utilization and energy — never the GPU's values copied to
// every pod of a shared GPU.
func (p *gpuEnrichProcessor) derivePods(g *gpuView, ts pcommon.Timestamp, out pmetric.ResourceMetricsSlice) {
	pods := podsOnGPU(g)
	if len(pods) == 0 {
		return
	}
	var delta float64
	if g.hasEnergy && !g.mig {
		delta = p.tracker.AddGPUEnergy("energy/"+g.uuid, g.energy)
	}
	shares := energyShares(pods)
	for i, pod := range pods {
		rm := out.AppendEmpty()
		g.rm.Resource().Attributes().CopyTo(rm.Resource().Attributes())
		for _, k := range []string{attrNamespace, attrPodName, attrPodUID, attrContainerName, attrContainerID} {
			rm.Resource().Attributes().Remove(k)
		}
		setPod(rm.Resource().Attributes(), podRef{Namespace: pod.pod.Namespace, Name: pod.pod.Name, UID: pod.pod.UID, Container: pod.pod.Container})
		w := newWriter(rm, p.enabled, p.startTime, ts)
		if pod.hasMem {
			w.int(metricPodMemory, int64(pod.mem))
		}
		if pod.hasSM {
			w.double(metricPodUtilization, pod.sm)
		}
		if g.hasEnergy && !g.mig {
			total, since := p.tracker.AddPodEnergy("energy/"+g.uuid+"/"+pod.pod.key(), delta*shares[i], ts.AsTime())
			w.counterSince(metricPodEnergy, total, pcommon.NewTimestampFromTime(since))
		}
		if pod.hasMem && g.hasLimit {
			samples := p.tracker.Observe("pod/"+g.uuid+"/"+pod.pod.key(), tracking.Sample{T: ts.AsTime(), Util: pod.sm, HasUtil: pod.hasSM, Memory: pod.mem})
			p.writeLeak(w, samples, g.memLimit, metricPodGrowthRate, metricPodLeakSuspected)
		}
	}
}
