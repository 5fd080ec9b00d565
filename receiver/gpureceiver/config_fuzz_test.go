package gpureceiver

import (
	"testing"

	"go.opentelemetry.io/collector/confmap"
	"go.yaml.in/yaml/v3"
)

// FuzzConfig: whatever YAML a user writes under `receivers: gpu:`, unmarshalling and
// validating it returns a result or an error, never a panic.
func FuzzConfig(f *testing.F) {
	for _, seed := range []string{
		"backend: simulated\nsimulated: {system: dgxh100, scenario: idle, seed: 3}\n",
		"collection_interval: 0s\n",
		"include_devices: [\"0\", \"GPU-1\", \"-1\", \"\"]\n",
		"nvml: {library_path: lib.so, init_retry: {initial_interval: 1s, max_interval: 0s}}\n",
		"metrics: {hw.power: {enabled: false}}\n",
		"backend: [1, 2]\n",
		"timeout: -5s\ncollection_interval: 1ns\n",
		"simulated: {seed: 99999999999999999999999}\n",
	} {
		f.Add(seed)
	}
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
