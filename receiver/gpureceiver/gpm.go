package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// GPM (GPU Performance Monitoring, Hopper and newer, drivers R520+) measures activity
// between two samples of a GPU or of one of its MIG GPU instances. Where a GPU has it,
// the receiver takes one sample pair per scrape and reads from it the profiling activity,
// the GPU's utilization and its decoder/encoder utilization (averages over exactly the
// scrape interval), instead of asking NVML's sample buffers for each.

// gpmSymbols are the NVML entry points GPM needs.
var gpmSymbols = []string{"nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet", "nvmlGpmSampleFree"}

// gpmActivity is one value of nvidia.gpu.profiling.metric and the GPM metric behind it.
type gpmActivity struct {
	attr metadata.AttributeNvidiaGpuProfilingMetric
	id   nvml.GpmMetricId
}

// gpmActivities are all of them, in the order they are reported.
var gpmActivities = []gpmActivity{
	{metadata.AttributeNvidiaGpuProfilingMetricGraphicsActive, nvml.GPM_METRIC_GRAPHICS_UTIL},
	{metadata.AttributeNvidiaGpuProfilingMetricSmActive, nvml.GPM_METRIC_SM_UTIL},
	{metadata.AttributeNvidiaGpuProfilingMetricSmOccupancy, nvml.GPM_METRIC_SM_OCCUPANCY},
	{metadata.AttributeNvidiaGpuProfilingMetricTensorActive, nvml.GPM_METRIC_ANY_TENSOR_UTIL},
	{metadata.AttributeNvidiaGpuProfilingMetricDramActive, nvml.GPM_METRIC_DRAM_BW_UTIL},
	{metadata.AttributeNvidiaGpuProfilingMetricFp64Active, nvml.GPM_METRIC_FP64_UTIL},
	{metadata.AttributeNvidiaGpuProfilingMetricFp32Active, nvml.GPM_METRIC_FP32_UTIL},
	{metadata.AttributeNvidiaGpuProfilingMetricFp16Active, nvml.GPM_METRIC_FP16_UTIL},
}

// Per-engine video metrics: a GPU has up to eight NVDECs and four NVENCs, and answers
// NOT_SUPPORTED for the engines it lacks.
var (
	gpmDecoders = idRange(nvml.GPM_METRIC_NVDEC_0_UTIL, 8)
	gpmEncoders = idRange(nvml.GPM_METRIC_NVENC_0_UTIL, 4)
)

var gpmBandwidth = []struct {
	id   nvml.GpmMetricId
	link metadata.AttributeNvidiaGpuInterconnect
	dir  metadata.AttributeNetworkIoDirection
}{
	{nvml.GPM_METRIC_PCIE_TX_PER_SEC, metadata.AttributeNvidiaGpuInterconnectPcie, metadata.AttributeNetworkIoDirectionTransmit},
	{nvml.GPM_METRIC_PCIE_RX_PER_SEC, metadata.AttributeNvidiaGpuInterconnectPcie, metadata.AttributeNetworkIoDirectionReceive},
	{nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, metadata.AttributeNvidiaGpuInterconnectNvlink, metadata.AttributeNetworkIoDirectionTransmit},
	{nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, metadata.AttributeNvidiaGpuInterconnectNvlink, metadata.AttributeNetworkIoDirectionReceive},
}

func idRange(first nvml.GpmMetricId, n int) []nvml.GpmMetricId {
	out := make([]nvml.GpmMetricId, n)
	for i := range out {
		out[i] = first + nvml.GpmMetricId(i)
	}
	return out
}

const (
	mebibyte         = 1024 * 1024
	callGpmSampleGet = "nvmlGpmSampleGet"
)

// gpmWholeGPU is the MIG device argument of Read for a whole GPU.
const gpmWholeGPU = ""

// gpmValues is what GPM measured over one interval; a metric the GPU did not answer is
// absent from the maps.
type gpmValues struct {
	// activity by GPM metric id, as a ratio 0–1.
	activity map[nvml.GpmMetricId]float64
	// decoder and encoder: mean over the engines the GPU has, 0–1.
	decoder, encoder       float64
	hasDecoder, hasEncoder bool
	// bandwidth by GPM metric id, in bytes per second.
	bandwidth map[nvml.GpmMetricId]float64
}

// selectedActivities are the configured activities, in reporting order.
func selectedActivities(names []string) []gpmActivity {
	var out []gpmActivity
	for _, a := range gpmActivities {
		for _, n := range names {
			if a.attr.String() == n {
				out = append(out, a)
			}
		}
	}
	return out
}

// gpmRequest lists the metric ids asked for a whole GPU and for a MIG instance; the
// configuration decides them once.
type gpmRequest struct {
	gpu, mig []nvml.GpmMetricId
}

// newGPMRequest asks for what the enabled metrics need: the selected activities, the
// graphics activity and video engines where hw.gpu.utilization is on, the bandwidths
// where nvidia.gpu.profiling.bandwidth is on, and the PCIe ones where hw.gpu.io is (whole
// GPUs only).
func newGPMRequest(m *metadata.MetricsConfig, activities []string) gpmRequest {
	var req gpmRequest
	selected := map[string]bool{}
	if m.NvidiaGpuProfilingActivity.Enabled {
		for _, a := range activities {
			selected[a] = true
		}
	}
	for _, a := range gpmActivities {
		if selected[a.attr.String()] || m.HwGpuUtilization.Enabled && a.attr == metadata.AttributeNvidiaGpuProfilingMetricGraphicsActive {
			req.gpu = append(req.gpu, a.id)
		}
	}
	req.mig = append(req.mig, req.gpu...)
	if m.HwGpuUtilization.Enabled {
		req.gpu = append(req.gpu, gpmDecoders...)
		req.gpu = append(req.gpu, gpmEncoders...)
	}
	if m.NvidiaGpuProfilingBandwidth.Enabled {
		for _, b := range gpmBandwidth {
			req.gpu = append(req.gpu, b.id)
		}
	} else if m.HwGpuIo.Enabled {
		// hw.gpu.io's fallback where the driver has no PCIe byte counters (before R555).
		req.gpu = append(req.gpu, nvml.GPM_METRIC_PCIE_TX_PER_SEC, nvml.GPM_METRIC_PCIE_RX_PER_SEC)
	}
	return req
}

// nvmlGPM reads GPM through NVML: two samples per target, and the metrics over the
// interval between them.
type nvmlGPM struct {
	lib     nvml.Interface
	req     gpmRequest
	samples map[gpmTarget]*gpmPair
}

// gpmTarget is a whole GPU (migUUID empty) or one MIG device of it: each compute
// instance is sampled on its own MIG handle (nvmlGpmSampleGet takes MIG device handles),
// so that compute instances sharing a GPU instance each get their own interval instead of
// sampling the GPU instance several times microseconds apart.
type gpmTarget struct {
	gpu     nvml.Device
	migUUID string
}

type gpmPair struct {
	prev, cur nvml.GpmSample
	primed    bool
	// req is reused every interval: the request type carries room for every GPM metric
	// (~18 KiB), too much to allocate per GPU per scrape.
	req nvml.GpmMetricsGetType
}

func newNVMLGPM(lib nvml.Interface, req gpmRequest) *nvmlGPM {
	return &nvmlGPM{lib: lib, req: req, samples: map[gpmTarget]*gpmPair{}}
}

// wanted reports whether anything is asked of GPM.
func (g *nvmlGPM) wanted() bool { return len(g.req.gpu) > 0 }

// Supported reports whether the GPU supports GPM.
func (g *nvmlGPM) Supported(dev nvml.Device) bool {
	s, ret := dev.GpmQueryDeviceSupport()
	return ret == nvml.SUCCESS && s.IsSupportedDevice != 0
}

// Read takes a sample of the GPU, or of one of its MIG devices (migUUID, sampled on
// handle), and returns the values over the interval since the previous sample of the same
// target; ok is false on the first sample.
func (g *nvmlGPM) Read(gpu nvml.Device, migUUID string, handle nvml.Device) (gpmValues, bool, nvml.Return) {
	ids := g.req.gpu
	if migUUID != gpmWholeGPU {
		ids = g.req.mig
	}
	if len(ids) == 0 {
		return gpmValues{}, false, nvml.SUCCESS
	}
	key := gpmTarget{gpu: gpu, migUUID: migUUID}
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
	if ret := handle.GpmSampleGet(p.cur); ret != nvml.SUCCESS {
		return gpmValues{}, false, ret
	}
	if !p.primed {
		p.primed = true
		p.prev, p.cur = p.cur, p.prev
		return gpmValues{}, false, nvml.SUCCESS
	}
	req := &p.req
	req.Sample1, req.Sample2, req.NumMetrics = p.prev, p.cur, uint32(len(ids))
	for i, id := range ids {
		req.Metrics[i] = nvml.GpmMetric{MetricId: uint32(id)}
	}
	p.prev, p.cur = p.cur, p.prev
	if ret := g.lib.GpmMetricsGet(req); ret != nvml.SUCCESS {
		return gpmValues{}, false, ret
	}
	return decodeGPM(req), true, nvml.SUCCESS
}

func decodeGPM(req *nvml.GpmMetricsGetType) gpmValues {
	v := gpmValues{activity: map[nvml.GpmMetricId]float64{}, bandwidth: map[nvml.GpmMetricId]float64{}}
	var dec, enc []float64
	for i := 0; i < int(req.NumMetrics); i++ {
		m := req.Metrics[i]
		if nvml.Return(m.NvmlReturn) != nvml.SUCCESS {
			continue
		}
		id := nvml.GpmMetricId(m.MetricId)
		switch {
		case id >= gpmDecoders[0] && id <= gpmDecoders[len(gpmDecoders)-1]:
			dec = append(dec, m.Value/percent)
		case id >= gpmEncoders[0] && id <= gpmEncoders[len(gpmEncoders)-1]:
			enc = append(enc, m.Value/percent)
		case isBandwidth(id):
			v.bandwidth[id] = m.Value * mebibyte
		default:
			v.activity[id] = m.Value / percent
		}
	}
	v.decoder, v.hasDecoder = mean(dec)
	v.encoder, v.hasEncoder = mean(enc)
	return v
}

func isBandwidth(id nvml.GpmMetricId) bool {
	for _, b := range gpmBandwidth {
		if b.id == id {
			return true
		}
	}
	return false
}

func mean(xs []float64) (float64, bool) {
	if len(xs) == 0 {
		return 0, false
	}
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs)), true
}

// ForgetInstance releases the samples kept for one MIG device (it was destroyed).
func (g *nvmlGPM) ForgetInstance(gpu nvml.Device, migUUID string) {
	key := gpmTarget{gpu: gpu, migUUID: migUUID}
	if p := g.samples[key]; p != nil {
		p.prev.Free()
		p.cur.Free()
		delete(g.samples, key)
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

// readGPM samples the whole GPU once per scrape, for its utilization and profiling.
func (r *deviceRead) readGPM() {
	if r.skip(callGpmSampleGet) || !r.dev.static.gpmSupported || !r.gpm.wanted() {
		return
	}
	v, ok, ret := r.gpm.Read(r.dev.handle, gpmWholeGPU, r.dev.handle)
	if ret == nvml.ERROR_NOT_FOUND {
		// A vGPU guest claims GPM support and cannot sample it (dcgm-exporter#701): the GPU
		// is read without GPM (its utilization from the sample buffer) until rediscovered.
		r.dev.static.gpmSupported = false
		r.logger.Info("GPM is claimed but cannot be sampled on this GPU (a vGPU guest?); it is read without GPM",
			zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid))
		return
	}
	if r.ok(callGpmSampleGet, ret) && ok {
		r.gpmValues = &v
	}
}

// recordProfiling reports the GPU's GPM activity and bandwidth.
func (r *deviceRead) recordProfiling() {
	if r.gone || r.gpmValues == nil {
		return
	}
	r.recordActivity(*r.gpmValues)
	if !r.metrics.NvidiaGpuProfilingBandwidth.Enabled {
		return
	}
	for _, b := range gpmBandwidth {
		if bps, ok := r.gpmValues.bandwidth[b.id]; ok {
			r.mb.RecordNvidiaGpuProfilingBandwidthDataPoint(r.now, bps, b.link, b.dir)
		}
	}
}

// recordActivity reports the selected activities of a GPU or MIG instance.
func (r *deviceRead) recordActivity(v gpmValues) {
	if !r.metrics.NvidiaGpuProfilingActivity.Enabled {
		return
	}
	for _, a := range r.activities {
		if x, ok := v.activity[a.id]; ok {
			r.mb.RecordNvidiaGpuProfilingActivityDataPoint(r.now, x, a.attr)
		}
	}
}
