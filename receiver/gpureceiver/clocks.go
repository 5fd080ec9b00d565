package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetClockInfoSM           = "nvmlDeviceGetClockInfo(sm)"
	callGetClockInfoMem          = "nvmlDeviceGetClockInfo(memory)"
	callGetClocksEventReasons    = "nvmlDeviceGetCurrentClocksEventReasons"
	callGetClocksThrottleReasons = "nvmlDeviceGetCurrentClocksThrottleReasons"
	megahertz                    = 1_000_000
	nanosecondsPerSecond         = 1e9
)

// recordClocks reports the current SM and memory clocks (NVML: MHz) in Hz, and their
// maxima read at discovery.
func (r *deviceRead) recordClocks() {
	if r.metrics.NvidiaGpuClockFrequency.Enabled {
		r.recordClock(callGetClockInfoSM, nvml.CLOCK_SM, metadata.AttributeNvidiaGpuClockTypeSm)
		r.recordClock(callGetClockInfoMem, nvml.CLOCK_MEM, metadata.AttributeNvidiaGpuClockTypeMemory)
	}
	if r.metrics.NvidiaGpuClockFrequencyMax.Enabled && !r.gone {
		st := r.dev.static
		if st.maxSMClockMHz > 0 && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuClockFrequencyMax, attrs: metadata.AttributeNvidiaGpuClockTypeSm.String()}, float64(st.maxSMClockMHz)) {
			r.mb.RecordNvidiaGpuClockFrequencyMaxDataPoint(r.now, int64(st.maxSMClockMHz)*megahertz, metadata.AttributeNvidiaGpuClockTypeSm)
		}
		if st.maxMemClockMHz > 0 && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuClockFrequencyMax, attrs: metadata.AttributeNvidiaGpuClockTypeMemory.String()}, float64(st.maxMemClockMHz)) {
			r.mb.RecordNvidiaGpuClockFrequencyMaxDataPoint(r.now, int64(st.maxMemClockMHz)*megahertz, metadata.AttributeNvidiaGpuClockTypeMemory)
		}
	}
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

// clockEventBits maps NVML's clock-event reason bits to the attribute. The hardware bits
// only exist under their older "throttle" names.
var clockEventBits = []struct {
	bit    uint64
	reason metadata.AttributeNvidiaGpuClockEventReason
}{
	{nvml.ClocksEventReasonGpuIdle, metadata.AttributeNvidiaGpuClockEventReasonGpuIdle},
	{nvml.ClocksEventReasonApplicationsClocksSetting, metadata.AttributeNvidiaGpuClockEventReasonApplicationsClocksSetting},
	{nvml.ClocksEventReasonSwPowerCap, metadata.AttributeNvidiaGpuClockEventReasonSwPowerCap},
	{nvml.ClocksThrottleReasonHwSlowdown, metadata.AttributeNvidiaGpuClockEventReasonHwSlowdown},
	{nvml.ClocksEventReasonSyncBoost, metadata.AttributeNvidiaGpuClockEventReasonSyncBoost},
	{nvml.ClocksEventReasonSwThermalSlowdown, metadata.AttributeNvidiaGpuClockEventReasonSwThermalSlowdown},
	{nvml.ClocksThrottleReasonHwThermalSlowdown, metadata.AttributeNvidiaGpuClockEventReasonHwThermalSlowdown},
	{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, metadata.AttributeNvidiaGpuClockEventReasonHwPowerBrake},
}

// clockEventMaskBits are the bits of clockEventBits: a change of any other bit (one this
// receiver does not report) is no change to its series.
var clockEventMaskBits = func() uint64 {
	var bits uint64
	for _, b := range clockEventBits {
		bits |= b.bit
	}
	return bits
}()

// clockEventDurations maps the performance-policy counters (ns) to their cause.
var clockEventDurations = []struct {
	field uint32
	cause metadata.AttributeNvidiaGpuClockEventCause
}{
	{nvml.FI_DEV_PERF_POLICY_POWER, metadata.AttributeNvidiaGpuClockEventCausePower},
	{nvml.FI_DEV_PERF_POLICY_THERMAL, metadata.AttributeNvidiaGpuClockEventCauseThermal},
	{nvml.FI_DEV_PERF_POLICY_SYNC_BOOST, metadata.AttributeNvidiaGpuClockEventCauseSyncBoost},
	{nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT, metadata.AttributeNvidiaGpuClockEventCauseBoardLimit},
	{nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION, metadata.AttributeNvidiaGpuClockEventCauseLowUtilization},
	{nvml.FI_DEV_PERF_POLICY_RELIABILITY, metadata.AttributeNvidiaGpuClockEventCauseReliability},
}

// recordClockEvents reports why the clocks are held down: one 0/1 series per reason
// (nvmlDeviceGetCurrentClocksEventReasons, R535+, or its older "throttle" name), and the
// cumulative time per cause from the field batch.
func (r *deviceRead) recordClockEvents() {
	m := r.metrics
	if m.NvidiaGpuClockEventActive.Enabled {
		// The eight reasons are one steady group: all sent when any changed or when they
		// are due again, else none (gpu_enrich keeps the last ones for its throttle flags).
		if mask, ok := r.clockEventMask(); ok && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuClockEventActive}, float64(mask&clockEventMaskBits)) {
			for _, b := range clockEventBits {
				active := int64(0)
				if mask&b.bit != 0 {
					active = 1
				}
				r.mb.RecordNvidiaGpuClockEventActiveDataPoint(r.now, active, b.reason)
			}
		}
	}
	if m.NvidiaGpuClockEventDuration.Enabled && !r.gone {
		for _, d := range clockEventDurations {
			if ns, ok := r.fields.get(d.field); ok {
				r.mb.RecordNvidiaGpuClockEventDurationDataPoint(r.now, ns/nanosecondsPerSecond, d.cause)
			}
		}
	}
}

func (r *deviceRead) clockEventMask() (uint64, bool) {
	if r.symbols.HasSymbol(callGetClocksEventReasons) && !r.skip(callGetClocksEventReasons) {
		mask, ret := r.dev.handle.GetCurrentClocksEventReasons()
		return mask, r.ok(callGetClocksEventReasons, ret)
	}
	if r.skip(callGetClocksThrottleReasons) {
		return 0, false
	}
	mask, ret := r.dev.handle.GetCurrentClocksThrottleReasons()
	return mask, r.ok(callGetClocksThrottleReasons, ret)
}
