package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/allocation"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// recordAttributionHealth tells, on the host resource, how fresh attribution is, what
// the node can allocate and what is allocated, and what could not be mapped to a GPU.
func (p *gpuEnrichProcessor) recordAttributionHealth(host pmetric.ResourceMetrics, snap *podresources.Snapshot, status podresources.Status, a allocation.Allocation) {
	now := p.now()
	ts := pcommon.NewTimestampFromTime(now)
	defer p.emitInto(host)
	p.mb.RecordNvidiaGpuProcessesFoldedDataPoint(ts, p.folded)
	p.mb.RecordNvidiaGpuProcessesExitedDataPoint(ts, p.exited)
	if p.src.pods == nil {
		return
	}
	age := now.Sub(p.startTime.AsTime()).Seconds()
	if snap != nil {
		age = now.Sub(snap.Taken).Seconds()
	}
	p.mb.RecordNvidiaGpuAttributionAgeDataPoint(ts, age)
	p.mb.RecordNvidiaGpuAttributionErrorsDataPoint(ts, int64(status.TotalFailures))
	if snap == nil {
		return
	}
	names := map[string]bool{}
	for n := range a.Allocatable {
		names[n] = true
	}
	for n := range a.Allocated {
		names[n] = true
	}
	for n := range a.Unmapped {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		if v, ok := a.Allocatable[n]; ok {
			p.mb.RecordNvidiaGpuDevicesAllocatableDataPoint(ts, int64(v), n)
		}
		p.mb.RecordNvidiaGpuDevicesAllocatedDataPoint(ts, int64(a.Allocated[n]), n)
		p.mb.RecordNvidiaGpuAttributionUnmappedDevicesDataPoint(ts, int64(a.Unmapped[n]), n)
	}
}
