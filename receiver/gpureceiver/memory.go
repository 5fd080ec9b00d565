package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
)

const (
	callGetMemoryInfo   = "nvmlDeviceGetMemoryInfo"
	callGetMemoryInfoV2 = "nvmlDeviceGetMemoryInfo_v2"
)

// recordMemory reports the framebuffer. nvmlDeviceGetMemoryInfo_v2 (drivers ≥ 510) also
// tells the driver's reservation; older drivers get the v1 call and no reserved metric.
func (r *deviceRead) recordMemory() {
	m := r.metrics
	if !m.HwGpuMemoryUsage.Enabled && !m.HwGpuMemoryLimit.Enabled && !m.NvidiaGpuMemoryFree.Enabled && !m.NvidiaGpuMemoryReserved.Enabled {
		return
	}
	if r.symbols.HasSymbol(callGetMemoryInfoV2) && !r.skip(callGetMemoryInfoV2) {
		mem, ret := r.dev.handle.GetMemoryInfo_v2()
		if r.ok(callGetMemoryInfoV2, ret) {
			r.recordFramebuffer(mem.Total, mem.Used, mem.Free)
			r.memoryReservedApart = true
			r.mb.RecordNvidiaGpuMemoryReservedDataPoint(r.now, int64(mem.Reserved))
			return
		}
	}
	if r.skip(callGetMemoryInfo) {
		return
	}
	var mem nvml.Memory
	var ret nvml.Return
	mem, ret = r.dev.handle.GetMemoryInfo()
	if r.ok(callGetMemoryInfo, ret) {
		r.recordFramebuffer(mem.Total, mem.Used, mem.Free)
	}
}

func (r *deviceRead) recordFramebuffer(total, used, free uint64) {
	r.dev.memoryTotal = total
	r.memoryUsed, r.memoryRead = used, true
	if r.sendSteady(steadyKey{metric: gpuschema.MetricHwGpuMemoryLimit}, float64(total)) {
		r.mb.RecordHwGpuMemoryLimitDataPoint(r.now, int64(total))
	}
	r.mb.RecordHwGpuMemoryUsageDataPoint(r.now, int64(used))
	r.mb.RecordNvidiaGpuMemoryFreeDataPoint(r.now, int64(free))
	r.memoryUsageSent = r.metrics.HwGpuMemoryUsage.Enabled
}
