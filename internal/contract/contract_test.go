package contract

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
