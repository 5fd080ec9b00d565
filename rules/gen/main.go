// Command gen writes otelcol-gpu's Prometheus rule files (`make generate` runs it;
// `make check-generated` and the rules' tests fail when the committed files differ).
//
//	go run ./rules/gen -out rules
//
// With -prices, it writes gpu-prices.yaml alone, from that price file instead of
// internal/pricing/prices.yaml (a test's or a demo's prices; keep -out elsewhere than
// rules/, whose gpu-prices.yaml must stay what prices.yaml gives):
//
//	go run ./rules/gen -prices deploy/examples/gpu-prices.example.yaml -out /tmp/rules
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/internal/genfiles"
	"github.com/otelcol-gpu/otelcol-gpu/internal/pricing"
	"github.com/otelcol-gpu/otelcol-gpu/rules"
)

func main() {
	prices := flag.String("prices", "", "write only gpu-prices.yaml, from this price file (format of "+pricing.File+")")
	genfiles.Main("rules", func() (map[string][]byte, error) {
		if *prices == "" {
			return rules.Render()
		}
		data, err := os.ReadFile(*prices)
		if err != nil {
			return nil, err
		}
		p, err := pricing.Parse(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", *prices, err)
		}
		return rules.RenderPrices(p, *prices)
	})
}
