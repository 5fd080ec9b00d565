package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
)

// What the processor reads from the gpu receiver's output, named by the receiver's
// contract (internal/gpuschema, generated from receiver/gpureceiver/metadata.yaml).
const (
	attrHwID      = gpuschema.ResourceHwID
	attrHwParent  = gpuschema.ResourceHwParent
	attrGPUIndex  = gpuschema.ResourceNvidiaGpuIndex
	attrGPUMinor  = gpuschema.ResourceNvidiaGpuMinorNumber
	attrMigUUID   = gpuschema.ResourceNvidiaMigUUID
	attrMigGI     = gpuschema.ResourceNvidiaMigGpuInstanceID
	attrMigProf   = gpuschema.ResourceNvidiaMigProfile
	attrPID       = gpuschema.ResourceProcessPID
	attrHostName  = gpuschema.ResourceHostName
	attrTask      = gpuschema.AttrHwGpuTask
	attrEngine    = gpuschema.AttrNvidiaGpuEngine
	attrReason    = gpuschema.AttrNvidiaGpuClockEventReason
	attrProfMetic = gpuschema.AttrNvidiaGpuProfilingMetric

	metricUtilization   = gpuschema.MetricHwGpuUtilization
	metricMemoryUsage   = gpuschema.MetricHwGpuMemoryUsage
	metricMemoryLimit   = gpuschema.MetricHwGpuMemoryLimit
	metricEnergy        = gpuschema.MetricHwEnergy
	metricMemCopy       = gpuschema.MetricNvidiaGpuMemoryCopyUtilization
	metricClockEvent    = gpuschema.MetricNvidiaGpuClockEventActive
	metricProfiling     = gpuschema.MetricNvidiaGpuProfilingActivity
	metricProcessMemory = gpuschema.MetricNvidiaGpuProcessMemoryUsage
	metricProcessUtil   = gpuschema.MetricNvidiaGpuProcessUtilization
)

// gpuView is what the processor needs from one GPU's or MIG instance's resource.
type gpuView struct {
	rm   pmetric.ResourceMetrics
	uuid string // GPU UUID, or MIG UUID for a MIG instance
	mig  bool
	ts   pcommon.Timestamp

	// Identity numbers device plugins and DRA drivers name devices by; -1 when absent.
	index, minor     int64
	parent           string // a MIG instance's GPU
	migGI            int64
	migProfile       string
	hasIndex, hasMin bool

	util, memUsed, memLimit, energy, smActive, dramActive, memCopy   float64
	hasUtil, hasMem, hasLimit, hasEnergy, hasSM, hasDRAM, hasMemCopy bool
	clockEvents                                                      map[string]bool

	holders   []podRef // pods the kubelet allocated it to (still running)
	processes []*processView
	// exited are the processes NVML listed on it that had exited when their cgroup was
	// read: no one's, yet the GPU had them, and their share of its energy is no pod's.
	exited []*processView
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
	owner  owner
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
			readIdentity(attrs, g)
			readGPU(rm, g)
			b.gpus = append(b.gpus, g)
		case hasID:
			g := &gpuView{rm: rm, uuid: id.AsString()}
			readIdentity(attrs, g)
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

func readIdentity(attrs pcommon.Map, g *gpuView) {
	intAttr := func(key string) (int64, bool) {
		v, ok := attrs.Get(key)
		if !ok || v.Type() != pcommon.ValueTypeInt {
			return -1, false
		}
		return v.Int(), true
	}
	g.index, g.hasIndex = intAttr(attrGPUIndex)
	g.minor, g.hasMin = intAttr(attrGPUMinor)
	g.migGI, _ = intAttr(attrMigGI)
	if v, ok := attrs.Get(attrHwParent); ok {
		g.parent = v.AsString()
	}
	if v, ok := attrs.Get(attrMigProf); ok {
		g.migProfile = v.AsString()
	}
}

func attr(dp pmetric.NumberDataPoint, key string) string {
	v, ok := dp.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

func readGPU(rm pmetric.ResourceMetrics, g *gpuView) {
	pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
		g.ts = max(g.ts, dp.Timestamp())
		v := pdatawalk.Value(dp)
		switch name {
		case metricUtilization:
			if attr(dp, attrTask) == gpuschema.HwGpuTaskGeneral {
				g.util, g.hasUtil = v, true
			}
		case metricMemoryUsage:
			g.memUsed, g.hasMem = v, true
		case metricMemoryLimit:
			g.memLimit, g.hasLimit = v, true
		case metricEnergy:
			g.energy, g.hasEnergy = v, true
		case metricMemCopy:
			g.memCopy, g.hasMemCopy = v, true
		case metricClockEvent:
			if g.clockEvents == nil {
				g.clockEvents = make(map[string]bool, 8) // the receiver's eight reasons
			}
			g.clockEvents[attr(dp, attrReason)] = v == 1
		case metricProfiling:
			switch attr(dp, attrProfMetic) {
			case gpuschema.NvidiaGpuProfilingMetricSmActive:
				g.smActive, g.hasSM = v, true
			case gpuschema.NvidiaGpuProfilingMetricDramActive:
				g.dramActive, g.hasDRAM = v, true
			}
		}
	})
}

func readProcess(rm pmetric.ResourceMetrics, p *processView) {
	pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
		switch name {
		case metricProcessMemory:
			p.mem, p.hasMem = pdatawalk.Value(dp), true
		case metricProcessUtil:
			if attr(dp, attrEngine) == gpuschema.NvidiaGpuEngineSm {
				p.sm, p.hasSM = pdatawalk.Value(dp), true
			}
		}
	})
}
