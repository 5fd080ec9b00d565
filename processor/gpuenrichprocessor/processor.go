package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"context"
	"errors"
	"sort"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/tracking"
)

// forgetAfter drops the state of GPUs and pods not seen for this long.
const forgetAfter = 30 * time.Minute

type gpuEnrichProcessor struct {
	cfg     *Config
	logger  *zap.Logger
	now     func() time.Time
	src     sources
	tracker *tracking.Tracker
	// startTime is the start of the processor's cumulative series.
	startTime pcommon.Timestamp
}

func newProcessor(cfg *Config, logger *zap.Logger, now func() time.Time, src sources) *gpuEnrichProcessor {
	return &gpuEnrichProcessor{
		cfg:       cfg,
		logger:    logger,
		now:       now,
		src:       src,
		tracker:   tracking.New(max(cfg.Idle.Window, cfg.Leak.Window)),
		startTime: pcommon.NewTimestampFromTime(now()),
	}
}

func (p *gpuEnrichProcessor) start(ctx context.Context, _ component.Host) error {
	if p.src.pods != nil {
		// Only an invalid configuration fails here; a kubelet that is down is retried
		// in the background while metrics flow unattributed.
		return p.src.pods.Start(ctx)
	}
	return nil
}

func (p *gpuEnrichProcessor) shutdown(context.Context) error {
	if p.src.pods != nil {
		return p.src.pods.Shutdown()
	}
	return nil
}

func (p *gpuEnrichProcessor) enabled(name string) bool {
	m := p.cfg.Metrics
	switch name {
	case metricMemoryUtilization:
		return m.HwGpuMemoryUtilization.Enabled
	case metricAttributionAge:
		return m.NvidiaGpuAttributionAge.Enabled
	case metricAttributionErrors:
		return m.NvidiaGpuAttributionErrors.Enabled
	case metricBottleneck:
		return m.NvidiaGpuBottleneck.Enabled
	case metricAllocatable:
		return m.NvidiaGpuDevicesAllocatable.Enabled
	case metricAllocated:
		return m.NvidiaGpuDevicesAllocated.Enabled
	case metricIdleWhileAllocated:
		return m.NvidiaGpuIdleWhileAllocated.Enabled
	case metricGrowthRate:
		return m.NvidiaGpuMemoryGrowthRate.Enabled
	case metricLeakSuspected:
		return m.NvidiaGpuMemoryLeakSuspected.Enabled
	case metricPodEnergy:
		return m.NvidiaGpuPodEnergy.Enabled
	case metricPodMemory:
		return m.NvidiaGpuPodMemoryUsage.Enabled
	case metricPodUtilization:
		return m.NvidiaGpuPodUtilization.Enabled
	case metricThrottled:
		return m.NvidiaGpuThrottled.Enabled
	case metricPodGrowthRate:
		return m.NvidiaGpuPodMemoryGrowthRate.Enabled
	case metricPodLeakSuspected:
		return m.NvidiaGpuPodMemoryLeakSuspected.Enabled
	}
	return false
}

// processMetrics attributes and derives, in place. It never fails a batch: whatever cannot
// be attributed flows on without pod attributes.
func (p *gpuEnrichProcessor) processMetrics(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	b := classify(md)
	var snap *podresources.Snapshot
	var status podresources.Status
	if p.src.pods != nil {
		snap, status = p.src.pods.Snapshot()
	}
	byUUID := map[string]*gpuView{}
	for _, g := range b.gpus {
		byUUID[g.uuid] = g
		if snap != nil {
			g.pods = podsOf(snap.ByUUID[g.uuid])
		}
		if len(g.pods) == 1 {
			setPod(g.rm.Resource().Attributes(), g.pods[0])
		}
	}
	alive := map[uint32]bool{}
	for _, proc := range b.procs {
		alive[proc.pid] = true
		proc.pod = p.attributeProcess(proc, byUUID[proc.on])
		if proc.pod.known() {
			setPod(proc.rm.Resource().Attributes(), proc.pod)
		}
		if g := byUUID[proc.on]; g != nil {
			g.processes = append(g.processes, proc)
		}
	}
	if p.src.pids != nil {
		p.src.pids.Forget(alive)
	}

	newResources := pmetric.NewResourceMetricsSlice()
	for _, g := range b.gpus {
		ts := g.ts
		if ts == 0 {
			ts = pcommon.NewTimestampFromTime(p.now())
		}
		p.deriveGPU(g, ts)
		p.derivePods(g, ts, newResources)
	}
	newResources.MoveAndAppendTo(md.ResourceMetrics())
	if b.hasHost {
		p.recordAttributionHealth(b.host, snap, status)
	}
	p.tracker.Forget(p.now().Add(-forgetAfter))
	return md, nil
}

// podsOf turns the containers holding a device into distinct pods; a pod with one container
// on the device gets that container's name.
func podsOf(refs []podresources.ContainerRef) []podRef {
	byPod := map[string]*podRef{}
	containers := map[string]int{}
	var order []string
	for _, r := range refs {
		key := r.Namespace + "/" + r.Pod
		if byPod[key] == nil {
			byPod[key] = &podRef{Namespace: r.Namespace, Name: r.Pod, Container: r.Container}
			order = append(order, key)
		}
		containers[key]++
	}
	sort.Strings(order)
	out := make([]podRef, 0, len(order))
	for _, key := range order {
		pod := *byPod[key]
		if containers[key] > 1 {
			pod.Container = ""
		}
		out = append(out, pod)
	}
	return out
}

// attributeProcess finds the pod of a GPU process: its cgroup names the pod UID and
// container ID; the kubelet's log directory names the pod; the GPU's allocation names the
// container when the pod holds the GPU with one container. Without cgroups, a process on
// a GPU held by a single pod belongs to that pod.
func (p *gpuEnrichProcessor) attributeProcess(proc *processView, g *gpuView) podRef {
	var pod podRef
	if p.src.pids != nil {
		c, err := p.src.pids.Lookup(proc.pid)
		switch {
		case err == nil:
			pod.UID, pod.ContainerID = c.PodUID, c.ContainerID
		case errors.Is(err, cgroup.ErrProcessGone), errors.Is(err, cgroup.ErrNotAContainer):
			// Exited between NVML's answer and now, or a host process: normal.
		default:
			p.logger.Debug("Cannot read a GPU process's cgroup", zap.Uint32("pid", proc.pid), zap.Error(err))
		}
	}
	if pod.UID != "" && p.src.names != nil {
		if named, ok := p.src.names.Lookup(pod.UID); ok {
			pod.Namespace, pod.Name = named.Namespace, named.Name
			if len(named.Containers) == 1 {
				pod.Container = named.Containers[0]
			}
		}
	}
	if g != nil {
		for _, held := range g.pods {
			switch {
			case pod.Name != "" && held.Namespace == pod.Namespace && held.Name == pod.Name && pod.Container == "":
				pod.Container = held.Container
			case !pod.known() && len(g.pods) == 1:
				return held
			}
		}
	}
	return pod
}

// deriveGPU appends the derived per-GPU (or per-MIG-instance) signals to its resource.
func (p *gpuEnrichProcessor) deriveGPU(g *gpuView, ts pcommon.Timestamp) {
	w := newWriter(g.rm, p.enabled, p.startTime, ts)
	if g.hasMem && g.hasLimit && g.memLimit > 0 {
		w.double(metricMemoryUtilization, g.memUsed/g.memLimit)
	}
	if causes, ok := throttled(g.clockEvents); ok {
		for _, cause := range []string{"thermal", "power", "other"} {
			w.flag(metricThrottled, causes[cause], "nvidia.gpu.throttle.cause", cause)
		}
	}
	if class, ok := bottleneck(g, p.cfg.Idle.Threshold, p.cfg.Bottleneck.Saturation); ok {
		for _, c := range bottleneckClasses {
			w.flag(metricBottleneck, c == class, "nvidia.gpu.bottleneck.class", c)
		}
	}
	util, hasUtil := g.util, g.hasUtil
	if !hasUtil && g.hasSM {
		util, hasUtil = g.smActive, true
	}
	if !g.hasMem && !hasUtil {
		return
	}
	samples := p.tracker.Observe("gpu/"+g.uuid, tracking.Sample{T: ts.AsTime(), Util: util, HasUtil: hasUtil, Memory: g.memUsed})
	if hasUtil && p.allocated(g) {
		w.flag(metricIdleWhileAllocated, tracking.IdleFor(samples, p.cfg.Idle.Threshold, p.cfg.Idle.Window))
	} else if hasUtil {
		w.flag(metricIdleWhileAllocated, false)
	}
	if g.hasMem && g.hasLimit {
		p.writeLeak(w, samples, g.memLimit, metricGrowthRate, metricLeakSuspected)
	}
}

// allocated: a pod holds the GPU (kubelet), or, without the kubelet, a process in a pod
// runs on it.
func (p *gpuEnrichProcessor) allocated(g *gpuView) bool {
	if len(g.pods) > 0 {
		return true
	}
	for _, proc := range g.processes {
		if proc.pod.known() {
			return true
		}
	}
	return false
}

// writeLeak writes the trend and leak flag under the given names: the GPU's own, or the
// pod-on-GPU ones (a pod's resource carries the GPU's identity, so it needs names of its
// own or the two series would collide).
func (p *gpuEnrichProcessor) writeLeak(w *writer, samples []tracking.Sample, total float64, growthName, leakName string) {
	rule := tracking.LeakRule{Window: p.cfg.Leak.Window, MinGrowth: p.cfg.Leak.MinGrowth, UtilizationTolerance: p.cfg.Leak.UtilizationTolerance}
	w.double(growthName, tracking.Slope(tracking.Within(samples, p.cfg.Leak.Window)))
	w.flag(leakName, tracking.LeakSuspected(samples, total, rule))
}

// recordAttributionHealth tells, on the host resource, how fresh attribution is and what
// the node can allocate.
func (p *gpuEnrichProcessor) recordAttributionHealth(host pmetric.ResourceMetrics, snap *podresources.Snapshot, status podresources.Status) {
	if p.src.pods == nil {
		return
	}
	now := p.now()
	w := newWriter(host, p.enabled, p.startTime, pcommon.NewTimestampFromTime(now))
	age := now.Sub(p.startTime.AsTime()).Seconds()
	if snap != nil {
		age = now.Sub(snap.Taken).Seconds()
	}
	w.double(metricAttributionAge, age)
	w.int(metricAttributionErrors, int64(status.TotalFailures))
	if snap == nil {
		return
	}
	names := make([]string, 0, len(snap.Allocatable)+len(snap.Allocated))
	seen := map[string]bool{}
	for n := range snap.Allocatable {
		names, seen[n] = append(names, n), true
	}
	for n := range snap.Allocated {
		if !seen[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if v, ok := snap.Allocatable[n]; ok {
			w.int(metricAllocatable, int64(v), "nvidia.gpu.resource_name", n)
		}
		w.int(metricAllocated, int64(snap.Allocated[n]), "nvidia.gpu.resource_name", n)
	}
}
