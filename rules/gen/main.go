// Command gen writes otelcol-gpu's Prometheus rule files (`make generate` runs it;
// `make check-generated` and the rules tests fail when the committed files differ).
//
//	go run ./rules/gen -out rules
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/rules"
)

func main() {
	out := flag.String("out", "rules", "directory to write the rule files into")
	flag.Parse()
	if err := rules.Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
