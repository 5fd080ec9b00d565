package rules

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pricing"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
)

// TestPriceGroup: prices become one price series per model, one for the kWh, and
// cluster:gpu_price_configured:config; no price, only the latter, 0 for both kinds.
func TestPriceGroup(t *testing.T) {
	p, err := pricing.Parse([]byte(`
currency: USD
gpu_hour:
  "NVIDIA H100 80GB HBM3": 2.5
  "NVIDIA A100-SXM4-80GB": 1.25
energy_kwh: 0.15
`))
	require.NoError(t, err)
	exprs := map[string]string{}
	for _, r := range priceGroup(p).Rules {
		_, err := promql.Parse(r.Expr)
		require.NoError(t, err, r.Expr)
		exprs[r.Record] = r.Expr
	}
	assert.Equal(t, `  label_replace(vector(1.25), "hw_model", "NVIDIA A100-SXM4-80GB", "", "")
or
  label_replace(vector(2.5), "hw_model", "NVIDIA H100 80GB HBM3", "", "")`, exprs[pricePerHour])
	assert.Equal(t, `vector(0.15)`, exprs[pricePerKWh])
	assert.Equal(t, `  label_replace(
      label_replace(vector(2), "price", "gpu_hour", "", "")
    or
      label_replace(vector(1), "price", "energy_kwh", "", ""),
    "currency", "USD", "", ""
  )`, exprs[priceConfigured])

	none := priceGroup(pricing.Prices{}).Rules
	require.Len(t, none, 1)
	assert.Equal(t, priceConfigured, none[0].Record)
	assert.Equal(t, `  label_replace(vector(0), "price", "gpu_hour", "", "")
or
  label_replace(vector(0), "price", "energy_kwh", "", "")`, none[0].Expr)
}

// TestCostRulesReadOnlyPriceSeries: the cost rules read the price series that
// gpu-prices.yaml writes, by the names PriceSeries gives.
func TestCostRulesReadOnlyPriceSeries(t *testing.T) {
	read := map[string]bool{}
	for _, r := range cost().Rules {
		names, err := promql.MetricNames(r.Expr)
		require.NoError(t, err)
		for _, n := range names {
			read[n] = true
		}
	}
	for _, n := range PriceSeries {
		assert.True(t, read[n], "no cost rule reads %s", n)
	}
}
