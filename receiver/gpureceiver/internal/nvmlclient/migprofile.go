package nvmlclient

import (
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// SymbolGetGpuInstanceProfileInfoV is the versioned profile query whose v2 answer carries
// NVIDIA's own name of a GPU instance profile ("MIG 1g.10gb", "MIG 1g.10gb+me"); it needs no
// privilege and exists from R515 on.
const SymbolGetGpuInstanceProfileInfoV = "nvmlDeviceGetGpuInstanceProfileInfoV"

// profileNamer is a device that answers the versioned profile query without cgo: the
// simulator's. go-nvml's GetGpuInstanceProfileInfoV returns a handler bound to a real device
// handle, which nothing else can provide.
type profileNamer interface {
	GpuInstanceProfileName(profile int) (string, nvml.Return)
}

// GpuInstanceProfileName is NVIDIA's name of a GPU instance profile, asked by its
// NVML_GPU_INSTANCE_PROFILE_* enum, without the "MIG " prefix: "1g.10gb". Call it only where
// the driver has SymbolGetGpuInstanceProfileInfoV.
func GpuInstanceProfileName(dev nvml.Device, profile int) (string, nvml.Return) {
	var name string
	var ret nvml.Return
	if sim, ok := dev.(profileNamer); ok {
		name, ret = sim.GpuInstanceProfileName(profile)
	} else {
		info, r := dev.GetGpuInstanceProfileInfoV(profile).V2()
		name, ret = cString(info.Name[:]), r
	}
	return strings.TrimPrefix(strings.TrimSpace(name), "MIG "), ret
}

func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
