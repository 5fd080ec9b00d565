package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"fmt"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// Naming a MIG instance's profile ("1g.10gb", "3g.40gb", "1g.10gb+me", "1c.3g.40gb") as
// NVIDIA names it, which is also the nvidia.com/mig-* resource the pod asked for.
//
// A GPU instance's profile id (nvmlGpuInstanceInfo_t.profileId) is the device's own
// unique id - on an H100 1g.10gb is 19, 3g.40gb is 9, 7g.80gb is 0 - not the
// NVML_GPU_INSTANCE_PROFILE_* enum nvmlDeviceGetGpuInstanceProfileInfo is asked by. The
// profile is the enum whose answer carries that id. nvmlDeviceGetGpuInstanceById "requires
// privileged user" (NVIDIA's MIG monitor capability); without it the profile is the one
// enum whose slices, memory and media engines match what the MIG device itself reports
// (nvmlDeviceGetAttributes needs no privilege), and unnamed when that is ambiguous. The
// name is the driver's own (the v2 profile query, no privilege needed); where a driver
// lacks that query, it is written as go-nvlib writes it from the GPU's total memory.

const (
	callGetGpuInstanceByID         = "nvmlDeviceGetGpuInstanceById"
	callGpuInstanceGetInfo         = "nvmlGpuInstanceGetInfo"
	callGetGpuInstanceProfileInfo  = "nvmlDeviceGetGpuInstanceProfileInfo"
	callGetGpuInstanceProfileInfoV = nvmlclient.SymbolGetGpuInstanceProfileInfoV
	callMigGetAttributes           = "nvmlDeviceGetAttributes(mig)"
	callGetMemoryInfoParent        = "nvmlDeviceGetMemoryInfo(mig parent)"
	gibibyte                       = 1 << 30
)

// nameMIGProfile names the profile of GPU instance gpuInstance, of which h is a MIG device;
// "" when it cannot be told.
func (r *deviceRead) nameMIGProfile(h nvml.Device, gpuInstance int) string {
	profiles := r.migProfileTable()
	if len(profiles) == 0 {
		return ""
	}
	attrs, ret := h.GetAttributes()
	haveAttrs := r.ok(callMigGetAttributes, ret)
	enum := -1
	if id, ok := r.gpuInstanceProfileID(gpuInstance); ok {
		for e, info := range profiles {
			if info.Id == id {
				enum = e
			}
		}
	} else if haveAttrs {
		enum = matchProfileByAttributes(profiles, attrs)
	}
	if enum < 0 {
		return ""
	}
	info := profiles[enum]
	memoryMiB, ciSlices := info.MemorySizeMB, info.SliceCount
	if haveAttrs {
		memoryMiB, ciSlices = attrs.MemorySizeMB, attrs.ComputeInstanceSliceCount
	}
	if name := r.driverProfileName(enum); name != "" {
		if ciSlices != 0 && ciSlices != info.SliceCount {
			name = fmt.Sprintf("%dc.%s", ciSlices, name)
		}
		return name
	}
	total := r.gpuMemoryTotal()
	if total == 0 {
		return ""
	}
	return formatMIGProfile(enum, ciSlices, info.SliceCount, memoryMiB, total)
}

// driverProfileName is the driver's name of a profile, "" where it has none to give.
func (r *deviceRead) driverProfileName(enum int) string {
	if !r.symbols.HasSymbol(nvmlclient.SymbolGetGpuInstanceProfileInfoV) || r.skip(callGetGpuInstanceProfileInfoV) {
		return ""
	}
	name, ret := nvmlclient.GpuInstanceProfileName(r.dev.handle, enum)
	if !r.ok(callGetGpuInstanceProfileInfoV, ret) {
		return ""
	}
	return name
}

// gpuInstanceProfileID asks for a GPU instance's unique profile id (a privileged call).
func (r *deviceRead) gpuInstanceProfileID(gpuInstance int) (uint32, bool) {
	if r.skip(callGetGpuInstanceByID) {
		return 0, false
	}
	gi, ret := r.dev.handle.GetGpuInstanceById(gpuInstance)
	if !r.ok(callGetGpuInstanceByID, ret) {
		return 0, false
	}
	info, ret := gi.GetInfo()
	if !r.ok(callGpuInstanceGetInfo, ret) {
		return 0, false
	}
	return info.ProfileId, true
}

// migProfileTable is the GPU's GPU instance profiles by enum, read once per MIG mode: asked
// enum by enum until NVML answers INVALID_ARGUMENT, as nvml.h says to enumerate them.
func (r *deviceRead) migProfileTable() map[int]nvml.GpuInstanceProfileInfo {
	st := &r.dev.mig
	if st.profileInfos != nil {
		return st.profileInfos
	}
	table := map[int]nvml.GpuInstanceProfileInfo{}
	for e := 0; e < nvml.GPU_INSTANCE_PROFILE_COUNT && !r.gone; e++ {
		info, ret := r.dev.handle.GetGpuInstanceProfileInfo(e)
		if ret == nvml.ERROR_INVALID_ARGUMENT {
			break
		}
		if ret == nvml.ERROR_NOT_SUPPORTED {
			continue // a profile this GPU does not offer
		}
		if r.ok(callGetGpuInstanceProfileInfo, ret) {
			table[e] = info
		}
	}
	st.profileInfos = table
	return table
}

// matchProfileByAttributes is the one profile whose slices, memory and media engines are the
// MIG device's, or -1. 1g.10gb and 1g.10gb+me differ only in their JPEG and OFA engines.
func matchProfileByAttributes(profiles map[int]nvml.GpuInstanceProfileInfo, a nvml.DeviceAttributes) int {
	found := -1
	for e, info := range profiles {
		if info.SliceCount == a.GpuInstanceSliceCount && info.MemorySizeMB == a.MemorySizeMB &&
			info.DecoderCount == a.SharedDecoderCount && info.JpegCount == a.SharedJpegCount && info.OfaCount == a.SharedOfaCount {
			if found >= 0 {
				return -1 // ambiguous: better no name than a wrong one
			}
			found = e
		}
	}
	return found
}

// gpuMemoryTotal is the whole GPU's framebuffer in bytes, which profile names are rounded
// against: as last read by the GPU's own memory metrics, else asked for (in MIG mode the
// whole GPU's memory is also a privileged read); 0 when unknown.
func (r *deviceRead) gpuMemoryTotal() uint64 {
	if r.dev.memoryTotal == 0 && !r.skip(callGetMemoryInfoParent) {
		mem, ret := r.dev.handle.GetMemoryInfo()
		if r.ok(callGetMemoryInfoParent, ret) {
			r.dev.memoryTotal = mem.Total
		}
	}
	return r.dev.memoryTotal
}

// formatMIGProfile writes a profile name as go-nvlib does: the memory is the GPU's total
// in whole GiB times the instance's share of it rounded up to eighths; a compute instance
// smaller than its GPU instance is named "<c>c.<g>g.<mem>gb"; the media-engine variants
// carry "+me", "+me.all", "-me", and the graphics ones "+gfx".
func formatMIGProfile(enum int, ciSlices, giSlices uint32, memoryMiB, totalBytes uint64) string {
	share := math.Ceil(float64(memoryMiB*mebibyte)/float64(totalBytes)*8) / 8
	totalGiB := float64((totalBytes + gibibyte - 1) / gibibyte)
	gb := uint64(math.Round(share * totalGiB))
	name := fmt.Sprintf("%dg.%dgb", giSlices, gb)
	if ciSlices != 0 && ciSlices != giSlices {
		name = fmt.Sprintf("%dc.%s", ciSlices, name)
	}
	switch enum {
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1:
		name += "+me"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME:
		name += "+me.all"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX,
		nvml.GPU_INSTANCE_PROFILE_3_SLICE_GFX:
		name += "+gfx"
	case nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME:
		name += "-me"
	}
	return name
}
