package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// GPM (GPU Performance Monitoring, Hopper and newer, drivers R520+) measures activity
// between two samples of a GPU or of one of its MIG GPU instances.

// gpmActivity indexes gpmValues.activity.
type gpmActivity int

// The activities the receiver reports, each a ratio 0–1 over the interval.
const (
	gpmGraphicsActive gpmActivity = iota
	gpmSMActive
	gpmSMOccupancy
	gpmTensorActive
	gpmDRAMActive
	gpmFP64Active
	gpmFP32Active
	gpmFP16Active
	gpmNumActivities
)

// gpmValues is what GPM measured over one interval.
type gpmValues struct {
	activity [gpmNumActivities]float64
	// Bandwidth in bytes per second (whole GPUs only).
	pcieTx, pcieRx, nvlinkTx, nvlinkRx float64
}

// gpmNoMIG is the gpuInstance argument for a whole GPU.
const gpmNoMIG = -1

// gpmSymbols are the NVML entry points GPM needs (drivers R520+).
var gpmSymbols = []string{"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet", "nvmlGpmSampleFree"}

// gpmMetricIDs maps what the receiver reports to NVML GPM metric ids.
var gpmMetricIDs = [gpmNumActivities]nvml.GpmMetricId{
	gpmGraphicsActive: nvml.GPM_METRIC_GRAPHICS_UTIL,
	gpmSMActive:       nvml.GPM_METRIC_SM_UTIL,
	gpmSMOccupancy:    nvml.GPM_METRIC_SM_OCCUPANCY,
	gpmTensorActive:   nvml.GPM_METRIC_ANY_TENSOR_UTIL,
	gpmDRAMActive:     nvml.GPM_METRIC_DRAM_BW_UTIL,
	gpmFP64Active:     nvml.GPM_METRIC_FP64_UTIL,
	gpmFP32Active:     nvml.GPM_METRIC_FP32_UTIL,
	gpmFP16Active:     nvml.GPM_METRIC_FP16_UTIL,
}

var gpmBandwidthIDs = []nvml.GpmMetricId{
	nvml.GPM_METRIC_PCIE_TX_PER_SEC, nvml.GPM_METRIC_PCIE_RX_PER_SEC,
	nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
}

const mebibyte = 1024 * 1024

// nvmlGPM reads GPM through NVML: two samples per target, and the metrics over the
// interval between them.
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

// Supported reports whether the GPU supports GPM.
func (g *nvmlGPM) Supported(dev nvml.Device) bool {
	s, ret := dev.GpmQueryDeviceSupport()
	return ret == nvml.SUCCESS && s.IsSupportedDevice != 0
}

// Read takes a sample of the GPU (or of one of its MIG GPU instances) and returns the
// values over the interval since the previous sample of the same target; ok is false on
// the first sample.
func (g *nvmlGPM) Read(dev nvml.Device, gpuInstance int) (gpmValues, bool, nvml.Return) {
	key := gpmTarget{dev: dev, gpuInstance: gpuInstance}
	p := g.samples[key]
	if p == nil {
		a, ret := g.lib.GpmSampleAlloc()
		if ret != nvml.SUCCESS {
			return gpmValues{}, false, ret
		}
		b, ret := g.lib.GpmSampleAlloc()
		if ret != nvml.SUCCESS {
			a.Free()
			return gpmValues{}, false, ret
		}
		p = &gpmPair{prev: a, cur: b}
		g.samples[key] = p
	}
	var ret nvml.Return
	if gpuInstance == gpmNoMIG {
		ret = dev.GpmSampleGet(p.cur)
	} else {
		ret = dev.GpmMigSampleGet(gpuInstance, p.cur)
	}
	if ret != nvml.SUCCESS {
		return gpmValues{}, false, ret
	}
	if !p.primed {
		p.primed = true
		p.prev, p.cur = p.cur, p.prev
		return gpmValues{}, false, nvml.SUCCESS
	}
	req := &nvml.GpmMetricsGetType{Sample1: p.prev, Sample2: p.cur}
	for _, id := range gpmMetricIDs {
		req.Metrics[req.NumMetrics].MetricId = uint32(id)
		req.NumMetrics++
	}
	if gpuInstance == gpmNoMIG {
		for _, id := range gpmBandwidthIDs {
			req.Metrics[req.NumMetrics].MetricId = uint32(id)
			req.NumMetrics++
		}
	}
	p.prev, p.cur = p.cur, p.prev
	if ret := g.lib.GpmMetricsGet(req); ret != nvml.SUCCESS {
		return gpmValues{}, false, ret
	}
	var v gpmValues
	for i := 0; i < int(req.NumMetrics); i++ {
		m := req.Metrics[i]
		if nvml.Return(m.NvmlReturn) != nvml.SUCCESS {
			continue
		}
		switch id := nvml.GpmMetricId(m.MetricId); id {
		case nvml.GPM_METRIC_PCIE_TX_PER_SEC:
			v.pcieTx = m.Value * mebibyte
		case nvml.GPM_METRIC_PCIE_RX_PER_SEC:
			v.pcieRx = m.Value * mebibyte
		case nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
			v.nvlinkTx = m.Value * mebibyte
		case nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
			v.nvlinkRx = m.Value * mebibyte
		default:
			for a, want := range gpmMetricIDs {
				if id == want {
					v.activity[a] = m.Value / percent
				}
			}
		}
	}
	return v, true, nvml.SUCCESS
}

// Forget releases the samples kept for a GPU (it was lost or removed).
func (g *nvmlGPM) Forget(dev nvml.Device) {
	for key, p := range g.samples {
		if key.dev == dev {
			p.prev.Free()
			p.cur.Free()
			delete(g.samples, key)
		}
	}
}

// Close releases every sample.
func (g *nvmlGPM) Close() {
	for key, p := range g.samples {
		p.prev.Free()
		p.cur.Free()
		delete(g.samples, key)
	}
}

// recordProfiling reports GPM activity of the whole GPU (Hopper and newer).
func (r *deviceRead) recordProfiling() {
	m := r.metrics
	if r.gone || !r.dev.static.gpmSupported || (!m.NvidiaGpuProfilingActivity.Enabled && !m.NvidiaGpuProfilingBandwidth.Enabled) {
		return
	}
	v, ok, ret := r.gpm.Read(r.dev.handle, gpmNoMIG)
	if !r.ok("nvmlGpmSampleGet", ret) || !ok {
		return
	}
	r.recordActivity(v)
	for _, b := range []struct {
		value float64
		link  metadata.AttributeNvidiaGpuInterconnect
		dir   metadata.AttributeNetworkIoDirection
	}{
		{v.pcieTx, metadata.AttributeNvidiaGpuInterconnectPcie, metadata.AttributeNetworkIoDirectionTransmit},
		{v.pcieRx, metadata.AttributeNvidiaGpuInterconnectPcie, metadata.AttributeNetworkIoDirectionReceive},
		{v.nvlinkTx, metadata.AttributeNvidiaGpuInterconnectNvlink, metadata.AttributeNetworkIoDirectionTransmit},
		{v.nvlinkRx, metadata.AttributeNvidiaGpuInterconnectNvlink, metadata.AttributeNetworkIoDirectionReceive},
	} {
		r.mb.RecordNvidiaGpuProfilingBandwidthDataPoint(r.now, b.value, b.link, b.dir)
	}
}

var activityAttrs = [gpmNumActivities]metadata.AttributeNvidiaGpuProfilingMetric{
	gpmGraphicsActive: metadata.AttributeNvidiaGpuProfilingMetricGraphicsActive,
	gpmSMActive:       metadata.AttributeNvidiaGpuProfilingMetricSmActive,
	gpmSMOccupancy:    metadata.AttributeNvidiaGpuProfilingMetricSmOccupancy,
	gpmTensorActive:   metadata.AttributeNvidiaGpuProfilingMetricTensorActive,
	gpmDRAMActive:     metadata.AttributeNvidiaGpuProfilingMetricDramActive,
	gpmFP64Active:     metadata.AttributeNvidiaGpuProfilingMetricFp64Active,
	gpmFP32Active:     metadata.AttributeNvidiaGpuProfilingMetricFp32Active,
	gpmFP16Active:     metadata.AttributeNvidiaGpuProfilingMetricFp16Active,
}

func (r *deviceRead) recordActivity(v gpmValues) {
	if !r.metrics.NvidiaGpuProfilingActivity.Enabled {
		return
	}
	for i, attr := range activityAttrs {
		r.mb.RecordNvidiaGpuProfilingActivityDataPoint(r.now, v.activity[i], attr)
	}
}
