package drainextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/drainextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
	"k8s.io/utils/clock"

	"github.com/otelcol-gpu/otelcol-gpu/extension/drainextension/internal/metadata"
)

// defaultFlushTimeout leaves 10 s of Kubernetes' default 30 s grace period for the rest
// of shutdown.
const defaultFlushTimeout = 20 * time.Second

// NewFactory returns the factory of the drain extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(metadata.Type, createDefaultConfig, create, metadata.ExtensionStability)
}

func createDefaultConfig() component.Config {
	return &Config{FlushTimeout: defaultFlushTimeout}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newDrain(cfg.(*Config), set.Logger, clock.RealClock{}), nil
}
