package contractnames

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/contract"
)

// The generated list is exactly the OpenTelemetry names internal/contract derives from
// the metadata.yaml files now: a metric added to, renamed in or removed from the contract
// without `make generate` fails here, before the gateway drops it.
func TestNamesAreTheContract(t *testing.T) {
	byProm, err := contract.PrometheusNames(filepath.Join("..", "..", "..", ".."))
	require.NoError(t, err)
	var want []string
	for _, otel := range byProm {
		want = append(want, otel)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	assert.Equal(t, want, Names(), "run make generate")
	assert.Contains(t, Names(), "hw.gpu.utilization")
	assert.NotContains(t, Names(), "nvidia.gpu.probe")
}
