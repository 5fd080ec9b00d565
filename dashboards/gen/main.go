// Command gen writes otelcol-gpu's Grafana dashboards as JSON files (`make generate` runs
// it; `make check-generated` and the dashboards' tests fail when the committed files
// differ).
//
//	go run ./dashboards/gen -out dashboards
package main

import (
	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
	"github.com/otelcol-gpu/otelcol-gpu/internal/genfiles"
)

func main() { genfiles.Main("dashboards", dashboards.Render) }
