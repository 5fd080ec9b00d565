//go:build e2e && benchpipelines

package testbed

// Side-by-side cost of delivering GPU metrics into the same real Prometheus:
//
//	a) native:  simulated GPUs → gpu → gpu_enrich → remote-write, on the shipped agent
//	   configuration (configs/agent.yaml: memory_limiter, batch 1 s, in-memory queue);
//	   a') the same with the opt-in remote-write WAL overlay
//	   a'') the same agent with native OTLP into Prometheus 3 (prometheus-otlp.yaml)
//	b) dcgm+prometheus-agent: a dcgm-exporter exposition scraped by Prometheus in agent mode
//	c) dcgm+collector: the same exposition scraped by a collector's prometheus receiver
//	   (bin/otelcol-scrape)
//
// The exposition comes in two sizes: dcgm-exporter's 21 default fields per GPU, and one
// padded to the samples per GPU per collection the native path delivers ("same volume":
// its series, less the steady ones it holds back at intervals under 10 s), so that a
// cost per sample compares equal work. Each run measures the pipeline process's CPU time
// (utime+stime) and peak RSS over a window, and the samples the receiving Prometheus
// appended in it. `make bench-pipelines` runs it; docs/benchmarks.md records the figures.
// Not a pass/fail test: it logs a table.

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// dcgmFields are dcgm-exporter's default counters (those NVML can read).
var dcgmFields = []struct{ name, typ string }{
	{"DCGM_FI_DEV_SM_CLOCK", "gauge"}, {"DCGM_FI_DEV_MEM_CLOCK", "gauge"}, {"DCGM_FI_DEV_MEMORY_TEMP", "gauge"},
	{"DCGM_FI_DEV_GPU_TEMP", "gauge"}, {"DCGM_FI_DEV_POWER_USAGE", "gauge"}, {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter"},
	{"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter"}, {"DCGM_FI_DEV_GPU_UTIL", "gauge"}, {"DCGM_FI_DEV_MEM_COPY_UTIL", "gauge"},
	{"DCGM_FI_DEV_ENC_UTIL", "gauge"}, {"DCGM_FI_DEV_DEC_UTIL", "gauge"}, {"DCGM_FI_DEV_XID_ERRORS", "gauge"},
	{"DCGM_FI_DEV_FB_FREE", "gauge"}, {"DCGM_FI_DEV_FB_USED", "gauge"}, {"DCGM_FI_DEV_FB_RESERVED", "gauge"},
	{"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter"}, {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge"},
	{"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter"}, {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter"},
	{"DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge"}, {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge"},
}

// dcgmFieldsFor returns `perGPU` fields: the defaults, then DCGM's per-link NVLink fields
// (what dcgm-exporter exports when they are enabled), then numbered padding fields.
func dcgmFieldsFor(perGPU int) []struct{ name, typ string } {
	fields := append([]struct{ name, typ string }{}, dcgmFields...)
	for _, kind := range []string{"CRC_FLIT_ERROR_COUNT", "CRC_DATA_ERROR_COUNT", "REPLAY_ERROR_COUNT", "RECOVERY_ERROR_COUNT", "BANDWIDTH"} {
		for link := range 18 {
			fields = append(fields, struct{ name, typ string }{fmt.Sprintf("DCGM_FI_DEV_NVLINK_%s_L%d", kind, link), "counter"})
		}
	}
	for i := 0; len(fields) < perGPU; i++ {
		fields = append(fields, struct{ name, typ string }{fmt.Sprintf("DCGM_FI_DEV_BENCH_PADDING_%d", i), "gauge"})
	}
	return fields[:perGPU]
}

// dcgmExpositions serves what dcgm-exporter would for `gpus` GPUs with `perGPU` fields
// each, values moving each scrape: one exposition (target) per 8 GPUs, as one
// dcgm-exporter per 8-GPU node, so that the scrapers handle as many targets as the native
// path has receivers (one per 8 GPUs). It returns the targets' host:port.
func dcgmExpositions(t *testing.T, gpus, perGPU int) []string {
	t.Helper()
	fields := dcgmFieldsFor(perGPU)
	var targets []string
	for node := range gpus / 8 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			now := time.Now().UnixMilli()
			var b strings.Builder
			for _, f := range fields {
				fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.name, f.name, f.typ)
				for g := node * 8; g < node*8+8; g++ {
					fmt.Fprintf(&b, `%s{gpu="%d",UUID="GPU-%08x-0000-4000-8000-%012d",pci_bus_id="00000000:%02X:00.0",device="nvidia%d",modelName="NVIDIA H100 80GB HBM3",Hostname="bench-node-%d",DCGM_FI_DRIVER_VERSION="550.54.15",container="pytorch",namespace="ml",pod="train-%d"} %d`+"\n",
						f.name, g%8, g, g, g%256, g%8, node, g, (now/1000+int64(g))%1000)
				}
			}
			_, _ = io.WriteString(w, b.String())
		}))
		t.Cleanup(srv.Close)
		targets = append(targets, strings.TrimPrefix(srv.URL, "http://"))
	}
	return targets
}

// yamlTargets writes targets as a YAML flow list of quoted strings.
func yamlTargets(targets []string) string {
	return `["` + strings.Join(targets, `", "`) + `"]`
}

// appended is the receiving Prometheus's count of samples appended to its head.
func appended(t *testing.T, p *prom.Server) float64 {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var total float64
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "prometheus_tsdb_head_samples_appended_total") {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			total += v
		}
	}
	return total
}

// seriesIn is the number of series in the receiving Prometheus's head.
func seriesIn(t *testing.T, p *prom.Server) int {
	t.Helper()
	s, err := p.Query(`count({__name__=~".+"})`)
	if err != nil || len(s) != 1 {
		t.Fatalf("counting series: %v %v", s, err)
	}
	return int(s[0].Value)
}

type measurement struct {
	cpu, samples float64
	peakRSS      int64
}

// measure waits `warm`, then samples CPU, RSS and appended samples over `window`.
func measure(t *testing.T, p *prom.Server, pipeline *proc.Process, warm, window time.Duration) measurement {
	t.Helper()
	time.Sleep(warm)
	cpu0, s0 := cpuOf(t, pipeline), appended(t, p)
	var peak int64
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if r, err := pipeline.RSS(); err == nil {
			peak = max(peak, r)
		}
	}
	return measurement{cpu: cpuOf(t, pipeline) - cpu0, samples: appended(t, p) - s0, peakRSS: peak}
}

// benchRounds is BENCH_ROUNDS, or def when it is unset or not a positive number.
func benchRounds(def int) int {
	if v, err := strconv.Atoi(os.Getenv("BENCH_ROUNDS")); err == nil && v > 0 {
		return v
	}
	return def
}

func benchEnv(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// startNative runs the shipped agent (configs/agent.yaml, without k8s_attributes, which
// needs an API server) with one simulated DGX H100 per 8 GPUs. Each DGX is its own
// receiver with its own host name, as 8 nodes' agents would be, so that node-level series
// (nvidia_gpu_count, nvidia_nvml_available) stay distinct.
func startNative(t *testing.T, p *prom.Server, gpus int, interval time.Duration, overlays ...string) *proc.Process {
	t.Helper()
	var recv, names strings.Builder
	for i := range gpus / 8 {
		fmt.Fprintf(&recv, "  gpu/%d:\n    backend: simulated\n    collection_interval: %s\n    host_name: bench-node-%d\n    simulated: {system: dgxh100, scenario: shared-gpu, seed: %d}\n", i, interval, i, i+1)
		fmt.Fprintf(&names, "gpu/%d, ", i)
	}
	overlay := filepath.Join(t.TempDir(), "bench-receivers.yaml")
	cfg := fmt.Sprintf("receivers:\n%sservice:\n  pipelines:\n    metrics:\n      receivers: [%s]\n      processors: [memory_limiter, gpu_enrich, batch]\n",
		recv.String(), strings.TrimSuffix(names.String(), ", "))
	if err := os.WriteFile(overlay, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	health := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	env := []string{
		"PROMETHEUS_REMOTE_WRITE_URL=" + p.RemoteWriteURL(),
		// Read only with the OTLP overlay (otlpNode's URL).
		"PROMETHEUS_OTLP_URL=http://" + p.Addr + "/api/v1/otlp/v1/metrics",
		"OTELCOL_GPU_WAL_DIR=" + t.TempDir(),
		"OTELCOL_GPU_QUEUE_DIR=" + t.TempDir(),
		"OTELCOL_GPU_KUBELET_SOCKET=unix://" + filepath.Join(t.TempDir(), "no-kubelet.sock"),
		"OTELCOL_GPU_PROC_ROOT=" + t.TempDir(),
		"OTELCOL_GPU_POD_LOGS_DIR=" + t.TempDir(),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", proc.FreePort(t)),
	}
	// As the shipped DaemonSets and systemd unit run it.
	env = append(env, proc.ShippedRuntimeEnv(t)...)
	// Variations to measure, e.g. BENCH_NATIVE_ENV=GOGC=200 or
	// BENCH_AGENT_SETS=service::pipelines::metrics::processors=[memory_limiter,gpu_enrich].
	env = append(env, strings.Fields(os.Getenv("BENCH_NATIVE_ENV"))...)
	configs := []string{filepath.Join(proc.RepoRoot(), "configs", "agent.yaml")}
	for _, o := range overlays {
		configs = append(configs, filepath.Join(proc.RepoRoot(), o))
	}
	return proc.Agent(t, "native", env, append(configs, overlay), health, strings.Fields(os.Getenv("BENCH_AGENT_SETS"))...)
}

// startPrometheusAgent runs Prometheus in agent mode, scraping the targets every interval
// and remote-writing to rw (path b).
func startPrometheusAgent(t *testing.T, promBin string, targets []string, interval time.Duration, rw string) *proc.Process {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "agent.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("global: {scrape_interval: %s}\nscrape_configs:\n  - job_name: dcgm-exporter\n    static_configs: [{targets: %s}]\nremote_write:\n  - url: %s\n", interval, yamlTargets(targets), rw)), 0o600); err != nil {
		t.Fatal(err)
	}
	return proc.Start(t, "prometheus-agent", nil, promBin, prom.AgentModeFlag(t), "--config.file="+cfg,
		"--storage.agent.path="+t.TempDir(), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", proc.FreePort(t)))
}

func scrapeConfig(t *testing.T, targets []string, interval time.Duration, rw string) string {
	return fmt.Sprintf(`receivers:
  prometheus:
    config:
      scrape_configs:
        - job_name: dcgm-exporter
          scrape_interval: %s
          static_configs: [{targets: %s}]
processors:
  memory_limiter: {check_interval: 1s, limit_mib: 200, spike_limit_mib: 50}
  batch: {timeout: 200ms, send_batch_size: 4096}
exporters:
  prometheus_remote_write:
    http: {endpoint: %s}
    translation_strategy: UnderscoreEscapingWithoutSuffixes
    target_info: {enabled: false}
    disable_scope_info: true
    max_batch_request_parallelism: 1
    retry_on_failure: {enabled: true, max_elapsed_time: 0s}
extensions:
  health_check: {endpoint: %%s}
service:
  extensions: [health_check]
  telemetry: {metrics: {level: none}}
  pipelines:
    metrics: {receivers: [prometheus], processors: [memory_limiter, batch], exporters: [prometheus_remote_write]}
`, interval, yamlTargets(targets), rw)
}

// startScrapeCollector runs path c's collector, bin/otelcol-scrape (a stock build with the
// prometheus receiver, which otelcol-gpu leaves out; make bench-pipelines builds it).
func startScrapeCollector(t *testing.T, name, cfgTemplate string) *proc.Process {
	t.Helper()
	health := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(cfgTemplate, health)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := proc.Start(t, name, nil, proc.BuiltTool(t, "otelcol-scrape"), "--config", path)
	p.WaitHTTP200(t, "http://"+health+"/", 60*time.Second)
	return p
}

// benchSizes are the GPU counts and intervals to run (BENCH_GPUS, BENCH_INTERVALS).
func benchSizes(t *testing.T) ([]int, []time.Duration) {
	gpus, intervals := []int{8, 64}, []time.Duration{time.Second, 10 * time.Second}
	if v := os.Getenv("BENCH_GPUS"); v != "" {
		gpus = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n%8 != 0 {
				t.Fatalf("BENCH_GPUS: %q is not a multiple of 8", f)
			}
			gpus = append(gpus, n)
		}
	}
	if v := os.Getenv("BENCH_INTERVALS"); v != "" {
		intervals = nil
		for _, f := range strings.Split(v, ",") {
			d, err := time.ParseDuration(f)
			if err != nil {
				t.Fatalf("BENCH_INTERVALS: %v", err)
			}
			intervals = append(intervals, d)
		}
	}
	return gpus, intervals
}

func TestPipelinesSideBySide(t *testing.T) {
	warm, window := benchEnv("BENCH_WARMUP", 15*time.Second), benchEnv("BENCH_WINDOW", 60*time.Second)
	rounds := benchRounds(1)
	promBin := prom.Binary(t)
	gpuCounts, intervals := benchSizes(t)
	var table strings.Builder
	fmt.Fprintf(&table, "\n| GPUs | interval | path | series/GPU | samples/s | CPU ms per 1000 samples | CPU ms per GPU-minute | peak RSS MiB |\n|---|---|---|---|---|---|---|---|\n")
	if rounds > 1 {
		fmt.Fprintf(&table, "| | | medians of %d rounds, each running every path in turn | | | | | |\n", rounds)
	}
	const (
		native = "a) native"
		otlp   = "a'') native, OTLP into Prometheus 3"
		wal    = "a') native + WAL overlay"
	)
	for _, gpus := range gpuCounts {
		for _, interval := range intervals {
			// Each round runs every path once, in turn, so that a drift of the machine's
			// speed during the run weighs on every path alike.
			results := newPathResults(gpus, window)
			nativePerGPU := 0
			for round := range rounds {
				p := prom.Start(t, "")
				agent := startNative(t, p, gpus, interval)
				nativeRun := measure(t, p, agent, warm, window)
				results.add(t, native, p, nativeRun)
				agent.Stop(10 * time.Second)
				if round == 0 {
					// The samples a GPU sends per collection: fewer than its series at
					// intervals under 10 s, where steady series are sent on change and
					// every 10 s.
					nativePerGPU = int(math.Round(nativeRun.samples / window.Seconds() * interval.Seconds() / float64(gpus)))
				}
				p.Stop()
				if os.Getenv("BENCH_NATIVE_ONLY") != "" {
					continue // measuring a variation of the native agent (BENCH_NATIVE_ENV, BENCH_AGENT_SETS)
				}

				// The same agent with native OTLP into Prometheus 3 instead of remote-write.
				p = startPrometheusOTLP(t)
				agent = startNative(t, p, gpus, interval, "deploy/config-overlays/prometheus-otlp.yaml")
				results.add(t, otlp, p, measure(t, p, agent, warm, window))
				agent.Stop(10 * time.Second)
				p.Stop()

				// The opt-in WAL overlay, to show what durability across a SIGKILL costs.
				p = prom.Start(t, "")
				agent = startNative(t, p, gpus, interval, "deploy/config-overlays/remote-write-wal.yaml")
				results.add(t, wal, p, measure(t, p, agent, warm, window))
				agent.Stop(10 * time.Second)
				p.Stop()

				for _, size := range benchExpositionSizes(nativePerGPU) {
					targets := dcgmExpositions(t, gpus, size.perGPU)
					p = prom.Start(t, "")
					promAgent := startPrometheusAgent(t, promBin, targets, interval, p.RemoteWriteURL())
					results.add(t, size.agentPath(), p, measure(t, p, promAgent, warm, window))
					promAgent.Stop(10 * time.Second)
					p.Stop()

					p = prom.Start(t, "")
					scraper := startScrapeCollector(t, "collector-scrape", scrapeConfig(t, targets, interval, p.RemoteWriteURL()))
					results.add(t, size.collectorPath(), p, measure(t, p, scraper, warm, window))
					scraper.Stop(10 * time.Second)
					p.Stop()
				}
			}
			results.write(&table, interval)
			if os.Getenv("BENCH_NATIVE_ONLY") != "" {
				continue
			}
			costs, perMinute := results.median(results.perK), results.median(results.perGPUMinute)
			for _, size := range benchExpositionSizes(nativePerGPU) {
				b, c := size.agentPath(), size.collectorPath()
				fmt.Fprintf(&table, "| %d | %s | ratio a/b, a/c, a''/b (%s) | | | %.2f, %.2f, %.2f | %.2f, %.2f, %.2f | |\n", gpus, interval, size.label,
					costs[native]/costs[b], costs[native]/costs[c], costs[otlp]/costs[b],
					perMinute[native]/perMinute[b], perMinute[native]/perMinute[c], perMinute[otlp]/perMinute[b])
			}
		}
	}
	t.Log(table.String())
}

// expositionSize is one of the two dcgm-exporter expositions paths b and c scrape.
type expositionSize struct {
	label  string
	perGPU int
}

func (s expositionSize) agentPath() string { return "b) dcgm (" + s.label + ") + Prometheus agent" }

func (s expositionSize) collectorPath() string {
	return "c) dcgm (" + s.label + ") + collector prometheus receiver"
}

// benchExpositionSizes: dcgm-exporter's default fields, and an exposition padded to the
// samples per GPU per collection the native agent sends.
func benchExpositionSizes(nativePerGPU int) []expositionSize {
	return []expositionSize{{"21 default fields", len(dcgmFields)}, {"same volume", nativePerGPU}}
}

// pathResults are each path's measurements over the rounds of one table size.
type pathResults struct {
	gpus   int
	window time.Duration
	order  []string
	series map[string]int
	runs   map[string][]measurement
}

func newPathResults(gpus int, window time.Duration) *pathResults {
	return &pathResults{gpus: gpus, window: window, series: map[string]int{}, runs: map[string][]measurement{}}
}

// add records one round of a path, and the series per GPU its Prometheus received.
func (r *pathResults) add(t *testing.T, path string, p *prom.Server, m measurement) {
	if _, seen := r.runs[path]; !seen {
		r.order = append(r.order, path)
	}
	r.series[path] = seriesIn(t, p) / r.gpus
	r.runs[path] = append(r.runs[path], m)
	t.Logf("%d GPUs, %s, round %d: %.1f ms per GPU-minute, %.0f samples/s", r.gpus, path, len(r.runs[path]), r.perGPUMinute(m), r.samplesPerSecond(m))
}

func (r *pathResults) perK(m measurement) float64 { return m.cpu * 1000 / max(m.samples, 1) * 1000 }

func (r *pathResults) perGPUMinute(m measurement) float64 {
	return m.cpu * 1000 / float64(r.gpus) / r.window.Minutes()
}

func (r *pathResults) samplesPerSecond(m measurement) float64 { return m.samples / r.window.Seconds() }

// median is each path's median of f over its rounds.
func (r *pathResults) median(f func(measurement) float64) map[string]float64 {
	out := map[string]float64{}
	for path, runs := range r.runs {
		vs := make([]float64, len(runs))
		for i, m := range runs {
			vs[i] = f(m)
		}
		out[path] = medianOf(vs)
	}
	return out
}

// write adds a row per path: its medians, and the highest peak RSS of its rounds.
// medianOf is the median of vs (left unsorted).
func medianOf(vs []float64) float64 {
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func (r *pathResults) write(table *strings.Builder, interval time.Duration) {
	samples, perK, perMinute := r.median(r.samplesPerSecond), r.median(r.perK), r.median(r.perGPUMinute)
	for _, path := range r.order {
		var peak int64
		for _, m := range r.runs[path] {
			peak = max(peak, m.peakRSS)
		}
		fmt.Fprintf(table, "| %d | %s | %s | %d | %.0f | %.2f | %.1f | %d |\n", r.gpus, interval, path,
			r.series[path], samples[path], perK[path], perMinute[path], peak>>20)
	}
}

// TestFreshness measures, for the native path at a 1 s interval with the shipped agent
// configuration, how long after a value is read from the (simulated) GPU it becomes
// visible through PromQL: poll the newest sample's timestamp every 50 ms and record, for
// each new sample, now − its timestamp. The simulator's values change every second, so the
// change-to-read delay adds up to one interval on top (uniform, 0.5 s on average).
func TestFreshness(t *testing.T) {
	window := benchEnv("BENCH_WINDOW", 60*time.Second)
	p := prom.Start(t, "")
	// The shipped agent configuration (its batch timeout decides most of the latency), but
	// for the interval (and BENCH_AGENT_SETS overrides).
	startAgentOn(t, p, "fresh", "dgxh100", "steady-training", agentNode{sets: strings.Fields(os.Getenv("BENCH_AGENT_SETS"))})
	q := `timestamp(hw_power_watts{host_name="fresh",nvidia_gpu_index="0"})`
	prom.Eventually(t, 60*time.Second, "first sample", func() error {
		s, err := p.Query(q)
		if err != nil || len(s) != 1 {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})
	// Every sample counts, not only the newest: a batch of several lands at once, and its
	// older samples waited longer.
	seen := map[int64]bool{}
	baseline := true // samples already there at the first look have no known arrival time
	var lat []float64
	for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		series, err := p.QueryRange(`hw_power_watts{host_name="fresh",nvidia_gpu_index="0"}[20s]`)
		if err != nil || len(series) != 1 {
			continue
		}
		now := time.Now()
		for _, pt := range series[0].Points {
			if key := pt.T.UnixMilli(); !seen[key] {
				seen[key] = true
				if !baseline {
					lat = append(lat, now.Sub(pt.T).Seconds())
				}
			}
		}
		baseline = false
	}
	sort.Float64s(lat)
	if len(lat) == 0 {
		t.Fatal("no new samples")
	}
	pct := func(q float64) float64 { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	t.Logf("\nfreshness (read → visible in PromQL), %d samples: p50 %.2f s, p99 %.2f s, max %.2f s", len(lat), pct(0.5), pct(0.99), lat[len(lat)-1])
}
