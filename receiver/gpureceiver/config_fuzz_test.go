package gpureceiver

import (
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"
)

// FuzzConfig: whatever YAML a user writes under `receivers: gpu:`, unmarshalling and
// validating it returns a result or an error, never a panic.
func FuzzConfig(f *testing.F) {
	// Seeds live in testdata/fuzz/FuzzConfig (one YAML document per file).
	f.Fuzz(func(t *testing.T, doc string) {
		var raw map[string]any
		if yaml.Unmarshal([]byte(doc), &raw) != nil || raw == nil {
			return
		}
		cfg := createDefaultConfig().(*Config)
		if confmap.NewFromStringMap(raw).Unmarshal(cfg) != nil {
			return
		}
		_ = confmap.Validate(cfg)
	})
}
