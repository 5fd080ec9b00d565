package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetPcieThroughput         = "nvmlDeviceGetPcieThroughput"
	callGetPcieReplayCounter      = "nvmlDeviceGetPcieReplayCounter"
	callGetCurrPcieLinkGeneration = "nvmlDeviceGetCurrPcieLinkGeneration"
	callGetCurrPcieLinkWidth      = "nvmlDeviceGetCurrPcieLinkWidth"
)

// recordPCIe reports the PCIe replay counter (link-level retransmissions: an early sign of
// a bad riser, slot or cable), the byte counters, and the link's generation and width next
// to their maxima (a link trained below its maximum is a degraded link).
func (r *deviceRead) recordPCIe() {
	m := r.metrics
	if m.NvidiaGpuPcieReplays.Enabled {
		replays := steadyKey{metric: gpuschema.MetricNvidiaGpuPcieReplays}
		if v, ok := r.fields.get(nvml.FI_DEV_PCIE_REPLAY_COUNTER); ok {
			if r.sendSteady(replays, v) {
				r.mb.RecordNvidiaGpuPcieReplaysDataPoint(r.now, int64(v))
			}
		} else if !r.skip(callGetPcieReplayCounter) {
			v, ret := r.dev.handle.GetPcieReplayCounter()
			if r.ok(callGetPcieReplayCounter, ret) && r.sendSteady(replays, float64(v)) {
				r.mb.RecordNvidiaGpuPcieReplaysDataPoint(r.now, int64(v))
			}
		}
	}
	if m.HwGpuIo.Enabled && !r.gone {
		r.recordPCIeBytes()
	}
	if m.NvidiaGpuPcieLinkGeneration.Enabled && !r.skip(callGetCurrPcieLinkGeneration) {
		gen, ret := r.dev.handle.GetCurrPcieLinkGeneration()
		if r.ok(callGetCurrPcieLinkGeneration, ret) && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuPcieLinkGeneration}, float64(gen)) {
			r.mb.RecordNvidiaGpuPcieLinkGenerationDataPoint(r.now, int64(gen))
		}
	}
	if m.NvidiaGpuPcieLinkWidth.Enabled && !r.skip(callGetCurrPcieLinkWidth) {
		w, ret := r.dev.handle.GetCurrPcieLinkWidth()
		if r.ok(callGetCurrPcieLinkWidth, ret) && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuPcieLinkWidth}, float64(w)) {
			r.mb.RecordNvidiaGpuPcieLinkWidthDataPoint(r.now, int64(w))
		}
	}
	if r.gone {
		return
	}
	if st := r.dev.static; st.pcieMaxGen > 0 && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuPcieLinkGenerationMax}, float64(st.pcieMaxGen)) {
		r.mb.RecordNvidiaGpuPcieLinkGenerationMaxDataPoint(r.now, int64(st.pcieMaxGen))
	}
	if st := r.dev.static; st.pcieMaxWidth > 0 && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuPcieLinkWidthMax}, float64(st.pcieMaxWidth)) {
		r.mb.RecordNvidiaGpuPcieLinkWidthMaxDataPoint(r.now, int64(st.pcieMaxWidth))
	}
}

// pcieDirections are hw.gpu.io's directions with their NVML sources: the byte counter
// field (R555 and later), the GPM rate (Hopper and later), the 20 ms throughput sample.
var pcieDirections = [2]struct {
	field   uint32
	gpm     nvml.GpmMetricId
	counter nvml.PcieUtilCounter
	dir     metadata.AttributeNetworkIoDirection
}{
	{nvml.FI_DEV_PCIE_COUNT_TX_BYTES, nvml.GPM_METRIC_PCIE_TX_PER_SEC, nvml.PCIE_UTIL_TX_BYTES, metadata.AttributeNetworkIoDirectionTransmit},
	{nvml.FI_DEV_PCIE_COUNT_RX_BYTES, nvml.GPM_METRIC_PCIE_RX_PER_SEC, nvml.PCIE_UTIL_RX_BYTES, metadata.AttributeNetworkIoDirectionReceive},
}

// pcieBytes is one direction's hw.gpu.io: bytes since the receiver started counting.
type pcieBytes struct {
	total   float64
	last    uint64 // the driver counter's last reading
	lastAt  time.Time
	started bool
	// fromRate is whether the last count came from a rate rather than the counter: a
	// switch between the two (a collection whose field read failed) starts the new
	// source afresh instead of counting the same bytes twice.
	fromRate bool
}

// add counts a reading of the driver's byte counter. nvml.h: "Value can be wrapped", and
// it gives no width: a reading below the last one is a wrap (or a reset), and what was
// counted since is the reading itself, never a negative step.
func (c *pcieBytes) add(reading uint64) {
	switch {
	case !c.started:
		c.total = float64(reading)
	case c.fromRate:
	case reading >= c.last:
		c.total += float64(reading - c.last)
	default:
		c.total += float64(reading)
	}
	c.last, c.started, c.fromRate = reading, true, false
}

// addRate counts a rate (bytes/s) held over the time since the last count.
func (c *pcieBytes) addRate(bytesPerSecond float64, now time.Time) {
	if c.started && c.fromRate && now.After(c.lastAt) {
		c.total += bytesPerSecond * now.Sub(c.lastAt).Seconds()
	}
	c.lastAt, c.started, c.fromRate = now, true, true
}

// recordPCIeBytes reports hw.gpu.io. Drivers before R555 (R535, R550: the most deployed)
// have no PCIe byte counters; then the bytes are GPM's PCIe rates over the interval
// (Hopper and later, exact over the interval), or nvmlDeviceGetPcieThroughput's rate,
// sampled by the driver over 20 ms and held over the interval: an estimate.
func (r *deviceRead) recordPCIeBytes() {
	now := r.clock()
	for i, d := range pcieDirections {
		c := &r.dev.pcieIO[i]
		if v, ok := r.fields.get(d.field); ok {
			c.add(uint64(v))
		} else if v := r.gpmValues; v != nil {
			rate, ok := v.bandwidth[d.gpm]
			if !ok {
				continue
			}
			c.addRate(rate, now)
		} else if !r.skip(callGetPcieThroughput) {
			kbs, ret := r.dev.handle.GetPcieThroughput(d.counter)
			if !r.ok(callGetPcieThroughput, ret) {
				continue
			}
			c.addRate(float64(kbs)*1000, now)
		} else {
			continue
		}
		r.mb.RecordHwGpuIoDataPoint(r.now, int64(c.total), d.dir)
	}
}
