package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"
)

// typeStr is the processor's name in configurations.
const typeStr = "gateway_limits"

// NewFactory returns the factory of the gateway_limits processor.
func NewFactory() processor.Factory {
	return processor.NewFactory(component.MustNewType(typeStr), createDefaultConfig,
		processor.WithMetrics(createMetrics, component.StabilityLevelDevelopment))
}

func createDefaultConfig() component.Config {
	return &Config{
		ClientIdentity:        defaultClientIdentity,
		MaxClients:            defaultMaxClients,
		AllowedMetricNames:    AllowContract,
		MaxNewSeriesPerMinute: defaultMaxNewSeriesPerMinute,
		MaxSeriesPerClient:    defaultMaxSeriesPerClient,
		SeriesIdleTimeout:     defaultSeriesIdleTimeout,
		MaxPointsPerSecond:    defaultMaxPointsPerSecond,
		MaxHistogramBuckets:   defaultMaxHistogramBuckets,
		MaxMetricNameLength:   defaultMaxMetricNameLength,
		MaxAttributeKeyLength: defaultMaxAttributeKeyLength,
		LogInterval:           defaultLogInterval,
	}
}

func createMetrics(ctx context.Context, set processor.Settings, baseCfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errors.New("gateway_limits: wrong config type")
	}
	p, err := newLimiter(cfg, set.TelemetrySettings, time.Now)
	if err != nil {
		return nil, err
	}
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown))
}
