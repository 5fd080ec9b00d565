package gpusim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

// system describes one simulated machine: go-nvml's mock server for its inventory, plus the
// physical envelope the scenarios move within (taken from the public datasheets).
type system struct {
	newServer   func() *server.Server
	powerLimitW float64 // enforced board power limit
	idlePowerW  float64
	smClockMax  uint32 // MHz
	smClockIdle uint32 // MHz
	memClock    uint32 // MHz
	vbios       string
	// PCI bus numbers of the eight SXM GPUs on this kind of board.
	busNumbers [8]uint32
	// minors are the device-node minor numbers (/dev/nvidia<N>) by NVML index. NVML orders
	// GPUs by PCI bus id, the driver numbers device nodes in the order it probed them, so
	// the two often differ; nil means they agree.
	minors []int
	// nvlinks is the number of NVLink links per GPU, 0 without NVLink; nvlinkGen its
	// generation (5 = Blackwell, whose DL error counters are replaced).
	nvlinks, nvlinkGen int
	// nvencs and nvdecs are the video engines per GPU (datacenter HBM parts have no NVENC).
	nvencs, nvdecs int
	// gpm: the GPU has GPM (Hopper and newer).
	gpm bool
	// hbm: the memory has its own temperature sensor (HBM parts).
	hbm bool
	// powerAverage: the one-second average power field exists (not on GA100).
	powerAverage bool
	// vgpuGuest: a virtual machine's vGPU, where the hypervisor keeps temperature, power,
	// energy, PCIe and row-remapping counters to itself and GPM sampling fails although
	// GPM support is claimed (dcgm-exporter#701).
	vgpuGuest bool
	// mig are the GPU instance profiles as the real GPU reports them, by
	// NVML_GPU_INSTANCE_PROFILE_* enum; nil without MIG.
	mig map[int]migProfile
	// defaultDriver is the driver release the machine runs unless told otherwise.
	defaultDriver string
}

var dgxBusNumbers = [8]uint32{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

var systems = map[string]system{
	"dgxa100": {newServer: dgxa100.New, powerLimitW: 400, idlePowerW: 55, smClockMax: 1410, smClockIdle: 210, memClock: 1215, vbios: "92.00.45.00.03",
		busNumbers: [8]uint32{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd},
		nvlinks:    12, nvlinkGen: 3, nvdecs: 5, hbm: true, mig: a100MIGProfiles, defaultDriver: DefaultDriver},
	"dgxh100": {newServer: dgxh100.New, powerLimitW: 700, idlePowerW: 70, smClockMax: 1980, smClockIdle: 345, memClock: 2619, vbios: "96.00.74.00.01", busNumbers: dgxBusNumbers,
		minors:  []int{2, 3, 0, 1, 6, 7, 4, 5},
		nvlinks: 18, nvlinkGen: 4, nvdecs: 7, gpm: true, hbm: true, powerAverage: true, mig: h100MIGProfiles, defaultDriver: DefaultDriver},
	"dgxh200": {newServer: dgxh200.New, powerLimitW: 700, idlePowerW: 75, smClockMax: 1980, smClockIdle: 345, memClock: 3201, vbios: "96.00.99.00.01", busNumbers: dgxBusNumbers,
		nvlinks: 18, nvlinkGen: 4, nvdecs: 7, gpm: true, hbm: true, powerAverage: true, mig: h200MIGProfiles, defaultDriver: DefaultDriver},
	"dgxb200": {newServer: dgxb200.New, powerLimitW: 1000, idlePowerW: 120, smClockMax: 1965, smClockIdle: 360, memClock: 3996, vbios: "97.00.88.00.0F", busNumbers: dgxBusNumbers,
		minors:  []int{4, 5, 6, 7, 0, 1, 2, 3},
		nvlinks: 18, nvlinkGen: 5, nvdecs: 7, gpm: true, hbm: true, powerAverage: true, mig: b200MIGProfiles, defaultDriver: DefaultDriver},
	// Four L4s in a PCIe server (GKE g2, EKS g6): Ada, GDDR6, no NVLink, no MIG, no GPM,
	// two NVENCs and four NVDECs (NVIDIA L4 datasheet), 72 W.
	"l4": {newServer: func() *server.Server { return newServer(gpus.Multiple(4, l4), "550.127.05") },
		powerLimitW: 72, idlePowerW: 16, smClockMax: 2040, smClockIdle: 210, memClock: 6251, vbios: "95.04.29.00.06",
		busNumbers: [8]uint32{0x38, 0x3a, 0xb8, 0xba},
		nvencs:     2, nvdecs: 4, powerAverage: true, defaultDriver: "550.127.05"},
	// One H100 vGPU (H100-80C profile) in a virtual machine.
	"vgpu-h100": {newServer: func() *server.Server { return newServer([]gpus.Config{h100vGPU}, "550.127.05") },
		powerLimitW: 700, idlePowerW: 70, smClockMax: 1980, smClockIdle: 345, memClock: 2619, vbios: "96.00.74.00.01",
		busNumbers: [8]uint32{0x02},
		nvdecs:     7, gpm: true, vgpuGuest: true, defaultDriver: "550.127.05"},
}

// The GPUs go-nvml's mocks lack.
var (
	l4 = gpus.Config{Name: "NVIDIA L4", Architecture: nvml.DEVICE_ARCH_ADA, Brand: nvml.BRAND_NVIDIA,
		MemoryMB: 23034, CudaMajor: 8, CudaMinor: 9, PciDeviceId: 0x27B810DE}
	h100vGPU = gpus.Config{Name: "NVIDIA H100-80C", Architecture: nvml.DEVICE_ARCH_HOPPER, Brand: nvml.BRAND_NVIDIA_VCS,
		MemoryMB: 81920, CudaMajor: 9, CudaMinor: 0, PciDeviceId: 0x233010DE}
)

func newServer(configs []gpus.Config, driver string) *server.Server {
	s, err := server.New(server.WithGPUs(configs...), server.WithDriverVersion(driver))
	if err != nil {
		panic(fmt.Sprintf("go-nvml mock server: %v", err)) // static configurations above
	}
	return s
}

// Systems lists the simulated systems by name.
func Systems() []string {
	out := make([]string, 0, len(systems))
	for name := range systems {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// minor is the device-node minor number of GPU `index`.
func (s system) minor(index int) int {
	if index < len(s.minors) {
		return s.minors[index]
	}
	return index
}

func lookupSystem(name string) (system, error) {
	s, ok := systems[name]
	if !ok {
		return system{}, fmt.Errorf("unknown simulated system %q (known: %s)", name, strings.Join(Systems(), ", "))
	}
	return s, nil
}
