package simulator

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/gpm"
)

// GPM returns the simulator's GPM reader: Hopper and newer systems support it, A100
// does not (as on real hardware).
func (s *Simulator) GPM() gpm.Reader { return &gpmReader{sim: s} }

type gpmReader struct {
	sim  *Simulator
	seen map[string]bool
}

func (g *gpmReader) Supported(dev nvml.Device) bool {
	g.sim.count("GpmQueryDeviceSupport")
	return g.sim.system != "dgxa100"
}

func (g *gpmReader) Read(dev nvml.Device, gpuInstance int) (gpm.Values, bool, nvml.Return) {
	g.sim.count("GpmSampleGet")
	d, ok := dev.(*Device)
	if !ok {
		return gpm.Values{}, false, nvml.ERROR_INVALID_ARGUMENT
	}
	_, r, ret := d.read("GpmMetricsGet")
	if ret != nvml.SUCCESS {
		return gpm.Values{}, false, ret
	}
	key := d.uuid
	if gpuInstance != gpm.NoMIG {
		key += "/" + string(rune('0'+gpuInstance))
	}
	if g.seen == nil {
		g.seen = map[string]bool{}
	}
	if !g.seen[key] {
		g.seen[key] = true
		return gpm.Values{}, false, nvml.SUCCESS
	}
	var v gpm.Values
	copy(v.Activity[:], r.gpm[:])
	if gpuInstance != gpm.NoMIG {
		// Each MIG instance is busy in proportion to its slot, so instances differ.
		scale := 0.5 + 0.1*float64(gpuInstance%5)
		for i := range v.Activity {
			v.Activity[i] *= scale
		}
		return v, true, nvml.SUCCESS
	}
	busy := r.utilization / 100
	v.PCIeTx = (0.2 + busy*1.8) * 1e9
	v.PCIeRx = (0.3 + busy*2.7) * 1e9
	links := float64(nvlinkLinks[d.sim.system])
	v.NVLinkTx = links * (0.05 + busy*9.5) * 1e9
	v.NVLinkRx = v.NVLinkTx
	return v, true, nvml.SUCCESS
}

func (g *gpmReader) Forget(dev nvml.Device) {
	if d, ok := dev.(*Device); ok {
		for k := range g.seen {
			if len(k) >= len(d.uuid) && k[:len(d.uuid)] == d.uuid {
				delete(g.seen, k)
			}
		}
	}
}

func (g *gpmReader) Close() {}
