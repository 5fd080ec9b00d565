package contract

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
)

func TestNamesAsTheyLandInPrometheus(t *testing.T) {
	names, err := PrometheusNames(filepath.Join("..", ".."))
	require.NoError(t, err)
	// Names seen in a real Prometheus fed by the collector (the testbed asserts on them).
	for prom, otel := range map[string]string{
		"hw_gpu_utilization_ratio":                        "hw.gpu.utilization",
		"hw_gpu_memory_usage_bytes":                       "hw.gpu.memory.usage",
		"hw_energy_joules_total":                          "hw.energy",
		"hw_status":                                       "hw.status",
		"nvidia_gpu_xid_errors_total":                     "nvidia.gpu.xid.errors",
		"nvidia_gpu_clock_event_duration_seconds_total":   "nvidia.gpu.clock_event.duration",
		"nvidia_gpu_pod_energy_joules_total":              "nvidia.gpu.pod.energy",
		"nvidia_gpu_profiling_bandwidth_bytes_per_second": "nvidia.gpu.profiling.bandwidth",
		"nvidia_nvml_available":                           "nvidia.nvml.available",
	} {
		assert.Equal(t, otel, names[prom], prom)
	}
}

func TestDefaultSet(t *testing.T) {
	def, err := DefaultSet(filepath.Join("..", ".."))
	require.NoError(t, err)
	lacks := func(query string) string {
		sels, err := promql.Selectors(query)
		require.NoError(t, err)
		require.Len(t, sels, 1)
		return def.Lacks(sels[0])
	}
	// Off by default: the full overlay turns them on.
	for _, q := range []string{
		`nvidia_gpu_performance_state`,
		`hw_temperature_limit_celsius{hw_sensor_location="gpu"}`,
		`nvidia_gpu_clock_event_active`,
		`nvidia_gpu_profiling_activity_ratio{nvidia_gpu_profiling_metric="graphics_active"}`,
		`nvidia_gpu_profiling_activity_ratio{nvidia_gpu_profiling_metric=~"fp64_active|fp32_active"}`,
	} {
		assert.NotEmpty(t, lacks(q), q)
	}
	// On by default.
	for _, q := range []string{
		`hw_gpu_utilization_ratio`,
		`nvidia_gpu_nvlink_state`,
		`nvidia_gpu_throttled`,
		`nvidia_gpu_processes_folded_total`,
		`nvidia_gpu_profiling_activity_ratio`,
		`nvidia_gpu_profiling_activity_ratio{nvidia_gpu_profiling_metric="sm_active"}`,
		`nvidia_gpu_profiling_activity_ratio{nvidia_gpu_profiling_metric=~"sm_occupancy|tensor_active"}`,
	} {
		assert.Empty(t, lacks(q), q)
	}
}
