// Package configtest loads a component's named configuration from a test file the way the
// collector does: unmarshal over the defaults, then validate. Test helper; never linked
// into the collector.
package configtest // import "github.com/otelcol-gpu/otelcol-gpu/internal/configtest"

import (
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/confmaptest"
)

// Load unmarshals the entry key (e.g. "gpu/custom", or "receivers::gpu" of a collector
// config) of the YAML file at path over cfg, which holds the component's defaults, and
// validates it. A missing file or key fails t; an unmarshal or validation error is
// returned, for tests of what a user's mistake is told.
func Load(t testing.TB, path, key string, cfg any) error {
	t.Helper()
	cm, err := confmaptest.LoadConf(path)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := cm.Sub(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.Unmarshal(cfg); err != nil {
		return err
	}
	return confmap.Validate(cfg)
}
