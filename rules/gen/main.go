// Command gen writes otelcol-gpu's Prometheus rule files (`make generate` runs it;
// `make check-generated` and the rules' tests fail when the committed files differ).
//
//	go run ./rules/gen -out rules
package main

import (
	"github.com/otelcol-gpu/otelcol-gpu/internal/genfiles"
	"github.com/otelcol-gpu/otelcol-gpu/rules"
)

func main() { genfiles.Main("rules", rules.Render) }
