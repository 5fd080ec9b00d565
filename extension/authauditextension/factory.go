package authauditextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/authauditextension"

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
)

// typeStr is the extension's name in configurations.
const typeStr = "auth_audit"

// NewFactory returns the factory of the auth_audit extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(component.MustNewType(typeStr), createDefaultConfig, create, component.StabilityLevelDevelopment)
}

func createDefaultConfig() component.Config {
	return &Config{LogInterval: defaultLogInterval, TopClients: defaultTopClients}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newAuditor(cfg.(*Config), set.ID, set.Logger, set.MeterProvider, time.Now)
}
