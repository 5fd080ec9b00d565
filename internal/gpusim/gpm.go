package gpusim

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPM (GPU Performance Monitoring, Hopper and newer) as NVML offers it: the caller
// allocates samples, takes one per interval end (of a whole GPU or of one MIG GPU
// instance), and asks for metrics between two samples. A100s do not support it, as on
// real hardware.

// gpmSample is a simulated nvmlGpmSample: which GPU (or GPU instance) it was taken of,
// and when.
type gpmSample struct {
	sim         *Simulator
	dev         *Device
	gpuInstance int // -1 for the whole GPU
	// computeInstance is the compute instance of a sample of one MIG device, -1 for a
	// sample of a whole GPU instance (nvmlGpmMigSampleGet) or GPU.
	computeInstance int
	t               float64
	taken           bool
}

var _ nvml.GpmSample = (*gpmSample)(nil)

// Free releases the sample.
func (g *gpmSample) Free() nvml.Return {
	g.sim.count("GpmSampleFree")
	g.taken = false
	return nvml.SUCCESS
}

// Get takes a sample of a whole GPU, or of one MIG device.
func (g *gpmSample) Get(dev nvml.Device) nvml.Return {
	switch d := dev.(type) {
	case *Device:
		return d.GpmSampleGet(g)
	case *MigDevice:
		return d.GpmSampleGet(g)
	}
	return nvml.ERROR_INVALID_ARGUMENT
}

// MigGet takes a sample of one GPU instance of a MIG-enabled GPU.
func (g *gpmSample) MigGet(dev nvml.Device, gpuInstance int) nvml.Return {
	d, ok := dev.(*Device)
	if !ok {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	return d.GpmMigSampleGet(gpuInstance, g)
}

func (d *Device) gpmSupported() bool { return d.sim.machine.sys.gpm }

// GpmQueryDeviceSupport reports GPM support: Hopper and newer.
func (d *Device) GpmQueryDeviceSupport() (nvml.GpmSupport, nvml.Return) {
	if ret := d.ret("GpmQueryDeviceSupport"); ret != nvml.SUCCESS {
		return nvml.GpmSupport{}, ret
	}
	s := nvml.GpmSupport{Version: nvml.GPM_SUPPORT_VERSION}
	if d.gpmSupported() {
		s.IsSupportedDevice = 1
	}
	return s, nvml.SUCCESS
}

// GpmSampleGet samples the whole GPU.
func (d *Device) GpmSampleGet(sample nvml.GpmSample) nvml.Return {
	return d.takeGpmSample("GpmSampleGet", sample, -1, -1)
}

// GpmMigSampleGet samples one GPU instance; the id must be one of the GPU's.
func (d *Device) GpmMigSampleGet(gpuInstance int, sample nvml.GpmSample) nvml.Return {
	return d.takeGpmSample("GpmMigSampleGet", sample, gpuInstance, -1)
}

func (d *Device) takeGpmSample(call string, sample nvml.GpmSample, gpuInstance, computeInstance int) nvml.Return {
	t, _, ret := d.read(call)
	if ret != nvml.SUCCESS {
		return ret
	}
	g, ok := sample.(*gpmSample)
	if !ok {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if !d.gpmSupported() {
		return nvml.ERROR_NOT_SUPPORTED
	}
	if d.sim.machine.sys.vgpuGuest {
		// GPM support is claimed, sampling fails (dcgm-exporter#701: DCGM's NO_DATA, which
		// DCGM raises for NVML's NOT_FOUND).
		return nvml.ERROR_NOT_FOUND
	}
	if gpuInstance >= 0 && d.migByGpuInstance(gpuInstance) == nil {
		return nvml.ERROR_NOT_FOUND
	}
	g.dev, g.gpuInstance, g.computeInstance, g.t, g.taken = d, gpuInstance, computeInstance, t, true
	return nvml.SUCCESS
}

func (d *Device) migByGpuInstance(id int) *MigDevice {
	for _, m := range d.liveMIGs() {
		if int(m.gi.id) == id {
			return m
		}
	}
	return nil
}

// GpmSampleAlloc allocates a sample.
func (s *Simulator) GpmSampleAlloc() (nvml.GpmSample, nvml.Return) {
	s.count("GpmSampleAlloc")
	return &gpmSample{sim: s}, nvml.SUCCESS
}

// GpmSampleFree releases a sample.
func (s *Simulator) GpmSampleFree(sample nvml.GpmSample) nvml.Return { return sample.Free() }

// GpmSampleGet samples a whole GPU.
func (s *Simulator) GpmSampleGet(dev nvml.Device, sample nvml.GpmSample) nvml.Return {
	return sample.Get(dev)
}

// GpmMigSampleGet samples one GPU instance.
func (s *Simulator) GpmMigSampleGet(dev nvml.Device, gpuInstance int, sample nvml.GpmSample) nvml.Return {
	return sample.MigGet(dev, gpuInstance)
}

// GpmQueryDeviceSupport reports GPM support of a GPU.
func (s *Simulator) GpmQueryDeviceSupport(dev nvml.Device) (nvml.GpmSupport, nvml.Return) {
	return dev.GpmQueryDeviceSupport()
}

// gpmActivities are the activity metrics, in reading.gpm order.
var gpmActivities = []nvml.GpmMetricId{
	nvml.GPM_METRIC_GRAPHICS_UTIL, nvml.GPM_METRIC_SM_UTIL, nvml.GPM_METRIC_SM_OCCUPANCY, nvml.GPM_METRIC_ANY_TENSOR_UTIL,
	nvml.GPM_METRIC_DRAM_BW_UTIL, nvml.GPM_METRIC_FP64_UTIL, nvml.GPM_METRIC_FP32_UTIL, nvml.GPM_METRIC_FP16_UTIL,
}

// GpmMetricsGet computes the requested metrics over the interval between two samples of
// the same target: the mean of the scenario's readings at each whole second of the
// interval (the reading at its end when it is shorter than a second). Utilizations are
// percentages, bandwidths MiB/s, as NVML reports them; a metric the target lacks (NVENC
// on these GPUs, NVDEC engines beyond the GPU's, bandwidth of a MIG instance) comes back
// with its own ERROR_NOT_SUPPORTED.
func (s *Simulator) GpmMetricsGet(req *nvml.GpmMetricsGetType) nvml.Return {
	s.count("GpmMetricsGet")
	a, okA := req.Sample1.(*gpmSample)
	b, okB := req.Sample2.(*gpmSample)
	if !okA || !okB || !a.taken || !b.taken || a.dev != b.dev || a.gpuInstance != b.gpuInstance || a.computeInstance != b.computeInstance || int(req.NumMetrics) > len(req.Metrics) {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	d := b.dev
	if d.lost.Load() {
		return nvml.ERROR_GPU_IS_LOST
	}
	if s.scenario(s.machine, d.index, b.t).lost {
		return nvml.ERROR_GPU_IS_LOST
	}
	r := s.meanReading(d.index, a.t, b.t)
	// Each MIG instance is busy in proportion to its slot, and each compute instance of
	// it differently again, so that instances differ.
	scale := 1.0
	if b.gpuInstance >= 0 {
		scale = 0.5 + 0.1*float64(b.gpuInstance%5)
	}
	if b.computeInstance >= 0 {
		scale *= 1 - 0.2*float64(b.computeInstance%3)
	}
	busy := r.utilization / 100
	links := float64(s.machine.sys.nvlinks)
	for i := 0; i < int(req.NumMetrics); i++ {
		m := &req.Metrics[i]
		m.NvmlReturn, m.Value = uint32(nvml.SUCCESS), 0
		id := nvml.GpmMetricId(m.MetricId)
		switch {
		case gpmActivityIndex(id) >= 0:
			m.Value = r.gpm[gpmActivityIndex(id)] * scale * 100
		case id >= nvml.GPM_METRIC_NVDEC_0_UTIL && id <= nvml.GPM_METRIC_NVDEC_7_UTIL && int(id-nvml.GPM_METRIC_NVDEC_0_UTIL) < s.machine.sys.nvdecs:
			m.Value = r.decoderUtil * scale
		case b.gpuInstance < 0 && id == nvml.GPM_METRIC_PCIE_TX_PER_SEC:
			m.Value = (d.pcieBytesBetween(true, a.t, b.t)) / mib
		case b.gpuInstance < 0 && id == nvml.GPM_METRIC_PCIE_RX_PER_SEC:
			m.Value = (d.pcieBytesBetween(false, a.t, b.t)) / mib
		case b.gpuInstance < 0 && (id == nvml.GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC || id == nvml.GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC):
			m.Value = links * (0.05 + busy*9.5) * 1e9 / mib
		default:
			m.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		}
	}
	return nvml.SUCCESS
}

func gpmActivityIndex(id nvml.GpmMetricId) int {
	for i, a := range gpmActivities {
		if a == id {
			return i
		}
	}
	return -1
}

// meanReading averages what GPM measures (activity, decoder and GPU utilization) over the
// whole seconds in (from, to].
// pcieBytesBetween is the PCIe traffic rate each way between two instants, in bytes/s.
func (d *Device) pcieBytesBetween(transmit bool, from, to float64) float64 {
	if to <= from {
		return d.pcieRate(transmit, to)
	}
	return float64(d.pcieBytes(transmit, to)-d.pcieBytes(transmit, from)) / (to - from)
}

func (s *Simulator) meanReading(gpu int, from, to float64) reading {
	var sum reading
	n := 0
	for k := math.Floor(from) + 1; k <= to; k++ {
		r := s.scenario(s.machine, gpu, k)
		for i := range sum.gpm {
			sum.gpm[i] += r.gpm[i]
		}
		sum.decoderUtil += r.decoderUtil
		sum.utilization += r.utilization
		n++
	}
	if n == 0 {
		return s.scenario(s.machine, gpu, to)
	}
	for i := range sum.gpm {
		sum.gpm[i] /= float64(n)
	}
	sum.decoderUtil /= float64(n)
	sum.utilization /= float64(n)
	return sum
}
