package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/gpm"
)

// gpmSymbols are the NVML entry points GPM needs (drivers R520+).
var gpmSymbols = []string{"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet", "nvmlGpmSampleFree"}

// gpmMetricIDs maps what the receiver reports to NVML GPM metric ids.
var gpmMetricIDs = [gpm.NumActivities]nvml.GpmMetricId{
	gpm.GraphicsActive: nvml.GPM_METRIC_GRAPHICS_UTIL,
	gpm.SMActive:       nvml.GPM_METRIC_SM_UTIL,
	gpm.SMOccupancy:    nvml.GPM_METRIC_SM_OCCUPANCY,
	gpm.TensorActive:   nvml.GPM_METRIC_ANY_TENSOR_UTIL,
	gpm.DRAMActive:     nvml.GPM_METRIC_DRAM_BW_UTIL,
	gpm.FP64Active:     nvml.GPM_METRIC_FP64_UTIL,
	gpm.FP32Active:     nvml.GPM_METRIC_FP32_UTIL,
	gpm.FP16Active:     nvml.GPM_METRIC_FP16_UTIL,
}

var gpmBandwidthIDs = []nvml.GpmMetricId{
	nvml.GPM_METRIC_PCIE_TX_PER_SEC, nvml.GPM_METRIC_PCIE_RX_PER_SEC,
	nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
}

const mebibyte = 1024 * 1024

// nvmlGPM reads GPM through the real library: two samples per target, and the metrics
// over the interval between them.
type nvmlGPM struct {
	lib     nvml.Interface
	samples map[gpmTarget]*gpmPair
}

type gpmTarget struct {
	dev         nvml.Device
	gpuInstance int
}

type gpmPair struct {
	prev, cur nvml.GpmSample
	primed    bool
}

func newNVMLGPM(lib nvml.Interface) *nvmlGPM {
	return &nvmlGPM{lib: lib, samples: map[gpmTarget]*gpmPair{}}
}

func (g *nvmlGPM) Supported(dev nvml.Device) bool {
	s, ret := dev.GpmQueryDeviceSupport()
	return ret == nvml.SUCCESS && s.IsSupportedDevice != 0
}

func (g *nvmlGPM) Read(dev nvml.Device, gpuInstance int) (gpm.Values, bool, nvml.Return) {
	key := gpmTarget{dev: dev, gpuInstance: gpuInstance}
	p := g.samples[key]
	if p == nil {
		a, ret := g.lib.GpmSampleAlloc()
		if ret != nvml.SUCCESS {
			return gpm.Values{}, false, ret
		}
		b, ret := g.lib.GpmSampleAlloc()
		if ret != nvml.SUCCESS {
			a.Free()
			return gpm.Values{}, false, ret
		}
		p = &gpmPair{prev: a, cur: b}
		g.samples[key] = p
	}
	var ret nvml.Return
	if gpuInstance == gpm.NoMIG {
		ret = dev.GpmSampleGet(p.cur)
	} else {
		ret = dev.GpmMigSampleGet(gpuInstance, p.cur)
	}
	if ret != nvml.SUCCESS {
		return gpm.Values{}, false, ret
	}
	if !p.primed {
		p.primed = true
		p.prev, p.cur = p.cur, p.prev
		return gpm.Values{}, false, nvml.SUCCESS
	}
	req := &nvml.GpmMetricsGetType{Sample1: p.prev, Sample2: p.cur}
	for _, id := range gpmMetricIDs {
		req.Metrics[req.NumMetrics].MetricId = uint32(id)
		req.NumMetrics++
	}
	if gpuInstance == gpm.NoMIG {
		for _, id := range gpmBandwidthIDs {
			req.Metrics[req.NumMetrics].MetricId = uint32(id)
			req.NumMetrics++
		}
	}
	p.prev, p.cur = p.cur, p.prev
	if ret := g.lib.GpmMetricsGet(req); ret != nvml.SUCCESS {
		return gpm.Values{}, false, ret
	}
	var v gpm.Values
	for i := 0; i < int(req.NumMetrics); i++ {
		m := req.Metrics[i]
		if nvml.Return(m.NvmlReturn) != nvml.SUCCESS {
			continue
		}
		switch id := nvml.GpmMetricId(m.MetricId); id {
		case nvml.GPM_METRIC_PCIE_TX_PER_SEC:
			v.PCIeTx = m.Value * mebibyte
		case nvml.GPM_METRIC_PCIE_RX_PER_SEC:
			v.PCIeRx = m.Value * mebibyte
		case nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
			v.NVLinkTx = m.Value * mebibyte
		case nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
			v.NVLinkRx = m.Value * mebibyte
		default:
			for a, want := range gpmMetricIDs {
				if id == want {
					v.Activity[a] = m.Value / percent
				}
			}
		}
	}
	return v, true, nvml.SUCCESS
}

func (g *nvmlGPM) Forget(dev nvml.Device) {
	for key, p := range g.samples {
		if key.dev == dev {
			p.prev.Free()
			p.cur.Free()
			delete(g.samples, key)
		}
	}
}

func (g *nvmlGPM) Close() {
	for key, p := range g.samples {
		p.prev.Free()
		p.cur.Free()
		delete(g.samples, key)
	}
}
