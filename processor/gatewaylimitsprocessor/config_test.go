package gatewaylimitsprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/configtest"
)

func loadConfig(t *testing.T, name string) (*Config, error) {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	err := configtest.Load(t, filepath.Join("testdata", "config.yaml"), component.NewIDWithName(component.MustNewType(typeStr), name).String(), cfg)
	return cfg, err
}

func TestConfigDefaultsAndFullySet(t *testing.T) {
	require.NoError(t, componenttest.CheckConfigStruct(createDefaultConfig()))
	def, err := loadConfig(t, "")
	require.NoError(t, err)
	assert.Equal(t, &Config{
		ClientIdentity: "claims.kubernetes.io/node/name", MaxClients: 10000, AllowedMetricNames: "contract",
		MaxNewSeriesPerMinute: 32000, MaxSeriesPerClient: 32000, SeriesIdleTimeout: 10 * time.Minute,
		MaxPointsPerSecond: 32000, MaxHistogramBuckets: 160, MaxMetricNameLength: 128, MaxAttributeKeyLength: 64,
		LogInterval: time.Minute,
	}, def)
	assert.Equal(t, 32000, def.burst(), "one second's worth")

	c, err := loadConfig(t, "custom")
	require.NoError(t, err)
	assert.Equal(t, &Config{
		ClientIdentity: "subject", MaxClients: 500, AllowedMetricNames: "any",
		MaxNewSeriesPerMinute: 5000, MaxSeriesPerClient: 20000, SeriesIdleTimeout: 30 * time.Minute,
		MaxPointsPerSecond: 4000, PointsBurst: 40000, MaxHistogramBuckets: 32, MaxMetricNameLength: 100,
		MaxAttributeKeyLength: 48, LogInterval: 5 * time.Minute,
	}, c)
	assert.Equal(t, 40000, c.burst())

	a, err := loadConfig(t, "by_address")
	require.NoError(t, err)
	assert.Empty(t, a.ClientIdentity)
}

func TestConfigErrorsNameTheField(t *testing.T) {
	for name, want := range map[string][]string{
		"zeros": {
			"max_clients: must be positive, got 0",
			"max_new_series_per_minute: must be positive, got 0",
			"max_series_per_client: must be positive, got 0",
			"max_points_per_second: must be positive, got 0",
			"max_histogram_buckets: must be positive, got 0",
			"max_metric_name_length: must be positive, got 0",
			"max_attribute_key_length: must be positive, got 0",
			"series_idle_timeout: must be at least 1s, got 0s",
			"log_interval: must be positive, got 0s",
		},
		"negatives": {
			"max_clients: must be positive, got -1",
			"max_new_series_per_minute: must be positive, got -1",
			"max_series_per_client: must be positive, got -1",
			"max_points_per_second: must be positive, got -1",
			"points_burst: must be 0 (one second's worth) or positive, got -1",
			"max_histogram_buckets: must be positive, got -1",
			"max_metric_name_length: must be positive, got -1",
			"max_attribute_key_length: must be positive, got -1",
			"series_idle_timeout: must be at least 1s, got -1m0s",
		},
		"bad_names":    {`allowed_metric_names: must be "contract" or "any", got "hw"`},
		"bad_identity": {`client_identity: "claims.kubernetes.io//name" has an empty path element`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loadConfig(t, name)
			require.Error(t, err)
			for _, w := range want {
				assert.ErrorContains(t, err, w)
			}
		})
	}
}
