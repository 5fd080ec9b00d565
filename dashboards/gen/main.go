// Command gen writes otelcol-gpu's Grafana dashboards as JSON files (`make generate` runs
// it; `make check-generated` and the dashboards tests fail when the committed files differ).
//
//	go run ./dashboards/gen -out dashboards
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
)

func main() {
	out := flag.String("out", "dashboards", "directory to write the dashboards into")
	flag.Parse()
	if err := dashboards.Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
