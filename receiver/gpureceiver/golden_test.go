package gpureceiver

import (
	"context"
	"flag"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gentest"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenCases are every scenario on a DGX H100, every system in steady training, and MIG
// on the A100 as well (its profiles differ).
func goldenCases() [][2]string {
	var cases [][2]string
	for _, scenario := range gpusim.Scenarios() {
		cases = append(cases, [2]string{"dgxh100", scenario})
	}
	for _, system := range gpusim.Systems() {
		if system != "dgxh100" {
			cases = append(cases, [2]string{system, "steady-training"})
		}
	}
	return append(cases, [2]string{"dgxa100", "mig"})
}

// TestScrapeGolden scrapes simulated systems and scenarios at a fixed simulated time and
// compares with the golden files: under testdata/golden/default what the receiver sends
// out of the box, under testdata/golden/full what it sends with the shipped full overlay
// (every metric and attribute). Run `go test -run TestScrapeGolden -update` to rewrite
// them after an intended change, and review the diff.
func TestScrapeGolden(t *testing.T) {
	for _, set := range []struct {
		dir string
		cfg func(testing.TB) *Config
	}{
		{"default", func(testing.TB) *Config { return testConfig() }},
		{"full", fullTestConfig},
	} {
		for _, c := range goldenCases() {
			system, scenario := c[0], c[1]
			t.Run(set.dir+"/"+system+"/"+scenario, func(t *testing.T) {
				clock := newFakeClock()
				sim := newSim(t, system, scenario, clock)
				s := startedScraper(t, set.cfg(t), sim, clock)

				clock.Step(50 * time.Second)
				_, _ = s.scrape(context.Background())
				clock.Step(10 * time.Second)
				waitForXIDs(t, s, sim)
				md, _ := s.scrape(context.Background()) // gpu-lost: a partial error, checked elsewhere

				path := filepath.Join("testdata", "golden", set.dir, system+"-"+scenario+".yaml")
				gentest.GoldenMetrics(t, path, *update, md)
			})
		}
	}
}
