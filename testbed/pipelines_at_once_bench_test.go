//go:build e2e && benchpipelines

package testbed

// The issue-15 ratios measured in one shared window: the agent with remote-write (a), the
// agent with native OTLP into Prometheus 3 (a''), and the Prometheus agent scraping
// dcgm-exporter's default exposition (b) run at the same time, each into its own
// Prometheus. TestPipelinesSideBySide runs the paths one after the other, and between two
// runs this VM's speed moves a path by a fifth (docs/benchmarks.md), more than a change to
// the agent can show; measured together, such a drift weighs on a and b alike, and each
// round's ratio is taken from one window. `make bench-pipelines` runs it.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// running is one path of a shared window: the process whose CPU is counted and the
// Prometheus its samples go to.
type running struct {
	path     string
	p        *prom.Server
	pipeline *proc.Process
}

// measureTogether waits `warm`, then measures every path over the same window.
func measureTogether(t *testing.T, warm, window time.Duration, paths []running) []measurement {
	t.Helper()
	time.Sleep(warm)
	cpu0, s0 := make([]float64, len(paths)), make([]float64, len(paths))
	for i, r := range paths {
		cpu0[i], s0[i] = cpuOf(t, r.pipeline), appended(t, r.p)
	}
	peak := make([]int64, len(paths))
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		for i, r := range paths {
			if rss, err := r.pipeline.RSS(); err == nil {
				peak[i] = max(peak[i], rss)
			}
		}
	}
	out := make([]measurement, len(paths))
	for i, r := range paths {
		out[i] = measurement{cpu: cpuOf(t, r.pipeline) - cpu0[i], samples: appended(t, r.p) - s0[i], peakRSS: peak[i]}
	}
	return out
}

func TestPipelinesAtOnce(t *testing.T) {
	warm, window := benchEnv("BENCH_WARMUP", 15*time.Second), benchEnv("BENCH_WINDOW", 60*time.Second)
	rounds := benchRounds(5)
	promBin := prom.Binary(t)
	gpuCounts, intervals := benchSizes(t)
	const (
		native = "a) native"
		otlp   = "a'') native, OTLP into Prometheus 3"
		agent  = "b) dcgm (21 default fields) + Prometheus agent"
	)
	var table strings.Builder
	fmt.Fprintf(&table, "\n| GPUs | interval | rounds | a ms per GPU-minute | a'' | b | a/b per round | a''/b per round | median a/b | median a''/b |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, gpus := range gpuCounts {
		for _, interval := range intervals {
			results := newPathResults(gpus, window)
			var ratioRW, ratioOTLP []float64
			for range rounds {
				pRW := prom.Start(t, "")
				agentRW := startNative(t, pRW, gpus, interval)
				pOTLP := startPrometheusOTLP(t)
				agentOTLP := startNative(t, pOTLP, gpus, interval, "deploy/config-overlays/prometheus-otlp.yaml")
				targets := dcgmExpositions(t, gpus, len(dcgmFields))
				pB := prom.Start(t, "")
				promAgent := startPrometheusAgent(t, promBin, targets, interval, pB.RemoteWriteURL())

				paths := []running{{native, pRW, agentRW}, {otlp, pOTLP, agentOTLP}, {agent, pB, promAgent}}
				ms := measureTogether(t, warm, window, paths)
				for i, r := range paths {
					results.add(t, r.path, r.p, ms[i])
				}
				b := results.perGPUMinute(ms[2])
				ratioRW = append(ratioRW, results.perGPUMinute(ms[0])/b)
				ratioOTLP = append(ratioOTLP, results.perGPUMinute(ms[1])/b)
				t.Logf("%d GPUs at %s, round %d: a/b %.2f, a''/b %.2f", gpus, interval, len(ratioRW), ratioRW[len(ratioRW)-1], ratioOTLP[len(ratioOTLP)-1])

				for _, pr := range []*proc.Process{agentRW, agentOTLP, promAgent} {
					pr.Stop(10 * time.Second)
				}
				for _, p := range []*prom.Server{pRW, pOTLP, pB} {
					p.Stop()
				}
			}
			perMinute := results.median(results.perGPUMinute)
			fmt.Fprintf(&table, "| %d | %s | %d | %.1f | %.1f | %.1f | %s | %s | **%.2f** | **%.2f** |\n", gpus, interval, rounds,
				perMinute[native], perMinute[otlp], perMinute[agent], joinRatios(ratioRW), joinRatios(ratioOTLP), medianOf(ratioRW), medianOf(ratioOTLP))
		}
	}
	t.Log(table.String())
}

func joinRatios(rs []float64) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = fmt.Sprintf("%.2f", r)
	}
	return strings.Join(s, ", ")
}
