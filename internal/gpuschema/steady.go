package gpuschema // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"

import "time"

// SteadyResendMax is the longest a steady series (IsSteady) may go without a point while
// its GPU is reported (its resource is in the batch): the gpu receiver re-sends an unchanged
// steady point at least this often (its steady_series_interval, at most this), and
// gpu_enrich ends a steady series only once it has gone this long without one. Ten seconds
// is the shipped collection interval, so a steady series is never sampled more coarsely
// than the default set is.
const SteadyResendMax = 10 * time.Second

// IsSteady reports whether the receiver's metric changes rarely enough that, at short
// collection intervals, an unchanged point is held back until its value changes or
// SteadyResendMax passes: error counters, limits and link state. The framebuffer's size
// (hw.gpu.memory.limit) and the clock-event reasons (nvidia.gpu.clock_event.active, a
// quarter of a GPU's points at 1 s, sent as one group) are too: gpu_enrich keeps each
// GPU's last ones for its ratios and throttle flags. So is hw.status (one group of three
// states), but only in a collection that carries the GPU's memory usage, which then keeps
// the GPU's resource in the batch: a GPU that does not answer sends it every collection.
// Left out: every other metric gpu_enrich reads from each batch (memory usage,
// utilization, energy, profiling).
func IsSteady(metric string) bool {
	switch metric {
	case MetricHwErrors, MetricHwTemperatureLimit, MetricHwGpuMemoryLimit, MetricHwStatus,
		MetricNvidiaGpuMemoryRemapFailed, MetricNvidiaGpuMemoryRemapPending, MetricNvidiaGpuMemoryRemappedRows,
		MetricNvidiaGpuMemoryRetiredPages, MetricNvidiaGpuMemoryRetiredPagesPending,
		MetricNvidiaGpuPowerLimit, MetricNvidiaGpuPowerLimitBoard,
		MetricNvidiaGpuClockFrequencyMax, MetricNvidiaGpuClockEventActive,
		MetricNvidiaGpuPcieReplays, MetricNvidiaGpuPcieLinkGeneration, MetricNvidiaGpuPcieLinkGenerationMax,
		MetricNvidiaGpuPcieLinkWidth, MetricNvidiaGpuPcieLinkWidthMax,
		MetricNvidiaGpuNvlinkErrors, MetricNvidiaGpuNvlinkState,
		MetricNvidiaGpuXidErrors, MetricNvidiaGpuXidLast:
		return true
	}
	return false
}
