// Command kpsgen writes deploy/kubernetes/kube-prometheus-stack/ from rules/*.yaml and
// dashboards/*.json. Run it from deploy/test: go run ./cmd/kpsgen
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/deploy/test/kpsgen"
)

func main() {
	root := flag.String("root", "../..", "repository root")
	flag.Parse()
	if err := kpsgen.Write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "kpsgen:", err)
		os.Exit(1)
	}
}
