//go:build e2e

package testbed

import (
	"fmt"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/dashboards"
	"github.com/otelcol-gpu/otelcol-gpu/internal/promql"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestVictoriaMetricsAnswersTheDashboards: VictoriaMetrics single-node, a backend large
// users run instead of Prometheus, takes the shipped agent's remote-write as is and answers
// every dashboard query that Prometheus 3 answers on the same data (two agents on the same
// simulated machine, one into each).
func TestVictoriaMetricsAnswersTheDashboards(t *testing.T) {
	vm := prom.StartVictoriaMetrics(t)
	p := prom.Start3(t, "")
	for _, backend := range []*prom.Server{p, vm} {
		startAgentOn(t, backend, "vm-shared", "dgxh200", "shared-gpu", fakeNode(t, simulatedUUIDs(t, "dgxh200")))
		startAgent(t, backend, "vm-hot", "dgxh100", "thermal-throttle")
	}

	prom.Eventually(t, 60*time.Second, "the agents' series in both backends", func() error {
		for name, b := range map[string]*prom.Server{"Prometheus": p, "VictoriaMetrics": vm} {
			s, err := b.Query(`count(hw_gpu_utilization_ratio{hw_gpu_task="general"})`)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if len(s) != 1 || s[0].Value != 16 {
				return fmt.Errorf("%s: %v GPU utilization series, want 16", name, s)
			}
		}
		return nil
	})
	time.Sleep(15 * time.Second) // rates have two points in both

	answered := 0
	for _, d := range dashboards.All() {
		queries, err := d.Queries()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range queries {
			expr := promql.OnAll(q)
			want, err := p.Query(expr)
			if err != nil {
				t.Errorf("%s: Prometheus: %v", d.File, err)
				continue
			}
			if len(want) == 0 {
				continue // a situation these two agents do not have
			}
			prom.Eventually(t, 30*time.Second, d.File+": "+expr, func() error {
				got, err := vm.Query(expr)
				if err != nil {
					return err
				}
				if len(got) == 0 {
					return fmt.Errorf("VictoriaMetrics returns nothing; Prometheus returns %d series", len(want))
				}
				return nil
			})
			answered++
		}
	}
	t.Logf("%d dashboard queries answered by both backends", answered)
	if answered < 20 {
		t.Errorf("only %d dashboard queries had data to compare", answered)
	}
}
