package gpureceiver

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// loadConfig unmarshals and validates one named configuration the way the collector does.
func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	err := configtest.Load(t, filepath.Join("testdata", "config.yaml"), component.NewIDWithName(metadata.Type, name).String(), cfg)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

func TestConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(t, "defaults")
	require.NoError(t, err)
	assert.Equal(t, BackendNVML, cfg.Backend)
	assert.Equal(t, 10*time.Second, cfg.CollectionInterval)
	assert.Equal(t, 10*time.Second, cfg.SteadySeriesInterval, "steady series at least every 10 s, the shipped interval")
	assert.Equal(t, 5*time.Second, cfg.NVML.InitRetry.InitialInterval)
	assert.Equal(t, 5*time.Minute, cfg.NVML.InitRetry.MaxInterval)
	assert.True(t, cfg.Metrics.HwGpuUtilization.Enabled)
	assert.Equal(t, []string{"sm_active", "tensor_active", "dram_active"}, cfg.Profiling.Activities)
}

func TestConfigFullySet(t *testing.T) {
	cfg, err := loadConfig(t, "simulated")
	require.NoError(t, err)
	assert.Equal(t, SimulatedConfig{System: "dgxb200", Scenario: "memory-leak", Seed: 42, DriverVersion: "570.172.08", PIDNamespace: "container", MIGMonitor: false}, cfg.Simulated)
	assert.Equal(t, time.Second, cfg.CollectionInterval)
	assert.Equal(t, []string{"0", "3", "GPU-4f1c1a9e-0000-4000-8000-000000000000"}, cfg.IncludeDevices)
	assert.Equal(t, "node-a", cfg.HostName)
	assert.False(t, cfg.Metrics.NvidiaGpuPcieReplays.Enabled)
	assert.Equal(t, []metadata.NvidiaGpuNvlinkIoMetricAttributeKey{"nvidia.gpu.nvlink.link", "network.io.direction"}, cfg.Metrics.NvidiaGpuNvlinkIo.EnabledAttributes)
	assert.Equal(t, []string{"sm_active", "fp64_active"}, cfg.Profiling.Activities)
	assert.Equal(t, []string{"sm", "decoder"}, cfg.Processes.Engines)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for name, field := range map[string]string{
		"bad_backend":             "backend:",
		"zero_interval":           "collection_interval",
		"negative_timeout":        "timeout",
		"timeout_over_interval":   "timeout:",
		"relative_library":        "nvml.library_path",
		"zero_retry":              "nvml.init_retry.initial_interval",
		"retry_max_below_initial": "nvml.init_retry.max_interval",
		"bad_system":              "simulated.system",
		"bad_scenario":            "simulated.scenario",
		"bad_driver_version":      "simulated.driver_version",
		"bad_pid_namespace":       "simulated.pid_namespace",
		"bad_device":              "include_devices[0]",
		"negative_index":          "include_devices[0]",
		"duplicate_device":        "include_devices[1]",
		"misspelt_key":            "colection_interval",
		"unknown_metric":          "hw.gpu.nope",
		"not_a_duration":          "collection_interval",
		"bad_activity":            "profiling.activities[1]",
		"duplicate_activity":      "profiling.activities[2]",
		"bad_engine":              "processes.engines[1]",
		"duplicate_engine":        "processes.engines[2]",
		"no_engines":              "processes.engines",
		"unknown_attribute":       "nvidia.gpu.nvlink.lane",
		"steady_over_max":         "steady_series_interval",
		"negative_steady":         "steady_series_interval",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.Error(t, err)
			assert.Contains(t, err.Error(), field)
		})
	}
}
