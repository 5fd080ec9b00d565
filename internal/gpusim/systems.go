package gpusim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
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
}

var dgxBusNumbers = [8]uint32{0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb}

var systems = map[string]system{
	"dgxa100": {newServer: dgxa100.New, powerLimitW: 400, idlePowerW: 55, smClockMax: 1410, smClockIdle: 210, memClock: 1215, vbios: "92.00.45.00.03",
		busNumbers: [8]uint32{0x07, 0x0f, 0x47, 0x4e, 0x87, 0x90, 0xb7, 0xbd}},
	"dgxh100": {newServer: dgxh100.New, powerLimitW: 700, idlePowerW: 70, smClockMax: 1980, smClockIdle: 345, memClock: 2619, vbios: "96.00.74.00.01", busNumbers: dgxBusNumbers,
		minors: []int{2, 3, 0, 1, 6, 7, 4, 5}},
	"dgxh200": {newServer: dgxh200.New, powerLimitW: 700, idlePowerW: 75, smClockMax: 1980, smClockIdle: 345, memClock: 3201, vbios: "96.00.99.00.01", busNumbers: dgxBusNumbers},
	"dgxb200": {newServer: dgxb200.New, powerLimitW: 1000, idlePowerW: 120, smClockMax: 1965, smClockIdle: 360, memClock: 3996, vbios: "97.00.88.00.0F", busNumbers: dgxBusNumbers,
		minors: []int{4, 5, 6, 7, 0, 1, 2, 3}},
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
