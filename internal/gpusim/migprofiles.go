package gpusim

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// migProfile is a GPU instance profile as a real GPU reports it through
// nvmlDeviceGetGpuInstanceProfileInfo(enum): its id is the device's own unique profile id
// (what `nvidia-smi mig -lgip` prints as ID and nvmlGpuInstanceInfo_t.profileId holds), not
// the NVML_GPU_INSTANCE_PROFILE_* enum it is asked by. go-nvml's mocks set id = enum and
// round the memory, so code that confuses the two passes on them; these tables do not.
//
// Sources: NVIDIA's MIG user guide (A100 40GB), `nvidia-smi mig -lgip` outputs published
// with NVIDIA/mig-parted and NVIDIA/gpu-operator issues (H100, H200, B200).
type migProfile struct {
	// name is NVIDIA's, as the v2 profile query and `nvidia-smi mig -lgip` give it.
	name                                   string
	id, slices, instances, multiprocessors uint32
	memoryMiB                              uint64
	decoders, jpegs, ofas                  uint32
}

func (p migProfile) info() nvml.GpuInstanceProfileInfo {
	return nvml.GpuInstanceProfileInfo{
		Id: p.id, IsP2pSupported: 1, SliceCount: p.slices, InstanceCount: p.instances,
		MultiprocessorCount: p.multiprocessors, CopyEngineCount: p.slices,
		DecoderCount: p.decoders, JpegCount: p.jpegs, OfaCount: p.ofas, MemorySizeMB: p.memoryMiB,
	}
}

// A100-SXM4-40GB: 1g.5gb=19, 1g.5gb+me=20, 1g.10gb=15, 2g.10gb=14, 3g.20gb=9, 4g.20gb=5, 7g.40gb=0.
var a100MIGProfiles = map[int]migProfile{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      {name: "MIG 1g.5gb", id: 19, slices: 1, instances: 7, multiprocessors: 14, memoryMiB: 4864},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: {name: "MIG 1g.5gb+me", id: 20, slices: 1, instances: 1, multiprocessors: 14, memoryMiB: 4864, decoders: 1, jpegs: 1, ofas: 1},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: {name: "MIG 1g.10gb", id: 15, slices: 1, instances: 4, multiprocessors: 14, memoryMiB: 9856, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      {name: "MIG 2g.10gb", id: 14, slices: 2, instances: 3, multiprocessors: 28, memoryMiB: 9856, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      {name: "MIG 3g.20gb", id: 9, slices: 3, instances: 2, multiprocessors: 42, memoryMiB: 19968, decoders: 2},
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      {name: "MIG 4g.20gb", id: 5, slices: 4, instances: 1, multiprocessors: 56, memoryMiB: 19968, decoders: 2},
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      {name: "MIG 7g.40gb", id: 0, slices: 7, instances: 1, multiprocessors: 98, memoryMiB: 40192, decoders: 5, jpegs: 1, ofas: 1},
}

// H100 80GB: 1g.10gb=19, 1g.10gb+me=20, 1g.20gb=15, 2g.20gb=14, 3g.40gb=9, 4g.40gb=5, 7g.80gb=0.
var h100MIGProfiles = map[int]migProfile{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      {name: "MIG 1g.10gb", id: 19, slices: 1, instances: 7, multiprocessors: 16, memoryMiB: 9984, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: {name: "MIG 1g.10gb+me", id: 20, slices: 1, instances: 1, multiprocessors: 16, memoryMiB: 9984, decoders: 1, jpegs: 1, ofas: 1},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: {name: "MIG 1g.20gb", id: 15, slices: 1, instances: 4, multiprocessors: 26, memoryMiB: 20096, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      {name: "MIG 2g.20gb", id: 14, slices: 2, instances: 3, multiprocessors: 32, memoryMiB: 20096, decoders: 2},
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      {name: "MIG 3g.40gb", id: 9, slices: 3, instances: 2, multiprocessors: 60, memoryMiB: 40448, decoders: 3},
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      {name: "MIG 4g.40gb", id: 5, slices: 4, instances: 1, multiprocessors: 64, memoryMiB: 40448, decoders: 4},
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      {name: "MIG 7g.80gb", id: 0, slices: 7, instances: 1, multiprocessors: 132, memoryMiB: 81152, decoders: 7, jpegs: 7, ofas: 1},
}

// H200 141GB: 1g.18gb=19, 1g.18gb+me=20, 1g.35gb=15, 2g.35gb=14, 3g.71gb=9, 4g.71gb=5, 7g.141gb=0.
var h200MIGProfiles = map[int]migProfile{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      {name: "MIG 1g.18gb", id: 19, slices: 1, instances: 7, multiprocessors: 16, memoryMiB: 16384, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: {name: "MIG 1g.18gb+me", id: 20, slices: 1, instances: 1, multiprocessors: 16, memoryMiB: 16384, decoders: 1, jpegs: 1, ofas: 1},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: {name: "MIG 1g.35gb", id: 15, slices: 1, instances: 4, multiprocessors: 26, memoryMiB: 33024, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      {name: "MIG 2g.35gb", id: 14, slices: 2, instances: 3, multiprocessors: 32, memoryMiB: 33024, decoders: 2},
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      {name: "MIG 3g.71gb", id: 9, slices: 3, instances: 2, multiprocessors: 60, memoryMiB: 71168, decoders: 3},
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      {name: "MIG 4g.71gb", id: 5, slices: 4, instances: 1, multiprocessors: 64, memoryMiB: 71168, decoders: 4},
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      {name: "MIG 7g.141gb", id: 0, slices: 7, instances: 1, multiprocessors: 132, memoryMiB: 143104, decoders: 7, jpegs: 7, ofas: 1},
}

// B200 180GB: 1g.23gb=19, 1g.23gb+me=20, 1g.45gb=15, 2g.45gb=14, 3g.90gb=9, 4g.90gb=5, 7g.180gb=0.
var b200MIGProfiles = map[int]migProfile{
	nvml.GPU_INSTANCE_PROFILE_1_SLICE:      {name: "MIG 1g.23gb", id: 19, slices: 1, instances: 7, multiprocessors: 18, memoryMiB: 22528, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1: {name: "MIG 1g.23gb+me", id: 20, slices: 1, instances: 1, multiprocessors: 18, memoryMiB: 22528, decoders: 1, jpegs: 1, ofas: 1},
	nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2: {name: "MIG 1g.45gb", id: 15, slices: 1, instances: 4, multiprocessors: 30, memoryMiB: 45312, decoders: 1},
	nvml.GPU_INSTANCE_PROFILE_2_SLICE:      {name: "MIG 2g.45gb", id: 14, slices: 2, instances: 3, multiprocessors: 36, memoryMiB: 45312, decoders: 2},
	nvml.GPU_INSTANCE_PROFILE_3_SLICE:      {name: "MIG 3g.90gb", id: 9, slices: 3, instances: 2, multiprocessors: 66, memoryMiB: 91648, decoders: 3},
	nvml.GPU_INSTANCE_PROFILE_4_SLICE:      {name: "MIG 4g.90gb", id: 5, slices: 4, instances: 1, multiprocessors: 72, memoryMiB: 91648, decoders: 4},
	nvml.GPU_INSTANCE_PROFILE_7_SLICE:      {name: "MIG 7g.180gb", id: 0, slices: 7, instances: 1, multiprocessors: 144, memoryMiB: 183808, decoders: 7, jpegs: 7, ofas: 1},
}
