package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetMigMode            = "nvmlDeviceGetMigMode"
	callGetMaxMigDeviceCount  = "nvmlDeviceGetMaxMigDeviceCount"
	callGetMigDeviceHandle    = "nvmlDeviceGetMigDeviceHandleByIndex"
	callMigGetMemoryInfo      = "nvmlDeviceGetMemoryInfo(mig)"
	callMigGetGpuInstanceID   = "nvmlDeviceGetGpuInstanceId(mig)"
	callMigGetComputeInstance = "nvmlDeviceGetComputeInstanceId(mig)"
)

// migInstance is one MIG instance found in this scrape.
type migInstance struct {
	uuid        string
	gpuInstance int
	compute     int
	profile     string
}

// describe adds the instance's identity to a resource that starts from its parent GPU's:
// hw.id becomes the MIG UUID and hw.parent the GPU's.
func (m *migInstance) describe(rb *metadata.ResourceBuilder, parent *gpuDevice) {
	rb.SetHwID(m.uuid)
	rb.SetHwParent(parent.uuid)
	rb.SetNvidiaMigUUID(m.uuid)
	rb.SetNvidiaMigGpuInstanceID(int64(m.gpuInstance))
	rb.SetNvidiaMigComputeInstanceID(int64(m.compute))
	if m.profile != "" {
		rb.SetNvidiaMigProfile(m.profile)
	}
}

// recordMIG emits one resource per MIG instance of a MIG-enabled GPU, with its framebuffer
// and, where GPM supports it, its activity. The parent keeps its device-level metrics.
// It returns the instances by GPU instance id, for attributing processes.
func (r *deviceRead) recordMIG() map[uint32]*migInstance {
	if r.gone || r.dev.handle == nil || r.skip(callGetMigMode) {
		return nil
	}
	mode, _, ret := r.dev.handle.GetMigMode()
	if !r.ok(callGetMigMode, ret) || mode != nvml.DEVICE_MIG_ENABLE {
		return nil
	}
	count, ret := r.dev.handle.GetMaxMigDeviceCount()
	if !r.ok(callGetMaxMigDeviceCount, ret) {
		return nil
	}
	out := map[uint32]*migInstance{}
	for i := 0; i < count && !r.gone; i++ {
		h, ret := r.dev.handle.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		if !r.ok(callGetMigDeviceHandle, ret) {
			continue
		}
		mi := r.readMigInstance(h)
		if mi == nil {
			continue
		}
		out[uint32(mi.gpuInstance)] = mi
		if mem, ret := h.GetMemoryInfo(); r.ok(callMigGetMemoryInfo, ret) {
			r.mb.RecordHwGpuMemoryLimitDataPoint(r.now, int64(mem.Total))
			r.mb.RecordHwGpuMemoryUsageDataPoint(r.now, int64(mem.Used))
			r.mb.RecordNvidiaGpuMemoryFreeDataPoint(r.now, int64(mem.Free))
		}
		if r.dev.static.gpmSupported {
			if v, ok, ret := r.gpm.Read(r.dev.handle, mi.gpuInstance); r.ok("nvmlGpmMigSampleGet", ret) && ok {
				r.recordActivity(v)
			}
		}
		rb := r.identity()
		mi.describe(rb, r.dev)
		r.mb.EmitForResource(metadata.WithResource(rb.Emit()))
	}
	return out
}

func (r *deviceRead) readMigInstance(h nvml.Device) *migInstance {
	uuid, ret := h.GetUUID()
	if !r.ok("nvmlDeviceGetUUID(mig)", ret) {
		return nil
	}
	gi, ret := h.GetGpuInstanceId()
	if !r.ok(callMigGetGpuInstanceID, ret) {
		return nil
	}
	ci, ret := h.GetComputeInstanceId()
	if !r.ok(callMigGetComputeInstance, ret) {
		ci = 0
	}
	return &migInstance{uuid: uuid, gpuInstance: gi, compute: ci, profile: r.migProfile(gi)}
}

// migProfile names a GPU instance's profile ("1g.10gb": slices and memory in GB, rounded
// up as NVIDIA's names do), cached per instance id. NVML's own name string is only
// reachable through a call go-nvml's mocks cannot serve.
func (r *deviceRead) migProfile(gpuInstance int) string {
	if name, ok := r.dev.migProfiles[gpuInstance]; ok {
		return name
	}
	name := ""
	if gi, ret := r.dev.handle.GetGpuInstanceById(gpuInstance); ret == nvml.SUCCESS {
		if info, ret := gi.GetInfo(); ret == nvml.SUCCESS {
			if p, ret := r.dev.handle.GetGpuInstanceProfileInfo(int(info.ProfileId)); ret == nvml.SUCCESS {
				name = fmt.Sprintf("%dg.%dgb", p.SliceCount, int(math.Ceil(float64(p.MemorySizeMB)/1024)))
			}
		}
	}
	r.dev.migProfiles[gpuInstance] = name
	return name
}
