package gpuenrichprocessor

import (
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	err := configtest.Load(t, filepath.Join("testdata", "config.yaml"), component.NewIDWithName(metadata.Type, name).String(), cfg)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

func TestConfigDefaultsAndFullySet(t *testing.T) {
	def, err := loadConfig(t, "defaults")
	require.NoError(t, err)
	assert.Equal(t, "unix:///var/lib/kubelet/pod-resources/kubelet.sock", def.Kubelet.Endpoint)
	assert.Equal(t, []string{"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"}, def.Kubelet.ResourceNames)
	assert.Equal(t, 0.05, def.Idle.Threshold)
	assert.Equal(t, 10*time.Minute, def.Idle.Window)
	assert.Equal(t, 10*time.Second, def.SteadySeriesInterval)

	c, err := loadConfig(t, "custom")
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, c.Kubelet.RefreshInterval)
	assert.Equal(t, "/host/proc", c.Processes.ProcRoot)
	assert.Equal(t, time.Hour, c.Leak.Window)
	assert.False(t, c.Metrics.NvidiaGpuPodEnergy.Enabled)
	assert.Zero(t, c.SteadySeriesInterval, "0s: every collection")

	_, err = loadConfig(t, "kubelet_off")
	require.NoError(t, err, "switched-off parts are not validated")
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for name, field := range map[string]string{
		"relative_socket":          "kubelet.endpoint",
		"tcp_socket":               "kubelet.endpoint",
		"zero_refresh":             "kubelet.refresh_interval",
		"negative_timeout":         "kubelet.timeout",
		"no_resource_names":        "kubelet.resource_names",
		"bad_wildcard":             "kubelet.resource_names[0]",
		"relative_proc":            "processes.proc_root",
		"relative_logs":            "processes.pod_logs_dir",
		"idle_threshold_zero":      "idle.threshold",
		"idle_threshold_percent":   "idle.threshold",
		"idle_window_zero":         "idle.window",
		"leak_window_negative":     "leak.window",
		"leak_growth_over_one":     "leak.min_growth",
		"leak_tolerance_negative":  "leak.utilization_tolerance",
		"saturation_zero":          "bottleneck.saturation",
		"steady_interval_over_max": "steady_series_interval",
		"steady_interval_negative": "steady_series_interval",
		"unknown_key":              "treshold",
		"unknown_metric":           "nvidia.gpu.nope",
		"negative_max_per_gpu":     "processes.max_per_gpu",
		"zero_name_length":         "processes.max_executable_name_length",
		"bad_auth_type":            "kube_api.auth_type",
		"bad_dra_driver":           "kubelet.dra_drivers[0]",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.Error(t, err)
			assert.Contains(t, err.Error(), field)
		})
	}
}

// The README's configuration example shows every value at its default: loaded over the
// defaults it changes nothing (but the node name, which the example takes from the
// environment).
func TestREADMEExampleIsTheDefault(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(readme), "```yaml\nprocessors:\n")
	require.True(t, ok, "the README has its configuration example")
	example, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	path := filepath.Join(t.TempDir(), "readme.yaml")
	require.NoError(t, os.WriteFile(path, []byte("processors:\n"+example), 0o600))

	cfg := createDefaultConfig().(*Config)
	require.NoError(t, configtest.Load(t, path, "processors::gpu_enrich", cfg))
	assert.Equal(t, "${env:K8S_NODE_NAME}", cfg.KubeAPI.NodeName)
	cfg.KubeAPI.NodeName = ""
	// Compared by exported fields: the example sets two metrics-builder entries, which
	// only marks them as set by the user.
	exported := cmp.FilterPath(func(p cmp.Path) bool {
		f, ok := p.Last().(cmp.StructField)
		return ok && !token.IsExported(f.Name())
	}, cmp.Ignore())
	assert.Empty(t, cmp.Diff(createDefaultConfig(), component.Config(cfg), exported))
}
