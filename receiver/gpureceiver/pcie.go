package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import "github.com/NVIDIA/go-nvml/pkg/nvml"

const callGetPcieReplayCounter = "nvmlDeviceGetPcieReplayCounter"

// recordPCIe reports the PCIe replay counter: link-level retransmissions, an early sign of
// a bad riser, slot or cable.
func (r *deviceRead) recordPCIe() {
	if !r.metrics().NvidiaGpuPcieReplays.Enabled {
		return
	}
	if v, ok := r.fields.get(nvml.FI_DEV_PCIE_REPLAY_COUNTER); ok {
		r.mb.RecordNvidiaGpuPcieReplaysDataPoint(r.now, int64(v))
		return
	}
	if r.skip(callGetPcieReplayCounter) {
		return
	}
	v, ret := r.dev.handle.GetPcieReplayCounter()
	if r.ok(callGetPcieReplayCounter, ret) {
		r.mb.RecordNvidiaGpuPcieReplaysDataPoint(r.now, int64(v))
	}
}
