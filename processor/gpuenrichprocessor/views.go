package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Attribute keys the processor reads (from the gpu receiver) and writes.
const (
	attrHwID          = "hw.id"
	attrMigUUID       = "nvidia.mig.uuid"
	attrPID           = "process.pid"
	attrHostName      = "host.name"
	attrNamespace     = "k8s.namespace.name"
	attrPodName       = "k8s.pod.name"
	attrPodUID        = "k8s.pod.uid"
	attrContainerName = "k8s.container.name"
	attrContainerID   = "container.id"
)

// gpuView is what the processor needs from one GPU's or MIG instance's resource.
type gpuView struct {
	rm   pmetric.ResourceMetrics
	uuid string // GPU UUID, or MIG UUID for a MIG instance
	mig  bool
	ts   pcommon.Timestamp

	util, memUsed, memLimit, energy, smActive, dramActive, memCopy   float64
	hasUtil, hasMem, hasLimit, hasEnergy, hasSM, hasDRAM, hasMemCopy bool
	clockEvents                                                      map[string]bool

	pods      []podRef // from the kubelet snapshot
	processes []*processView
}

// processView is one process resource.
type processView struct {
	rm     pmetric.ResourceMetrics
	on     string // hw.id: the GPU or MIG UUID it runs on
	pid    uint32
	mem    float64
	hasMem bool
	sm     float64
	hasSM  bool
	pod    podRef
}

// podRef identifies a pod (and, when known, the one container) as far as it is known.
type podRef struct {
	Namespace, Name, UID, Container, ContainerID string
}

func (p podRef) known() bool { return p.Name != "" || p.UID != "" }

// key identifies the pod within a GPU's pods.
func (p podRef) key() string {
	if p.Name != "" {
		return p.Namespace + "/" + p.Name
	}
	return p.UID
}

// batch is one ConsumeMetrics call, classified.
type batch struct {
	gpus    []*gpuView // GPUs and MIG instances
	procs   []*processView
	host    pmetric.ResourceMetrics
	hasHost bool
}

func classify(md pmetric.Metrics) *batch {
	b := &batch{}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		attrs := rm.Resource().Attributes()
		id, hasID := attrs.Get(attrHwID)
		pid, isProc := attrs.Get(attrPID)
		mig, isMIG := attrs.Get(attrMigUUID)
		switch {
		case isProc && hasID:
			p := &processView{rm: rm, on: id.AsString(), pid: uint32(pid.Int())}
			readProcess(rm, p)
			b.procs = append(b.procs, p)
		case isMIG:
			g := &gpuView{rm: rm, uuid: mig.AsString(), mig: true}
			readGPU(rm, g)
			b.gpus = append(b.gpus, g)
		case hasID:
			g := &gpuView{rm: rm, uuid: id.AsString()}
			readGPU(rm, g)
			b.gpus = append(b.gpus, g)
		default:
			if _, ok := attrs.Get(attrHostName); ok && !b.hasHost {
				b.host, b.hasHost = rm, true
			}
		}
	}
	return b
}

// eachPoint calls f for every number data point of every metric of a resource.
func eachPoint(rm pmetric.ResourceMetrics, f func(name string, dp pmetric.NumberDataPoint)) {
	for i := 0; i < rm.ScopeMetrics().Len(); i++ {
		ms := rm.ScopeMetrics().At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			var dps pmetric.NumberDataPointSlice
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
			default:
				continue
			}
			for k := 0; k < dps.Len(); k++ {
				f(m.Name(), dps.At(k))
			}
		}
	}
}

func value(dp pmetric.NumberDataPoint) float64 {
	if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
		return float64(dp.IntValue())
	}
	return dp.DoubleValue()
}

func attr(dp pmetric.NumberDataPoint, key string) string {
	v, ok := dp.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

func readGPU(rm pmetric.ResourceMetrics, g *gpuView) {
	g.clockEvents = map[string]bool{}
	eachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
		g.ts = max(g.ts, dp.Timestamp())
		v := value(dp)
		switch name {
		case "hw.gpu.utilization":
			if attr(dp, "hw.gpu.task") == "general" {
				g.util, g.hasUtil = v, true
			}
		case "hw.gpu.memory.usage":
			g.memUsed, g.hasMem = v, true
		case "hw.gpu.memory.limit":
			g.memLimit, g.hasLimit = v, true
		case "hw.energy":
			g.energy, g.hasEnergy = v, true
		case "nvidia.gpu.memory_copy.utilization":
			g.memCopy, g.hasMemCopy = v, true
		case "nvidia.gpu.clock_event.active":
			g.clockEvents[attr(dp, "nvidia.gpu.clock_event.reason")] = v == 1
		case "nvidia.gpu.profiling.activity":
			switch attr(dp, "nvidia.gpu.profiling.metric") {
			case "sm_active":
				g.smActive, g.hasSM = v, true
			case "dram_active":
				g.dramActive, g.hasDRAM = v, true
			}
		}
	})
}

func readProcess(rm pmetric.ResourceMetrics, p *processView) {
	eachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
		switch name {
		case "nvidia.gpu.process.memory.usage":
			p.mem, p.hasMem = value(dp), true
		case "nvidia.gpu.process.utilization":
			if attr(dp, "nvidia.gpu.engine") == "sm" {
				p.sm, p.hasSM = value(dp), true
			}
		}
	})
}

// setPod writes what is known of a pod onto a resource.
func setPod(attrs pcommon.Map, p podRef) {
	put := func(k, v string) {
		if v != "" {
			attrs.PutStr(k, v)
		}
	}
	put(attrNamespace, p.Namespace)
	put(attrPodName, p.Name)
	put(attrPodUID, p.UID)
	put(attrContainerName, p.Container)
	put(attrContainerID, p.ContainerID)
}
