package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
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
		if v, ok := r.fields.get(nvml.FI_DEV_PCIE_COUNT_TX_BYTES); ok {
			r.mb.RecordHwGpuIoDataPoint(r.now, int64(v), metadata.AttributeNetworkIoDirectionTransmit)
		}
		if v, ok := r.fields.get(nvml.FI_DEV_PCIE_COUNT_RX_BYTES); ok {
			r.mb.RecordHwGpuIoDataPoint(r.now, int64(v), metadata.AttributeNetworkIoDirectionReceive)
		}
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
