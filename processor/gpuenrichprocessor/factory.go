package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/kube"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// NewFactory creates the gpu_enrich processor factory.
func NewFactory() processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithMetrics(createMetricsProcessor, metadata.MetricsStability))
}

func createDefaultConfig() component.Config {
	return &Config{
		MetricsBuilderConfig: metadata.DefaultMetricsBuilderConfig(),
		Kubelet: KubeletConfig{
			Enabled:         true,
			Endpoint:        "unix:///var/lib/kubelet/pod-resources/kubelet.sock",
			RefreshInterval: 10 * time.Second,
			Timeout:         5 * time.Second,
			ResourceNames:   podresources.DefaultResourceNames(),
			DRADrivers:      podresources.DefaultDRADrivers(),
		},
		Processes: ProcessesConfig{Enabled: true, ProcRoot: "/proc", MaxPerGPU: 8, MaxExecutableNameLength: 64,
			MaxExecutableNamesPerGPU: 16, ExecutableNamesWindow: time.Hour},
		KubeAPI:      KubeAPIConfig{AuthType: kube.AuthServiceAccount},
		Idle:         IdleConfig{Threshold: 0.05, Window: 10 * time.Minute},
		Leak:         LeakConfig{Window: 15 * time.Minute, MinGrowth: 0.05, UtilizationTolerance: 0.25},
		Bottleneck:   BottleneckConfig{Saturation: 0.6},
		EndSeries:    true,
		Descriptions: true,

		SteadySeriesInterval: gpuschema.SteadyResendMax,
	}
}

func createMetricsProcessor(ctx context.Context, set processor.Settings, baseCfg component.Config, next consumer.Metrics) (processor.Metrics, error) {
	cfg, ok := baseCfg.(*Config)
	if !ok {
		return nil, errors.New("gpu_enrich: wrong config type")
	}
	p := newProcessor(cfg, set, time.Now, newSources(cfg, set.Logger, time.Now))
	return processorhelper.NewMetrics(ctx, set, cfg, next, p.processMetrics,
		processorhelper.WithCapabilities(consumer.Capabilities{MutatesData: true}),
		processorhelper.WithStart(p.start),
		processorhelper.WithShutdown(p.shutdown))
}
