// Package pricing reads prices.yaml, the one file that sets what a GPU-hour (per GPU model)
// and a kWh cost. The rules generator turns it into rules/gpu-prices.yaml (price series
// the cost recording rules multiply by); it is a YAML file rather than Go constants, as
// internal/thresholds is, so that tools that cannot read Go (a Helm chart's .Files, a
// chargeback report) can read the very same file. Empty by default: with no price set,
// every cost rule is empty instead of showing an invented figure.
package pricing // import "github.com/otelcol-gpu/otelcol-gpu/internal/pricing"

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"
)

// File is the path of the price file, relative to the repository root.
const File = "internal/pricing/prices.yaml"

//go:embed prices.yaml
var embedded []byte

// Prices is what prices.yaml sets.
type Prices struct {
	// Currency names the currency of every price (USD, EUR, ...); may be empty.
	Currency string `yaml:"currency"`
	// GPUHour is the price of one whole GPU for one hour, by GPU model as NVML names it
	// (the hw_model label).
	GPUHour map[string]float64 `yaml:"gpu_hour"`
	// EnergyKWh is the price of one kWh, nil when none is set.
	EnergyKWh *float64 `yaml:"energy_kwh"`
}

// Default returns the prices of the committed prices.yaml. It panics if the file does not
// parse: it is compiled in, and this package's tests parse it.
func Default() Prices {
	p, err := Parse(embedded)
	if err != nil {
		panic(fmt.Sprintf("%s: %v", File, err))
	}
	return p
}

// Parse reads a price file. Unknown keys, negative, zero or non-finite prices, empty model
// names and names a PromQL string or label value would garble are errors.
func Parse(data []byte) (Prices, error) {
	var p Prices
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return Prices{}, err
	}
	var errs []error
	if err := checkText(p.Currency); err != nil {
		errs = append(errs, fmt.Errorf("currency: %w", err))
	}
	for _, model := range p.Models() {
		if strings.TrimSpace(model) == "" {
			errs = append(errs, errors.New("gpu_hour: empty GPU model name"))
		} else if err := checkText(model); err != nil {
			errs = append(errs, fmt.Errorf("gpu_hour: %q: %w", model, err))
		}
		if err := checkPrice(p.GPUHour[model]); err != nil {
			errs = append(errs, fmt.Errorf("gpu_hour: %q: %w", model, err))
		}
	}
	if p.EnergyKWh != nil {
		if err := checkPrice(*p.EnergyKWh); err != nil {
			errs = append(errs, fmt.Errorf("energy_kwh: %w", err))
		}
	}
	return p, errors.Join(errs...)
}

// Models returns the GPU models with a price, sorted.
func (p Prices) Models() []string { return slices.Sorted(maps.Keys(p.GPUHour)) }

func checkPrice(v float64) error {
	if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return fmt.Errorf("price %v: want a positive number (leave a model out to give it no price)", v)
	}
	return nil
}

// checkText refuses what would need escaping in a PromQL string: quotes, backslashes and
// control characters (NVML's model names and currency codes have none).
func checkText(s string) error {
	if strings.ContainsFunc(s, func(r rune) bool { return r == '"' || r == '\\' || unicode.IsControl(r) }) {
		return errors.New("quotes, backslashes and control characters are not allowed")
	}
	return nil
}
