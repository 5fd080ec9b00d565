package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetClockInfoSM  = "nvmlDeviceGetClockInfo(sm)"
	callGetClockInfoMem = "nvmlDeviceGetClockInfo(memory)"
	megahertz           = 1_000_000
)

// recordClocks reports the current SM and memory clocks (NVML: MHz) in Hz.
func (r *deviceRead) recordClocks() {
	if !r.metrics().NvidiaGpuClockFrequency.Enabled {
		return
	}
	r.recordClock(callGetClockInfoSM, nvml.CLOCK_SM, metadata.AttributeNvidiaGpuClockTypeSm)
	r.recordClock(callGetClockInfoMem, nvml.CLOCK_MEM, metadata.AttributeNvidiaGpuClockTypeMemory)
}

func (r *deviceRead) recordClock(call string, clock nvml.ClockType, attr metadata.AttributeNvidiaGpuClockType) {
	if r.skip(call) {
		return
	}
	mhz, ret := r.dev.handle.GetClockInfo(clock)
	if r.ok(call, ret) {
		r.mb.RecordNvidiaGpuClockFrequencyDataPoint(r.now, int64(mhz)*megahertz, attr)
	}
}
