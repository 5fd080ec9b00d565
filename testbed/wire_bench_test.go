//go:build e2e && benchpipelines

package testbed

// What one node sends: 8 simulated H100 (shared-gpu) at the shipped 10 s interval
// (BENCH_WIRE_INTERVAL), on three paths at once, each through a counting proxy into its
// own Prometheus: a) the shipped agent with remote-write, a'') the same agent with native
// OTLP into Prometheus 3, b) a Prometheus agent scraping dcgm-exporter's default
// exposition (simulated, as in TestPipelinesAtOnce) and remote-writing it. Bytes are
// request bodies as sent (snappy for remote-write, gzip level 1 for OTLP), without HTTP
// headers or TCP/TLS framing. Series are what the receiving Prometheus holds; CPU (10 ms
// ticks) and peak RSS are each sender's process over the window. Not a
// pass/fail test: it logs a table for docs/benchmarks.md.

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// wireCounter forwards every request to target and counts the request bodies' bytes.
type wireCounter struct {
	target          string
	requests, bytes atomic.Int64
	srv             *httptest.Server
}

func newWireCounter(t *testing.T, target string) *wireCounter {
	t.Helper()
	c := &wireCounter{target: target}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		c.requests.Add(1)
		c.bytes.Add(int64(len(body)))
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, c.target, bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

func TestWireBytes(t *testing.T) {
	warm, window := benchEnv("BENCH_WARMUP", 15*time.Second), benchEnv("BENCH_WINDOW", 60*time.Second)
	interval := benchEnv("BENCH_WIRE_INTERVAL", 10*time.Second)
	const gpus = 8
	promBin := prom.Binary(t)

	pRW := prom.Start(t, "")
	cRW := newWireCounter(t, pRW.RemoteWriteURL())
	t.Setenv("BENCH_NATIVE_ENV", "PROMETHEUS_REMOTE_WRITE_URL="+cRW.srv.URL)
	agentRW := startNative(t, pRW, gpus, interval)

	pOTLP := startPrometheusOTLP(t)
	cOTLP := newWireCounter(t, "http://"+pOTLP.Addr+"/api/v1/otlp/v1/metrics")
	t.Setenv("BENCH_NATIVE_ENV", "PROMETHEUS_OTLP_URL="+cOTLP.srv.URL)
	agentOTLP := startNative(t, pOTLP, gpus, interval, "deploy/config-overlays/prometheus-otlp.yaml")

	targets := dcgmExpositions(t, gpus, len(dcgmFields))
	pB := prom.Start(t, "")
	cB := newWireCounter(t, pB.RemoteWriteURL())
	promAgent := startPrometheusAgent(t, promBin, targets, interval, cB.srv.URL)

	// One exposition as dcgm-exporter serves it to a scraper (plain, and gzipped as a
	// scraper asking for gzip could get it).
	resp, err := http.Get("http://" + targets[0] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	expo, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(expo)
	_ = zw.Close()

	time.Sleep(warm)
	type path struct {
		name string
		c    *wireCounter
		p    *prom.Server
		pr   *proc.Process
	}
	paths := []path{
		{"a) agent, remote-write (snappy)", cRW, pRW, agentRW},
		{"a'') agent, native OTLP (gzip 1)", cOTLP, pOTLP, agentOTLP},
		{"b) dcgm (21 default fields) + Prometheus agent, remote-write (snappy)", cB, pB, promAgent},
	}
	n := len(paths)
	req0, bytes0, samples0, cpu0, peak := make([]int64, n), make([]int64, n), make([]float64, n), make([]float64, n), make([]int64, n)
	for i, x := range paths {
		req0[i], bytes0[i], samples0[i], cpu0[i] = x.c.requests.Load(), x.c.bytes.Load(), appended(t, x.p), cpuOf(t, x.pr)
	}
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		for i, x := range paths {
			if rss, err := x.pr.RSS(); err == nil {
				peak[i] = max(peak[i], rss)
			}
		}
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| path | series per node | samples per minute | requests per minute | bytes per request | KiB per minute | bytes per sample | CPU ms per minute | peak RSS MiB |\n|---|---|---|---|---|---|---|---|---|\n")
	perMin := 60 / window.Seconds()
	for i, x := range paths {
		reqs, by, samples := x.c.requests.Load()-req0[i], x.c.bytes.Load()-bytes0[i], appended(t, x.p)-samples0[i]
		cpu := cpuOf(t, x.pr) - cpu0[i]
		fmt.Fprintf(&table, "| %s | %d | %.0f | %.1f | %.0f | %.1f | %.2f | %.0f | %d |\n", x.name, seriesIn(t, x.p),
			samples*perMin, float64(reqs)*perMin, float64(by)/max(float64(reqs), 1), float64(by)*perMin/1024, float64(by)/max(samples, 1),
			cpu*1000*perMin, peak[i]>>20)
	}
	fmt.Fprintf(&table, "| b's scrape of dcgm-exporter (one per interval, on the node or across the network) | | | %.1f | %d plain, %d gzipped | %.1f plain, %.1f gzipped | | | |\n",
		60/interval.Seconds(), len(expo), gz.Len(), float64(len(expo))*60/interval.Seconds()/1024, float64(gz.Len())*60/interval.Seconds()/1024)
	t.Logf("one node, %d simulated H100 at %s, %s window after %s:%s", gpus, interval, window, warm, table.String())

	agentRW.Stop(10 * time.Second)
	agentOTLP.Stop(10 * time.Second)
	promAgent.Stop(10 * time.Second)
	for _, p := range []*prom.Server{pRW, pOTLP, pB} {
		p.Stop()
	}
}
