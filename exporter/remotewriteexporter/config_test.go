package remotewriteexporter

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

func loadConfig(t *testing.T, name string) *Config {
	t.Helper()
	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	sub, err := cm.Sub(name)
	require.NoError(t, err)
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, sub.Unmarshal(cfg))
	return cfg
}

func TestTheAgentsConfigurationLoads(t *testing.T) {
	cfg := loadConfig(t, "remote_write/agent")
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "http://prometheus:9090/api/v1/write", cfg.ClientConfig.Endpoint)
	assert.Equal(t, 10*time.Second, cfg.ClientConfig.Timeout)
	assert.Equal(t, []string{"host.name", "hw.*", "nvidia.*", "k8s.*"}, cfg.ResourceConstantLabels.Included)
	assert.False(t, cfg.TargetInfo.Enabled)
	assert.True(t, cfg.AddMetricSuffixes, "default")
	assert.Equal(t, map[string]string{"cluster": "gpu-east"}, cfg.ExternalLabels)
	assert.Equal(t, 500, cfg.MaxSeriesPerRequest)
	assert.Equal(t, 1, cfg.QueueConfig.Get().NumConsumers, "default")
	assert.Equal(t, 30*time.Millisecond, cfg.RetryConfig.InitialInterval, "default: Prometheus's min_backoff")
	assert.Equal(t, 5*time.Second, cfg.RetryConfig.MaxInterval, "default: Prometheus's max_backoff")
}

func TestAConfigurationThatWouldLoseOrReorderDataIsRefused(t *testing.T) {
	for name, want := range map[string]string{
		"remote_write/no-endpoint":          "http::endpoint must be set",
		"remote_write/relative-endpoint":    "is not an absolute http(s) URL",
		"remote_write/gzip":                 "always snappy-compressed",
		"remote_write/parallel":             "num_consumers is 4: it must be 1",
		"remote_write/zero-per-request":     "max_series_per_request must be at least 1",
		"remote_write/empty-external-label": "neither the name nor the value may be empty",
	} {
		assert.ErrorContains(t, confmap.Validate(loadConfig(t, name)), want, name)
	}
}

func TestGlobPatternsMatchWholeAttributeNames(t *testing.T) {
	re, err := globRegexp("hw.*")
	require.NoError(t, err)
	assert.True(t, re.MatchString("hw.id"))
	assert.True(t, re.MatchString("hw.gpu.memory"))
	assert.False(t, re.MatchString("hwXid"), "a dot is a dot")
	assert.False(t, re.MatchString("x.hw.id"), "anchored")
	re, _ = globRegexp("k8s.pod.label.*")
	assert.True(t, re.MatchString("k8s.pod.label.app.kubernetes.io/name"), "a star crosses slashes")
}
