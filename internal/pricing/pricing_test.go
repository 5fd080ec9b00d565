package pricing

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultParses: the committed price file parses (whatever prices it holds).
func TestDefaultParses(t *testing.T) {
	_, err := Parse(embedded)
	require.NoError(t, err)
	assert.NotPanics(t, func() { Default() })
}

// TestExampleParses: prices.example.yaml (make cost-report-demo's prices) parses and sets
// something, a price per GPU-hour and per kWh.
func TestExampleParses(t *testing.T) {
	data, err := os.ReadFile("prices.example.yaml")
	require.NoError(t, err)
	p, err := Parse(data)
	require.NoError(t, err)
	assert.NotEmpty(t, p.Models())
	assert.NotNil(t, p.EnergyKWh)
	assert.NotEmpty(t, p.Currency)
}

func TestParse(t *testing.T) {
	p, err := Parse([]byte(`
currency: USD
gpu_hour:
  "NVIDIA H100 80GB HBM3": 2.5
  "NVIDIA A100-SXM4-80GB": 1.25
energy_kwh: 0.15
`))
	require.NoError(t, err)
	assert.Equal(t, "USD", p.Currency)
	assert.Equal(t, []string{"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}, p.Models())
	assert.Equal(t, 2.5, p.GPUHour["NVIDIA H100 80GB HBM3"])
	require.NotNil(t, p.EnergyKWh)
	assert.Equal(t, 0.15, *p.EnergyKWh)

	empty, err := Parse([]byte("currency: \"\"\ngpu_hour: {}\nenergy_kwh: null\n"))
	require.NoError(t, err)
	assert.Empty(t, empty.Models())
	assert.Nil(t, empty.EnergyKWh)
}

func TestParseRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown key":        "gpu_hours: {}\n",
		"zero price":         "gpu_hour: {\"NVIDIA H100 80GB HBM3\": 0}\n",
		"negative price":     "gpu_hour: {\"NVIDIA H100 80GB HBM3\": -1}\n",
		"not a number":       "gpu_hour: {\"NVIDIA H100 80GB HBM3\": cheap}\n",
		"empty model":        "gpu_hour: {\"\": 1}\n",
		"quote in model":     "gpu_hour: {'NVIDIA \"H100\"': 1}\n",
		"zero energy price":  "energy_kwh: 0\n",
		"infinite energy":    "energy_kwh: .inf\n",
		"quote in currency":  "currency: 'U\"S'\n",
		"backslash in model": "gpu_hour: {'NVIDIA\\H100': 1}\n",
	} {
		_, err := Parse([]byte(doc))
		assert.Error(t, err, name)
	}
}
