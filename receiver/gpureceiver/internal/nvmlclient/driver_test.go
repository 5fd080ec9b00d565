package nvmlclient

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseDriverVersion(t *testing.T) {
	for in, want := range map[string]DriverVersion{
		"535.104.05": {535, 104, 5},
		"580.95.05":  {580, 95, 5},
		"550.54":     {550, 54, 0},
		" 570.86.15": {570, 86, 15},
	} {
		got, err := ParseDriverVersion(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "535", "r535.104", "535.104.05.1", "535.-1.0"} {
		_, err := ParseDriverVersion(bad)
		assert.Error(t, err, bad)
	}
}

// The driver releases whose behaviour the receiver depends on, from NVIDIA's headers and
// kernel module sources (see driver.go).
func TestDriverFacts(t *testing.T) {
	for _, c := range []struct {
		version                string
		processListBroken      bool
		filtersByPIDNamespaces bool
	}{
		{"530.30.02", false, false},
		{"535.43.02", true, false},   // first release writing 32-byte _v3 entries
		{"535.54.03", true, false},   // go-nvml#75
		{"535.86.10", true, false},   // last of them
		{"535.98", true, false},      // no _v3 in its header; treated as affected (the range)
		{"535.104.05", false, false}, // 24-byte entries again
		{"535.113.01", false, true},  // _gpuConvertPid first appears
		{"550.54.15", false, true},
		{"580.95.05", false, true},
	} {
		v, err := ParseDriverVersion(c.version)
		require.NoError(t, err)
		assert.Equal(t, c.processListBroken, v.ProcessListBroken(), c.version)
		assert.Equal(t, c.filtersByPIDNamespaces, v.FiltersProcessesByPIDNamespace(), c.version)
	}
}
