package basicauthserverextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/basicauthserverextension"

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension"
)

// typeStr is the extension's name in configurations.
const typeStr = "basic_auth_server"

// NewFactory returns the factory of the basic_auth_server extension.
func NewFactory() extension.Factory {
	return extension.NewFactory(component.MustNewType(typeStr), createDefaultConfig, create, component.StabilityLevelDevelopment)
}

func createDefaultConfig() component.Config {
	return &Config{
		ReloadInterval:      defaultReloadInterval,
		MaxConcurrentChecks: defaultMaxConcurrentChecks,
		MaxQueuedChecks:     defaultMaxQueuedChecks,
		CacheSize:           defaultCacheSize,
	}
}

func create(_ context.Context, set extension.Settings, cfg component.Config) (extension.Extension, error) {
	return newAuthenticator(cfg.(*Config), defaultDeps(set.Logger))
}
