package gatewaylimitsprocessor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The factory's processor, as the collector runs it: started, fed, shut down; what passes
// reaches the next consumer, a refused request is the caller's error and reaches nothing.
func TestFactoryLifecycle(t *testing.T) {
	factory := NewFactory()
	assert.Equal(t, component.MustNewType("gateway_limits"), factory.Type())
	assert.Equal(t, component.StabilityLevelDevelopment, factory.MetricsStability())
	cfg := factory.CreateDefaultConfig().(*Config)
	cfg.MaxPointsPerSecond, cfg.PointsBurst = 1, 10 // 10 points, then one a second
	sink := new(consumertest.MetricsSink)
	p, err := factory.CreateMetrics(context.Background(), processortest.NewNopSettings(factory.Type()), cfg, sink)
	require.NoError(t, err)
	assert.True(t, p.Capabilities().MutatesData)
	require.NoError(t, p.Start(context.Background(), componenttest.NewNopHost()))

	md := gauges("h", "hw.gpu.utilization", 0, 4)
	gauges("h", "nvidia.gpu.probe", 0, 4).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	require.NoError(t, p.ConsumeMetrics(from("10.0.0.1"), md))
	require.Len(t, sink.AllMetrics(), 1)
	assert.Equal(t, map[string]int{"hw.gpu.utilization": 4}, names(sink.AllMetrics()[0]))

	// Everything refused: nothing goes on, and the sender is told it went well.
	require.NoError(t, p.ConsumeMetrics(from("10.0.0.1"), gauges("h", "nvidia.gpu.probe", 0, 2)))
	assert.Len(t, sink.AllMetrics(), 1)

	err = p.ConsumeMetrics(from("10.0.0.1"), gauges("h", "hw.gpu.utilization", 0, 10))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Len(t, sink.AllMetrics(), 1)
	require.NoError(t, p.Shutdown(context.Background()))
}

func TestShutdownWithoutStart(t *testing.T) {
	factory := NewFactory()
	p, err := factory.CreateMetrics(context.Background(), processortest.NewNopSettings(factory.Type()), factory.CreateDefaultConfig(), consumertest.NewNop())
	require.NoError(t, err)
	require.NoError(t, p.Shutdown(context.Background()))
}
