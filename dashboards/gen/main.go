// Command gen writes otelcol-gpu's Grafana dashboards as JSON files.
//
//	go run ./dashboards/gen -out dashboards          # regenerate
//	go run ./dashboards/gen -out dashboards -check   # fail if a committed file is stale
//	go run ./dashboards/gen -metrics                 # list the metric names the queries use
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
)

func main() {
	out := flag.String("out", "dashboards", "directory to write the dashboards into")
	check := flag.Bool("check", false, "write nothing; exit 1 if a file in -out differs from what would be written")
	metrics := flag.Bool("metrics", false, "print the metric names the dashboards' queries use, one a line, and exit")
	flag.Parse()
	if err := run(*out, *check, *metrics); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(out string, check, metrics bool) error {
	if metrics {
		names, err := dashboards.MetricNames()
		if err != nil {
			return err
		}
		for _, n := range names {
			fmt.Println(n)
		}
		return nil
	}
	if !check {
		return dashboards.Write(out)
	}
	files, err := dashboards.Render()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var stale []string
	for _, n := range names {
		have, err := os.ReadFile(filepath.Join(out, n))
		if err != nil || !bytes.Equal(have, files[n]) {
			stale = append(stale, n)
		}
	}
	if len(stale) > 0 {
		return fmt.Errorf("stale or missing in %s: %v (run go run ./dashboards/gen -out %s)", out, stale, out)
	}
	return nil
}
