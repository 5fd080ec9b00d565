//go:build e2e && benchpipelines

package testbed

// Gateway load: OTLP from simulated node agents (8 GPUs each, the real gpu receiver's and
// gpu_enrich's output) through the shipped configs/gateway.yaml into a real Prometheus.
// Measures the sustained samples/s, the loss (every sample the agents offered, counted
// against what Prometheus stored), and the gateway's CPU and RSS. `make bench-gateway`
// runs it; it logs a table and fails only when the harness itself breaks.
//
// Environment: BENCH_GATEWAY_AGENTS (default "100,1000"), BENCH_GATEWAY_INTERVAL (15s),
// BENCH_WARMUP (30s), BENCH_WINDOW (120s), BENCH_GATEWAY_COMPRESSION (gzip, what
// configs/agent-to-gateway.yaml sends; or none), BENCH_GATEWAY_EXPORT_TIMEOUT (5s, the
// otlp_grpc exporter's default), BENCH_GATEWAY_MAX_RSS_MIB (8192: the agents stop when the
// gateway's RSS passes it), BENCH_GATEWAY_MEMORY_LIMIT_MIB (unset: the host's memory; set:
// the gateway as in a container with that limit, GOMEMLIMIT and memory_limiter as the
// manifests set them). For diagnosis only, BENCH_GATEWAY_EXTRA_CONFIG names a config
// overlay merged after gateway.yaml (e.g. a pprof extension); figures are taken without it.

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.yaml.in/yaml/v3"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/agentsim"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// gatewayPromoted reads the resource attributes configs/gateway.yaml promotes to labels
// (prometheus_remote_write's resource_constant_labels.included).
func gatewayPromoted(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(proc.RepoRoot(), "configs", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Exporters struct {
			PRW struct {
				Labels struct {
					Included []string `yaml:"included"`
				} `yaml:"resource_constant_labels"`
			} `yaml:"prometheus_remote_write"`
		} `yaml:"exporters"`
	}
	if err := yaml.Unmarshal(raw, &cfg); err != nil || len(cfg.Exporters.PRW.Labels.Included) == 0 {
		t.Fatalf("configs/gateway.yaml: no resource_constant_labels.included (%v)", err)
	}
	return cfg.Exporters.PRW.Labels.Included
}

// Guards so that an overloaded run is stopped and reported rather than taking the machine
// down with it: past a limit the agents stop (the run is marked ABORTED) and the gateway
// drains what it holds; if the machine still runs short, the gateway is killed.
const (
	defaultMaxGatewayRSSMiB = 8 << 10 // BENCH_GATEWAY_MAX_RSS_MIB
	maxPromRSS              = 16 << 30
	minMemAvailable         = 1536 << 20
	killMemAvailable        = 768 << 20
)

func TestGatewayLoad(t *testing.T) {
	var fleets []int
	spec := os.Getenv("BENCH_GATEWAY_AGENTS")
	if spec == "" {
		spec = "100,1000"
	}
	for _, f := range strings.Split(spec, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("BENCH_GATEWAY_AGENTS=%q: %q is not a positive number", spec, f)
		}
		fleets = append(fleets, n)
	}
	interval := benchEnv("BENCH_GATEWAY_INTERVAL", 15*time.Second)
	warm, window := benchEnv("BENCH_WARMUP", 30*time.Second), benchEnv("BENCH_WINDOW", 120*time.Second)
	timeout := benchEnv("BENCH_GATEWAY_EXPORT_TIMEOUT", 5*time.Second)
	compression := os.Getenv("BENCH_GATEWAY_COMPRESSION")
	if compression == "" {
		compression = "gzip"
	}

	payload, err := agentsim.Payload(context.Background(), "dgxh100", "shared-gpu", 3)
	if err != nil {
		t.Fatalf("building the agent payload: %v", err)
	}
	perSend, byType, err := agentsim.Composition(payload)
	if err != nil {
		t.Fatalf("payload: %v", err)
	}
	series := agentsim.Series(payload, gatewayPromoted(t))
	if series != perSend {
		// Two points of one series in one send: Prometheus would refuse the whole request.
		t.Fatalf("payload: %d samples but %d distinct series", perSend, series)
	}
	raw, err := pmetricotlp.NewExportRequestFromMetrics(payload).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	t.Logf("payload of one agent (dgxh100 × 8 GPUs, shared-gpu, kubelet and process attribution off): %d resources, metrics by type %v, %d samples = %d series per send; OTLP request %d KiB, %d KiB gzipped",
		payload.ResourceMetrics().Len(), byType, perSend, series, len(raw)>>10, gz.Len()>>10)
	t.Logf("machine before: load average %s", loadAvg())

	type row struct {
		agents int
		r      gatewayRun
	}
	var rows []row
	for _, n := range fleets {
		t.Run(fmt.Sprintf("agents=%d", n), func(t *testing.T) {
			r := runGatewayLoad(t, gatewayLoadConfig{
				agents: n, interval: interval, warm: warm, window: window, timeout: timeout,
				compression: compression, payload: agentsim.Config{Payload: payload, SamplesPerSend: perSend},
			})
			rows = append(rows, row{n, r})
		})
	}
	t.Logf("machine after: load average %s", loadAvg())

	var b strings.Builder
	fmt.Fprintf(&b, "\ngateway load, interval %s, warm-up %s, window %s, OTLP %s, export timeout %s\n\n", interval, warm, window, compression, timeout)
	b.WriteString("| agents | GPUs | series | offered samples/s | delivered samples/s (window) | loss (samples, %) | drain time | gateway CPU cores (avg over window) | CPU ms per 1000 samples | gateway peak RSS MiB | Prometheus peak RSS MiB | Prometheus CPU cores | harness CPU cores |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, rw := range rows {
		r := rw.r
		loss := "n/a"
		if r.stored >= 0 {
			loss = fmt.Sprintf("%d (%.3f %%)", r.attempted-r.stored, 100*float64(r.attempted-r.stored)/float64(max(r.attempted, 1)))
		}
		drain := r.drain.Round(time.Second).String()
		if r.drainCapped {
			drain = "> " + drain + " (capped)"
		}
		promRSS := "n/a"
		if r.promPeakRSS > 0 {
			promRSS = strconv.FormatInt(r.promPeakRSS>>20, 10)
		}
		note := ""
		if r.aborted != "" {
			note = " ABORTED: " + r.aborted
		}
		fmt.Fprintf(&b, "| %d%s | %d | %d | %.0f | %.0f | %s | %s | %.2f | %.2f | %d | %s | %.2f | %.2f |\n",
			rw.agents, note, rw.agents*8, rw.agents*series, r.offeredRate, r.deliveredRate, loss, drain,
			r.gwCPU/r.windowS, r.gwCPU*1e6/max(r.deliveredWindow, 1), r.gwPeakRSS>>20, promRSS, r.promCPU/r.windowS, r.selfCPU/r.windowS)
	}
	t.Log(b.String())
}

type gatewayLoadConfig struct {
	agents                          int
	interval, warm, window, timeout time.Duration
	compression                     string
	payload                         agentsim.Config
}

// gatewayRun is what one run measured.
type gatewayRun struct {
	attempted, stored int64 // samples offered since the start; distinct samples in Prometheus (-1: query failed)
	offeredRate       float64
	deliveredRate     float64 // appended per second over the window
	deliveredWindow   float64
	windowS           float64
	gwCPU, promCPU    float64 // CPU seconds over the window
	selfCPU           float64
	gwPeakRSS         int64
	promPeakRSS       int64
	drain             time.Duration
	drainCapped       bool
	aborted           string
}

func runGatewayLoad(t *testing.T, c gatewayLoadConfig) (run gatewayRun) {
	p := prom.Start(t, "")
	otlp := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	gwHealth := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	telemetry := proc.FreePort(t)
	// TLS and the agents' token, as shipped: their cost is part of the figure.
	auth := newGatewayAuth(t)
	// The shipped gateway configuration as it is: no --set. (TestAgentThroughGatewayToPrometheus
	// shortens the batch timeout to see data sooner; a throughput figure wants the shipped 5 s.)
	configs := []string{filepath.Join(proc.RepoRoot(), "configs", "gateway.yaml")}
	if extra := os.Getenv("BENCH_GATEWAY_EXTRA_CONFIG"); extra != "" {
		t.Logf("DIAGNOSTIC RUN: overlay %s merged over gateway.yaml", extra)
		configs = append(configs, extra)
	}
	// As in its container (deploy/kubernetes/gateway: limit 1Gi, GOMEMLIMIT 800MiB, and
	// memory_limiter's percentages then apply to the container's limit, not the host's).
	var containerEnv []string
	if v := os.Getenv("BENCH_GATEWAY_MEMORY_LIMIT_MIB"); v != "" {
		limit, err := strconv.Atoi(v)
		if err != nil || limit <= 0 {
			t.Fatalf("BENCH_GATEWAY_MEMORY_LIMIT_MIB=%q: not a positive number of MiB", v)
		}
		overlay := filepath.Join(t.TempDir(), "container-memory.yaml")
		limiter := fmt.Sprintf("processors:\n  memory_limiter:\n    limit_percentage: 0\n    spike_limit_percentage: 0\n    limit_mib: %d\n    spike_limit_mib: %d\n", limit*80/100, limit*20/100)
		if err := os.WriteFile(overlay, []byte(limiter), 0o600); err != nil {
			t.Fatal(err)
		}
		configs = append(configs, overlay)
		containerEnv = append(containerEnv, fmt.Sprintf("GOMEMLIMIT=%dMiB", limit*78/100))
		t.Logf("gateway as in a container with a %d MiB memory limit: memory_limiter at %d MiB (spike %d), GOMEMLIMIT %d MiB", limit, limit*80/100, limit*20/100, limit*78/100)
	}
	// gateway.yaml keeps no WAL now; the directory is for deploy/config-overlays/remote-write-wal.yaml
	// given as BENCH_GATEWAY_EXTRA_CONFIG (its size is logged: where a backlog waits).
	walDir := t.TempDir()
	gw := proc.Collector(t, "gateway", append([]string{
		"PROMETHEUS_REMOTE_WRITE_URL=" + p.RemoteWriteURL(),
		"OTELCOL_GPU_OTLP_ENDPOINT=" + otlp,
		"OTELCOL_GPU_WAL_DIR=" + walDir,
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + gwHealth,
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", telemetry),
	}, append(auth.gatewayEnv(), containerEnv...)...), configs, gwHealth)
	gwCPU := func() float64 { c, _ := gw.CPUSeconds(); return c } // 0 once it is gone
	maxGatewayRSS := int64(defaultMaxGatewayRSSMiB)
	if v, err := strconv.ParseInt(os.Getenv("BENCH_GATEWAY_MAX_RSS_MIB"), 10, 64); err == nil && v > 0 {
		maxGatewayRSS = v
	}
	maxGatewayRSS <<= 20
	promProc := p.Process()

	cfg := c.payload
	cfg.Endpoint, cfg.Agents, cfg.Interval, cfg.Timeout, cfg.Compression = otlp, c.agents, c.interval, c.timeout, c.compression
	cfg.DialOptions = auth.dialOptions(auth.token)
	t0 := time.Now()
	fleet, err := agentsim.Start(cfg)
	if err != nil {
		t.Fatalf("starting %d agents: %v", c.agents, err)
	}
	stopped := false
	stopFleet := func() {
		if !stopped {
			stopped = true
			fleet.Stop()
		}
	}
	defer stopFleet()
	t.Logf("%d agents started in %s (one gRPC connection each, first sends spread over %s)", c.agents, time.Since(t0).Round(time.Millisecond), c.interval)

	// RSS every 500 ms, and the guards.
	var mu sync.Mutex
	var windowOn bool
	var gwPeakAll, promPeakAll int64
	abort := make(chan string, 1)
	var abortSent bool
	samplerDone := make(chan struct{})
	samplerStop := make(chan struct{})
	go func() {
		defer close(samplerDone)
		for {
			select {
			case <-samplerStop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			gr, _ := gw.RSS()
			pr, _ := promProc.RSS()
			mu.Lock()
			gwPeakAll, promPeakAll = max(gwPeakAll, gr), max(promPeakAll, pr)
			if windowOn {
				run.gwPeakRSS, run.promPeakRSS = max(run.gwPeakRSS, gr), max(run.promPeakRSS, pr)
			}
			mu.Unlock()
			avail := memAvailable()
			if avail > 0 && avail < killMemAvailable {
				if exited, _ := gw.Exited(); !exited {
					t.Logf("machine MemAvailable %d MiB: killing the gateway (RSS %d MiB)", avail>>20, gr>>20)
					gw.Kill()
				}
			}
			var why string
			switch {
			case gr > maxGatewayRSS:
				why = fmt.Sprintf("gateway RSS %d MiB over %d MiB", gr>>20, maxGatewayRSS>>20)
			case pr > maxPromRSS:
				why = fmt.Sprintf("Prometheus RSS %d MiB over %d MiB", pr>>20, maxPromRSS>>20)
			case avail > 0 && avail < minMemAvailable:
				why = fmt.Sprintf("machine MemAvailable %d MiB", avail>>20)
			}
			if exited, err := gw.Exited(); exited {
				why = fmt.Sprintf("gateway exited: %v", err)
			}
			if why != "" {
				if !abortSent {
					abortSent = true
					abort <- why // buffered; sampling goes on for the peaks
				}
			}
		}
	}()
	defer func() {
		select {
		case <-samplerStop:
		default:
			close(samplerStop)
		}
		<-samplerDone
	}()
	sleepOrAbort := func(d time.Duration) bool {
		select {
		case why := <-abort:
			run.aborted = why
			t.Logf("ABORTING the run: %s", why)
			return false
		case <-time.After(d):
			return true
		}
	}

	ok := sleepOrAbort(c.warm)
	cpu0, prom0, self0, app0, st0 := gwCPU(), cpuSeconds(promProc.CPUSeconds), cpuSeconds(func() (float64, error) { return proc.CPUSecondsOf(os.Getpid()) }), appended(t, p), fleet.Stats()
	w0 := time.Now()
	mu.Lock()
	windowOn = true
	mu.Unlock()
	if ok {
		sleepOrAbort(c.window)
	}
	mu.Lock()
	windowOn = false
	mu.Unlock()
	run.windowS = time.Since(w0).Seconds()
	run.gwCPU, run.promCPU, run.selfCPU = gwCPU()-cpu0, cpuSeconds(promProc.CPUSeconds)-prom0, cpuSeconds(func() (float64, error) { return proc.CPUSecondsOf(os.Getpid()) })-self0
	app1, st1 := appended(t, p), fleet.Stats()
	run.deliveredWindow = app1 - app0
	run.deliveredRate = run.deliveredWindow / run.windowS
	run.offeredRate = float64(st1.Attempted-st0.Attempted) / run.windowS
	t.Logf("window %.0f s: offered %d samples (%.0f/s), Prometheus appended %.0f (%.0f/s); gateway %.1f CPU s (%.2f ms per 1000 samples offered), Prometheus %.1f CPU s, harness %.1f CPU s",
		run.windowS, st1.Attempted-st0.Attempted, run.offeredRate, run.deliveredWindow, run.deliveredRate, run.gwCPU,
		run.gwCPU*1e6/float64(max(st1.Attempted-st0.Attempted, 1)), run.promCPU, run.selfCPU)
	// Where a backlog waits: the exporter's in-memory queue, or the WAL on disk.
	backlog := scrapeLines(fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetry), func(name string) bool {
		return name == "otelcol_exporter_queue_size" || name == "otelcol_exporter_prometheusremotewrite_wal_lag" || name == "otelcol_process_runtime_heap_alloc_bytes"
	})
	gr, _ := gw.RSS()
	t.Logf("at the window's end: offered so far %d, appended %.0f; gateway RSS %d MiB, WAL directory %d MiB; %s",
		st1.Attempted, app1, gr>>20, dirSize(walDir)>>20, strings.Join(backlog, "; "))

	// Stop sending; wait until Prometheus stops appending for 10 s (at most 3 min).
	stopFleet()
	sent := fleet.Stats()
	tStop := time.Now()
	last, lastGrowth := appended(t, p), tStop
	atStop, gwCPUStop, promCPUStop := last, gwCPU(), cpuSeconds(promProc.CPUSeconds)
	for time.Since(lastGrowth) < 10*time.Second {
		if time.Since(tStop) > 3*time.Minute {
			run.drainCapped = true
			break
		}
		if exited, err := gw.Exited(); exited {
			t.Logf("gateway exited during drain: %v", err)
			break
		}
		time.Sleep(time.Second)
		if a := appended(t, p); a != last {
			last, lastGrowth = a, time.Now()
		}
	}
	run.drain = lastGrowth.Sub(tStop)
	if run.drainCapped {
		run.drain = time.Since(tStop)
	}
	run.attempted = sent.Attempted
	drainS := max(run.drain.Seconds(), 1)
	drainGW := max(gwCPU()-gwCPUStop, 0)
	drainNote := fmt.Sprintf("at the stop Prometheus had appended %.0f of %d offered (backlog %.0f samples); during the drain it appended %.0f (%.0f/s), gateway %.2f CPU cores, Prometheus %.2f",
		atStop, sent.Attempted, float64(sent.Attempted)-atStop, last-atStop, (last-atStop)/drainS, drainGW/time.Since(tStop).Seconds(), (cpuSeconds(promProc.CPUSeconds)-promCPUStop)/time.Since(tStop).Seconds())
	mu.Lock()
	gwPeak, promPeak := gwPeakAll, promPeakAll
	mu.Unlock()

	// What arrived: distinct samples per agent from PromQL (a re-sent duplicate is stored
	// once), next to Prometheus's own appended counter.
	rangeS := int(time.Since(t0).Seconds()) + 120
	var perAgent map[string]int64
	qerr := fmt.Errorf("skipped: the machine is short of memory")
	if avail := memAvailable(); avail == 0 || avail > 4<<30 {
		perAgent, qerr = storedPerAgent(p, c.agents, rangeS)
	}
	run.stored = -1
	var lossyAgents []string
	if qerr != nil {
		t.Logf("counting stored samples by PromQL failed: %v", qerr)
	} else {
		run.stored = 0
		for i := range c.agents {
			got := perAgent[agentsim.HostName(i)]
			run.stored += got
			if a, f := fleet.AgentSamples(i); got != a {
				lossyAgents = append(lossyAgents, fmt.Sprintf("%s: offered %d (failed sends %d), stored %d", agentsim.HostName(i), a, f, got))
			}
		}
	}
	if last == 0 {
		t.Errorf("Prometheus appended no sample at all: the harness or the gateway is broken")
	}

	var d strings.Builder
	fmt.Fprintf(&d, "\n=== %d agents: accounting since start (%s of sending) ===\n", c.agents, tStop.Sub(t0).Round(time.Second))
	fmt.Fprintf(&d, "agents: %d Export calls, %d failed (%v, first: %s), %d points rejected as partial success, %d sends skipped (previous still running); latency avg %s max %s\n",
		sent.Sends, sent.SendErrors, sent.ErrorsByClass, sent.FirstError, sent.Partial, sent.Missed,
		(sent.TotalLatency / time.Duration(max(sent.Sends, 1))).Round(time.Microsecond), sent.MaxLatency.Round(time.Millisecond))
	fmt.Fprintf(&d, "samples offered %d, of which in failed Export calls %d\n", sent.Attempted, sent.Failed)
	fmt.Fprintf(&d, "Prometheus: appended counter %.0f; distinct samples stored (PromQL count_over_time) %d\n", last, run.stored)
	if run.stored >= 0 {
		fmt.Fprintf(&d, "LOSS = offered - stored = %d samples (%.4f %%); agents with a difference: %d of %d\n",
			sent.Attempted-run.stored, 100*float64(sent.Attempted-run.stored)/float64(max(sent.Attempted, 1)), len(lossyAgents), c.agents)
		for k, l := range lossyAgents {
			if k == 10 {
				fmt.Fprintf(&d, "  … %d more\n", len(lossyAgents)-10)
				break
			}
			fmt.Fprintf(&d, "  %s\n", l)
		}
	}
	fmt.Fprintf(&d, "drain after the agents stopped: %s (capped: %v); %s\npeak RSS over the whole run: gateway %d MiB, Prometheus %d MiB\n",
		run.drain.Round(time.Second), run.drainCapped, drainNote, gwPeak>>20, promPeak>>20)
	d.WriteString("Prometheus /metrics:\n")
	for _, l := range scrapeLines("http://"+p.Addr+"/metrics", func(name string) bool {
		switch name {
		case "prometheus_tsdb_head_series", "prometheus_tsdb_head_samples_appended_total", "prometheus_tsdb_out_of_order_samples_total",
			"prometheus_tsdb_out_of_bound_samples_total", "prometheus_tsdb_too_old_samples_total", "prometheus_tsdb_head_series_created_total",
			"prometheus_tsdb_head_chunks", "prometheus_remote_storage_samples_in_total":
			return true
		}
		return false
	}) {
		fmt.Fprintf(&d, "  %s\n", l)
	}
	for _, l := range scrapeLines("http://"+p.Addr+"/metrics", func(name string) bool { return name == "prometheus_http_requests_total" }) {
		if strings.Contains(l, `handler="/api/v1/write"`) {
			fmt.Fprintf(&d, "  %s\n", l)
		}
	}
	d.WriteString("gateway self-metrics:\n")
	for _, l := range scrapeLines(fmt.Sprintf("http://127.0.0.1:%d/metrics", telemetry), func(name string) bool {
		if strings.HasSuffix(name, "_bucket") || strings.HasPrefix(name, "otelcol_http_") || strings.HasPrefix(name, "otelcol_rpc_") || strings.HasPrefix(name, "rpc_") || strings.HasPrefix(name, "http_") {
			return false
		}
		return strings.HasPrefix(name, "otelcol_receiver_") || strings.HasPrefix(name, "otelcol_processor_") || strings.HasPrefix(name, "otelcol_exporter_") ||
			strings.HasPrefix(name, "otelcol_process_") || strings.HasPrefix(name, "otelcol_otelsvc_")
	}) {
		fmt.Fprintf(&d, "  %s\n", l)
	}
	d.WriteString(logSummary("gateway log", gw.Output(), []string{"\terror\t", "\twarn\t"}))
	t.Log(d.String())
	return run
}

// storedPerAgent counts, per host_name, the samples Prometheus holds of the load agents
// over the last rangeS seconds. count_over_time drops the metric name, so each metric is
// counted on its own (else series of two metrics with equal labels collide), and one query
// per hundred agents keeps each query bounded.
func storedPerAgent(p *prom.Server, agents, rangeS int) (map[string]int64, error) {
	resp, err := http.Get("http://" + p.Addr + "/api/v1/label/__name__/values?" + url.Values{"match[]": {`{host_name=~"load-node-.*"}`}}.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var names struct {
		Status string   `json:"status"`
		Data   []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&names); err != nil || names.Status != "success" {
		return nil, fmt.Errorf("metric names: %q %v", names.Status, err)
	}
	out := map[string]int64{}
	for _, name := range names.Data {
		for h := 0; h*100 < agents; h++ {
			q := fmt.Sprintf(`sum by (host_name) (count_over_time(%s{host_name=~"load-node-%02d.."}[%ds]))`, name, h, rangeS)
			res, err := p.Query(q)
			if err != nil {
				return nil, err
			}
			for _, s := range res {
				out[s.Labels["host_name"]] += int64(s.Value)
			}
		}
	}
	return out, nil
}

// scrapeLines fetches a Prometheus exposition and returns, per metric name that keep
// accepts, the sum over label sets, then (for names with several) each label set.
func scrapeLines(url string, keep func(name string) bool) []string {
	resp, err := http.Get(url)
	if err != nil {
		return []string{"fetch " + url + ": " + err.Error()}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	sums := map[string]float64{}
	detail := map[string][]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		name := line
		if k := strings.IndexAny(line, "{ "); k >= 0 {
			name = line[:k]
		}
		if !keep(name) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			continue
		}
		sums[name] += v
		detail[name] = append(detail[name], line)
	}
	var out []string
	for name, v := range sums {
		s := fmt.Sprintf("%s = %.0f", name, v)
		if len(detail[name]) > 1 && len(detail[name]) <= 8 {
			s += "  [" + strings.Join(detail[name], "; ") + "]"
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// logSummary counts a program's log lines at the given levels and quotes a few distinct ones.
func logSummary(what, output string, markers []string) string {
	var b strings.Builder
	counts := map[string]int{}
	var quoted []string
	seen := map[string]bool{}
	for _, line := range strings.Split(output, "\n") {
		for _, m := range markers {
			if !strings.Contains(line, m) {
				continue
			}
			counts[strings.TrimSpace(m)]++
			// The message, without the timestamp, to tell distinct ones apart.
			key := line
			if k := strings.Index(line, m); k >= 0 {
				key = line[k:]
			}
			if len(key) > 160 {
				key = key[:160]
			}
			if !seen[key] && len(quoted) < 6 {
				seen[key] = true
				quoted = append(quoted, line)
			}
		}
	}
	fmt.Fprintf(&b, "%s: %v\n", what, counts)
	for _, q := range quoted {
		if len(q) > 600 {
			q = q[:600] + "…"
		}
		fmt.Fprintf(&b, "  %s\n", q)
	}
	return b.String()
}

// cpuSeconds reads a CPU time, 0 when the process is gone (the run reports, never fails).
func cpuSeconds(read func() (float64, error)) float64 {
	v, _ := read()
	return v
}

// memAvailable is the machine's available memory, 0 when unknown.
func memAvailable() int64 {
	n, _ := proc.MemAvailable()
	return n
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func loadAvg() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(raw))
}
