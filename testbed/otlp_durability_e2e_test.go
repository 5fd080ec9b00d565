//go:build e2e

package testbed

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// The shipped OTLP overlay (deploy/config-overlays/prometheus-otlp.yaml) queues on disk: an
// outage, a SIGTERM during an outage and a SIGKILL during an outage lose no sample. Each
// test runs the agent with a second exporter in the same pipeline, into a reference
// backend that is never down: what the reference holds is what the agent produced (every
// collection's timestamp, on every series), and the backend under test must end up with
// all of it, same series, same labels, same timestamps.

// durableNode is an agent on the shipped OTLP overlay into backend (its on-disk queue in
// queueDir), that also sends everything to ref through an in-memory exporter.
func durableNode(t *testing.T, backendURL, refURL, queueDir string) agentNode {
	t.Helper()
	ref := filepath.Join(t.TempDir(), "reference.yaml")
	cfg := fmt.Sprintf(`exporters:
  otlp_http/reference:
    metrics_endpoint: %s
    compression: gzip
    sending_queue: {enabled: true, num_consumers: 1, queue_size: 10000}
    retry_on_failure: {enabled: true, initial_interval: 1s, max_interval: 2s, max_elapsed_time: 0s}
service:
  pipelines:
    metrics:
      exporters: [otlp_http/prometheus, otlp_http/reference]
`, refURL)
	if err := os.WriteFile(ref, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(filepath.Join(proc.RepoRoot(), "configs"), ref)
	if err != nil {
		t.Fatal(err)
	}
	return agentNode{
		overlays: []string{otlpOverlay, rel},
		env:      []string{"PROMETHEUS_OTLP_URL=" + backendURL},
		queueDir: queueDir,
	}
}

func otlpURL(p *prom.Server) string { return "http://" + p.Addr + "/api/v1/otlp/v1/metrics" }

// samplesOf is every sample of host's series in p since since, each as "labels@ms".
func samplesOf(p *prom.Server, host string, since time.Time) (map[string]time.Time, error) {
	series, err := p.QueryRange(fmt.Sprintf(`{host_name=%q}[%ds]`, host, int(math.Ceil(time.Since(since).Seconds()))+1))
	if err != nil {
		return nil, err
	}
	out := map[string]time.Time{}
	for _, s := range series {
		var kv []string
		for k, v := range s.Labels {
			kv = append(kv, k+"="+v)
		}
		sort.Strings(kv)
		key := strings.Join(kv, ",")
		for _, pt := range s.Points {
			out[fmt.Sprintf("%s@%d", key, pt.T.UnixMilli())] = pt.T
		}
	}
	return out, nil
}

// everySampleArrives waits until got holds every sample that ref holds for host with a
// timestamp in [from, to] (at least minSamples of them), and returns how many that was.
// renamed maps the metric names that got names otherwise (ref's name → got's).
func everySampleArrives(t *testing.T, host string, ref, got *prom.Server, gotName string, from, to time.Time, minSamples int, renamed map[string]string) int {
	t.Helper()
	var want int
	prom.Eventually(t, 120*time.Second, "every sample of the reference in "+gotName, func() error {
		if time.Now().Before(to.Add(3 * time.Second)) {
			return fmt.Errorf("the window ends at %s", to.Format(time.TimeOnly))
		}
		r, err := samplesOf(ref, host, from.Add(-time.Second))
		if err != nil {
			return fmt.Errorf("reference: %w", err)
		}
		g, err := samplesOf(got, host, from.Add(-time.Second))
		if err != nil {
			return fmt.Errorf("%s: %w", gotName, err)
		}
		want = 0
		var missing []string
		for k, ts := range r {
			if ts.Before(from) || ts.After(to) {
				continue
			}
			want++
			if name, rest, ok := strings.Cut(strings.TrimPrefix(k, "__name__="), ","); ok && renamed[name] != "" {
				k = "__name__=" + renamed[name] + "," + rest
			}
			if _, ok := g[k]; !ok {
				missing = append(missing, k)
			}
		}
		if want < minSamples {
			return fmt.Errorf("the reference holds only %d samples in the window, want at least %d", want, minSamples)
		}
		if len(missing) > 0 {
			// Per metric: how many samples lack, and whether the series is there at all.
			series := map[string]bool{}
			for k := range g {
				series[k[:strings.LastIndexByte(k, '@')]] = true
			}
			perName := map[string]int{}
			var seriesMissing []string
			for _, k := range missing {
				key := k[:strings.LastIndexByte(k, '@')]
				name, _, _ := strings.Cut(strings.TrimPrefix(key, "__name__="), ",")
				perName[name]++
				if !series[key] && !slices.Contains(seriesMissing, key) {
					seriesMissing = append(seriesMissing, key)
				}
			}
			sort.Strings(missing)
			sort.Strings(seriesMissing)
			return fmt.Errorf("%s lacks %d of the %d samples the agent produced (by metric: %v; %d series not there at all, e.g. %v), e.g.\n  %s",
				gotName, len(missing), want, perName, len(seriesMissing), firstN(seriesMissing, 3), strings.Join(firstN(missing, 5), "\n  "))
		}
		return nil
	})
	t.Logf("%s: all %d samples the agent produced between %s and %s delivered", gotName, want, from.Format(time.TimeOnly), to.Format(time.TimeOnly))
	return want
}

// seriesCount is how many series host has in p now.
func seriesCount(t *testing.T, p *prom.Server, host string) int {
	t.Helper()
	s, err := p.Query(fmt.Sprintf(`count({host_name=%q})`, host))
	if err != nil || len(s) != 1 {
		t.Fatalf("series of %s: %v %v", host, s, err)
	}
	return int(s[0].Value)
}

// waitForSamples waits until host's GPU 0 utilization has n samples in p.
func waitForSamples(t *testing.T, p *prom.Server, host string, n int) {
	t.Helper()
	prom.Eventually(t, 60*time.Second, "first samples", func() error {
		s, err := p.Query(fmt.Sprintf(`count_over_time(hw_gpu_utilization_ratio{host_name=%q,nvidia_gpu_index="0",hw_gpu_task="general"}[1m])`, host))
		if err != nil || len(s) != 1 || s[0].Value < float64(n) {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})
}

// queueBytes is the size on disk of the files in dir.
func queueBytes(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
	}
	return n
}

// TestOTLPOutageLosesNoSample: Prometheus 3 is down for 20 s while the agent runs; when
// it is back, every sample of every series the agent produced meanwhile is there.
func TestOTLPOutageLosesNoSample(t *testing.T) {
	ref, p := startPrometheusOTLP(t), startPrometheusOTLP(t)
	const host = "otlp-outage"
	start := time.Now()
	startAgentOn(t, p, host, "dgxh100", "shared-gpu", durableNode(t, otlpURL(p), otlpURL(ref), ""))
	waitForSamples(t, p, host, 5)

	p.Stop()
	down := time.Now()
	time.Sleep(20 * time.Second)
	p.Restart(t)
	up := time.Now()
	t.Logf("outage %s", up.Sub(down).Round(100*time.Millisecond))

	everySampleArrives(t, host, ref, p, "Prometheus 3", start, up.Add(10*time.Second), 10*seriesCount(t, ref, host), nil)
}

// TestOTLPSigtermDuringOutageExitsAndKeepsTheQueue: Prometheus 3 hangs (accepts
// connections, answers nothing) for 15 s; the agent gets SIGTERM then, exits well within
// the 30 s grace period, and the agent started again on the same queue directory once
// Prometheus is back delivers every sample, those it held at the SIGTERM included.
func TestOTLPSigtermDuringOutageExitsAndKeepsTheQueue(t *testing.T) {
	ref, p := startPrometheusOTLP(t), startPrometheusOTLP(t)
	const host = "otlp-sigterm"
	queue := t.TempDir()
	node := durableNode(t, otlpURL(p), otlpURL(ref), queue)
	start := time.Now()
	agent := startAgentOn(t, p, host, "dgxh100", "shared-gpu", node)
	waitForSamples(t, p, host, 5)

	p.Process().Pause()
	time.Sleep(15 * time.Second)
	sigterm := time.Now()
	agent.Signal(syscall.SIGTERM)
	select {
	case <-agent.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the agent was still running 30 s after SIGTERM (the grace period before SIGKILL)")
	}
	took := time.Since(sigterm)
	t.Logf("the agent exited %s after SIGTERM with Prometheus hanging; queue on disk: %d KiB", took.Round(10*time.Millisecond), queueBytes(t, queue)>>10)
	// One HTTP attempt (the overlay's 5 s timeout) at most, and the shutdown itself.
	if took > 10*time.Second {
		t.Errorf("the agent took %s to stop", took)
	}

	p.Process().Resume()
	startAgentOn(t, p, host, "dgxh100", "shared-gpu", node)
	everySampleArrives(t, host, ref, p, "Prometheus 3", start, sigterm, 10*seriesCount(t, ref, host), nil)
}

// TestOTLPKilledDuringOutageDeliversItsQueueAfterRestart: Prometheus 3 is down, the agent
// queues for 15 s and is killed (SIGKILL: nothing flushed); started again on the same queue
// directory after Prometheus is back, it delivers every sample it had queued, and every
// sample it produces after the restart. Only what the batch processor held at the kill
// (its 1 s timeout's worth, never on disk) may be missing: the reference's samples of the
// last 2 s before the kill (that second, and a collection's own time) are left out.
func TestOTLPKilledDuringOutageDeliversItsQueueAfterRestart(t *testing.T) {
	ref, p := startPrometheusOTLP(t), startPrometheusOTLP(t)
	const host = "otlp-killed"
	queue := t.TempDir()
	node := durableNode(t, otlpURL(p), otlpURL(ref), queue)
	start := time.Now()
	agent := startAgentOn(t, p, host, "dgxh100", "shared-gpu", node)
	waitForSamples(t, p, host, 5)

	p.Stop()
	down := time.Now()
	time.Sleep(15 * time.Second)
	agent.Kill()
	killed := time.Now()
	onDisk := queueBytes(t, queue)
	t.Logf("killed after %s of outage; queue on disk: %d KiB", killed.Sub(down).Round(100*time.Millisecond), onDisk>>10)

	p.Restart(t)
	restarted := time.Now()
	startAgentOn(t, p, host, "dgxh100", "shared-gpu", node)
	n := seriesCount(t, ref, host)
	everySampleArrives(t, host, ref, p, "Prometheus 3 (before the kill)", start, killed.Add(-2*time.Second), 10*n, nil)
	everySampleArrives(t, host, ref, p, "Prometheus 3 (after the restart)", restarted, restarted.Add(10*time.Second), 3*n, nil)
}

// vmRenamed are the metrics VictoriaMetrics (v1.151, -opentelemetry.usePrometheusNaming)
// names otherwise than Prometheus 3 and remote-write: it appends _ratio to every metric of
// unit "1", where Prometheus's translator does so for gauges only, so these up-down
// counters (state flags) get it there alone. Every other name and label set is the same.
var vmRenamed = func() map[string]string {
	m := map[string]string{}
	for _, n := range []string{
		"hw_status", "nvidia_gpu_clock_event_active", "nvidia_gpu_memory_remap_failed",
		"nvidia_gpu_memory_remap_pending", "nvidia_gpu_memory_retired_pages_pending",
		"nvidia_gpu_nvlink_state", "nvidia_gpu_processes_hidden", "nvidia_nvml_available",
		"nvidia_gpu_bottleneck", "nvidia_gpu_idle_while_allocated", "nvidia_gpu_memory_leak_suspected",
		"nvidia_gpu_pod_memory_leak_suspected", "nvidia_gpu_throttled",
	} {
		m[n] = n + "_ratio"
	}
	return m
}()

// TestOTLPKilledDuringOutageIntoVictoriaMetrics: the same SIGKILL during an outage, with
// VictoriaMetrics (its OTLP endpoint, Prometheus naming) as the backend and Prometheus 3 as
// the reference: VictoriaMetrics ends up with every sample, under the label sets of
// Prometheus 3 (and so of remote-write), and the same names but vmRenamed's.
func TestOTLPKilledDuringOutageIntoVictoriaMetrics(t *testing.T) {
	ref := startPrometheusOTLP(t)
	vm := prom.StartVictoriaMetrics(t, "-opentelemetry.usePrometheusNaming", "-opentelemetry.promoteScopeMetadata=false")
	const host = "otlp-vm-killed"
	queue := t.TempDir()
	node := durableNode(t, "http://"+vm.Addr+"/opentelemetry/v1/metrics", otlpURL(ref), queue)
	start := time.Now()
	agent := startAgentOn(t, vm, host, "dgxh100", "shared-gpu", node)
	waitForSamples(t, vm, host, 5)

	vm.Stop()
	time.Sleep(15 * time.Second)
	agent.Kill()
	killed := time.Now()
	vm.Restart(t)
	startAgentOn(t, vm, host, "dgxh100", "shared-gpu", node)
	everySampleArrives(t, host, ref, vm, "VictoriaMetrics", start, killed.Add(-2*time.Second), 10*seriesCount(t, ref, host), vmRenamed)
}

// TestOTLPQueueDirectoryThatCannotBeWrittenIsAClearError: the agent on the OTLP overlay does
// not start when OTELCOL_GPU_QUEUE_DIR cannot be created or written, and says which
// directory and why.
func TestOTLPQueueDirectoryThatCannotBeWrittenIsAClearError(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not under t.TempDir(), whose top directory only its owner may enter.
	parent, err := os.MkdirTemp("", "otelcol-gpu-queue-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	readOnly := filepath.Join(parent, "read-only")
	if err := os.Mkdir(readOnly, 0o555); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dir string
		asNobody  bool
		want      []string
	}{
		{"under a file", filepath.Join(notADir, "queue"), false, []string{"file_storage/queue", notADir, "not a directory"}},
		{"not creatable", "/proc/otelcol-gpu-queue", false, []string{`failed to create extension "file_storage/queue"`, "mkdir /proc/otelcol-gpu-queue"}},
		{"read-only", readOnly, true, []string{`failed to start "otlp_http/prometheus" exporter`, readOnly, "permission denied"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := proc.AgentBinary(t)
			args := []string{"--config", filepath.Join(proc.RepoRoot(), "configs", "agent.yaml"),
				"--config", filepath.Join(proc.RepoRoot(), "deploy", "config-overlays", "prometheus-otlp.yaml"),
				"--set", "receivers::gpu::backend=simulated",
				"--set", "service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,batch]"}
			if c.asNobody && os.Geteuid() == 0 {
				// root writes anywhere: run the agent as nobody, as a non-root pod would.
				args = append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)
				bin = "setpriv"
			}
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(),
				"OTELCOL_GPU_QUEUE_DIR="+c.dir,
				"PROMETHEUS_OTLP_URL=http://127.0.0.1:1/api/v1/otlp/v1/metrics",
				"OTELCOL_GPU_KUBELET_SOCKET=unix://"+filepath.Join(t.TempDir(), "none.sock"),
				"OTELCOL_GPU_PROC_ROOT="+t.TempDir(),
				fmt.Sprintf("OTELCOL_GPU_HEALTH_ENDPOINT=127.0.0.1:%d", proc.FreePort(t)),
				fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", proc.FreePort(t)))
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("the agent was still running after 30 s with queue directory %s:\n%s", c.dir, tail(string(out), 3000))
			}
			if err == nil {
				t.Fatalf("the agent exited 0 with queue directory %s", c.dir)
			}
			last := string(out)
			if i := strings.LastIndex(last, "Error: "); i >= 0 {
				last = last[i:]
			}
			for _, w := range c.want {
				if !strings.Contains(last, w) {
					t.Errorf("the agent's error does not say %q:\n%s", w, tail(string(out), 3000))
				}
			}
			t.Logf("%s", strings.TrimSpace(last))
		})
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// TestOTLPFromTheGatewayTier: a gateway on configs/gateway.yaml with the OTLP overlays
// (prometheus-otlp.yaml, then prometheus-otlp-gateway.yaml, which keeps its agents'
// authenticator started) sends what an agent in gateway mode gives it to Prometheus 3 over
// OTLP, through its own on-disk queue: the series arrive with their identity.
func TestOTLPFromTheGatewayTier(t *testing.T) {
	p := startPrometheusOTLP(t)
	auth := newGatewayAuth(t)
	overlays := filepath.Join(proc.RepoRoot(), "deploy", "config-overlays")
	queue := t.TempDir()
	otlp, _ := startGateway(t, p.RemoteWriteURL(), auth, []string{
		filepath.Join(proc.RepoRoot(), "configs", "gateway.yaml"),
		filepath.Join(overlays, "prometheus-otlp.yaml"),
		filepath.Join(overlays, "prometheus-otlp-gateway.yaml"),
	}, "processors::batch::timeout=1s",
		"exporters::otlp_http/prometheus::metrics_endpoint="+otlpURL(p),
		"extensions::file_storage/queue::directory="+queue)
	startAgentToGateway(t, auth, otlp, "otlp-gw-node", t.TempDir())
	prom.Eventually(t, 90*time.Second, "series from the gateway over OTLP", func() error {
		return eightGPUsWithIdentity(p, `hw_gpu_utilization_ratio{hw_gpu_task="general"}`, "otlp-gw-node")
	})
	if entries, err := os.ReadDir(queue); err != nil || len(entries) == 0 {
		t.Errorf("the gateway's queue directory %s holds nothing (%v): the overlay's queue is not the one in use", queue, err)
	}
}
