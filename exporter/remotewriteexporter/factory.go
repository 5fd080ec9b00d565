package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter/internal/metadata"
)

// defaultMaxSeriesPerRequest is Prometheus's own max_samples_per_send.
const defaultMaxSeriesPerRequest = 2000

// NewFactory returns the factory of the remote_write exporter.
func NewFactory() exporter.Factory {
	return exporter.NewFactory(metadata.Type, createDefaultConfig,
		exporter.WithMetrics(createMetrics, metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	client := confighttp.NewDefaultClientConfig()
	client.Timeout = 30 * time.Second
	queue := exporterhelper.NewDefaultQueueConfig()
	queue.NumConsumers = 1
	// As Prometheus's own remote-write (queue_config min_backoff 30ms, max_backoff 5s): a
	// backend back from an outage or a restart gets the buffer within seconds, where the
	// collector's default backoff (5 s growing to 30 s) would leave it waiting up to 45 s.
	retry := configretry.NewDefaultBackOffConfig()
	retry.InitialInterval = 30 * time.Millisecond
	retry.MaxInterval = 5 * time.Second
	return &Config{
		ClientConfig:        client,
		QueueConfig:         configoptional.Some(queue),
		RetryConfig:         retry,
		ExternalLabels:      map[string]string{},
		AddMetricSuffixes:   true,
		TargetInfo:          TargetInfoConfig{Enabled: true},
		MaxSeriesPerRequest: defaultMaxSeriesPerRequest,
	}
}

func createMetrics(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
	c := cfg.(*Config)
	e := newExporter(c, set.TelemetrySettings, set.BuildInfo, time.Now)
	return exporterhelper.NewMetrics(ctx, set, cfg, e.push,
		exporterhelper.WithStart(e.start),
		exporterhelper.WithCapabilities(consumer.Capabilities{MutatesData: false}),
		// The HTTP client's timeout bounds each request.
		exporterhelper.WithTimeout(exporterhelper.TimeoutConfig{Timeout: 0}),
		// Retries are the exporter's own (sendRetrying): they go on while the queue drains
		// at shutdown, which exporterhelper's do not.
		exporterhelper.WithRetry(configretry.BackOffConfig{Enabled: false}),
		exporterhelper.WithQueue(c.QueueConfig),
	)
}
