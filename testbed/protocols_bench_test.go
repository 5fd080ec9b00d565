//go:build e2e && benchpipelines

package testbed

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestProtocolsSideBySide: what the three ways into Prometheus 3 cost, the shipped agent on
// one simulated DGX H200 (shared-gpu, pods attributed, 1 s interval) each: remote-write 1.0
// (the default), remote-write 2.0 (contrib's alpha gate) and native OTLP
// (deploy/config-overlays/prometheus-otlp.yaml). CPU of the agent and of Prometheus per
// 1000 samples Prometheus appended. Figures go to docs/benchmarks.md, never into pass/fail.
func TestProtocolsSideBySide(t *testing.T) {
	warm, window := benchEnv("BENCH_WARMUP", 15*time.Second), benchEnv("BENCH_WINDOW", 60*time.Second)
	uuids := simulatedUUIDs(t, "dgxh200")
	var table strings.Builder
	fmt.Fprintf(&table, "\n| path | samples/s | agent CPU ms per 1000 samples | Prometheus CPU ms per 1000 samples | agent peak RSS MiB |\n|---|---|---|---|---|\n")
	costs := map[string][2]float64{}
	for _, path := range []string{"remote-write 1.0", "remote-write 2.0", "OTLP"} {
		var p *prom.Server
		node := fakeNode(t, uuids)
		switch path {
		case "remote-write 1.0":
			p = prom.Start3(t, "")
		case "remote-write 2.0":
			p = prom.Start3(t, "")
			node = rw2Node(node)
		case "OTLP":
			p = startPrometheusOTLP(t)
			node = otlpNode(p, node)
		}
		agent := startAgentOn(t, p, "bench-proto", "dgxh200", "shared-gpu", node)
		time.Sleep(warm)
		promCPU0 := cpuOf(t, p.Process())
		m := measure(t, p, agent, 0, window)
		promCPU := cpuOf(t, p.Process()) - promCPU0
		agentPerK := m.cpu * 1000 / max(m.samples, 1) * 1000
		promPerK := promCPU * 1000 / max(m.samples, 1) * 1000
		costs[path] = [2]float64{agentPerK, promPerK}
		fmt.Fprintf(&table, "| %s | %.0f | %.3f | %.3f | %d |\n", path, m.samples/window.Seconds(), agentPerK, promPerK, m.peakRSS>>20)
		agent.Stop(10 * time.Second)
		p.Stop()
	}
	base := costs["remote-write 1.0"]
	for _, path := range []string{"remote-write 2.0", "OTLP"} {
		fmt.Fprintf(&table, "| %s / 1.0 | | %.2f× | %.2f× | |\n", path, costs[path][0]/base[0], costs[path][1]/base[1])
	}
	t.Log(table.String())
}
