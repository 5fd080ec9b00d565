package gpuenrichprocessor

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// TestMetricsMatchTheContract keeps the metrics the code writes and metadata.yaml (the
// documented contract) in step: same names, units and instruments, and every metric can
// be switched off.
func TestMetricsMatchTheContract(t *testing.T) {
	raw, err := os.ReadFile("metadata.yaml")
	require.NoError(t, err)
	var doc struct {
		Metrics map[string]struct {
			Unit  string    `yaml:"unit"`
			Gauge *struct{} `yaml:"gauge"`
			Sum   *struct {
				Monotonic bool `yaml:"monotonic"`
			} `yaml:"sum"`
		} `yaml:"metrics"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	require.Len(t, metricDefs, len(doc.Metrics), "the same set of metrics")
	p := newProcessor(createDefaultConfig().(*Config), nil, newFakeClock().Now, sources{})
	for name, want := range doc.Metrics {
		def, ok := metricDefs[name]
		require.Truef(t, ok, "%s is documented but never written", name)
		assert.Equal(t, want.Unit, def.unit, name)
		switch {
		case want.Gauge != nil:
			assert.Equal(t, kindGauge, def.kind, name)
		case want.Sum.Monotonic:
			assert.Equal(t, kindCounter, def.kind, name)
		default:
			assert.Equal(t, kindUpDown, def.kind, name)
		}
		assert.True(t, p.enabled(name), "%s has an enable switch, on by default", name)
	}
}
