//go:build e2e

package testbed

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestPrometheusOutageLosesNoSample: with the shipped agent configuration (requests queued
// in memory, each retried for up to 25 s), Prometheus goes away for 20 s (a restart),
// missing twenty batches, and comes back: every sample the agent produced in the meantime
// arrives, and nothing is logged as dropped.
func TestPrometheusOutageLosesNoSample(t *testing.T) {
	p := prom.Start(t, "")
	agent := startAgentOn(t, p, "e2e-outage", "dgxh100", "steady-training", agentNode{})
	series := `hw_energy_joules_total{host_name="e2e-outage",nvidia_gpu_index="0"}`
	// At least 5 samples before the outage: the window checked below starts 3 s before
	// it, and must not start before the agent's first sample.
	prom.Eventually(t, 60*time.Second, "samples before the outage", func() error {
		s, err := p.Query(`count_over_time(` + series + `[1m])`)
		if err != nil || len(s) != 1 || s[0].Value < 5 {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})

	p.Stop()
	down := time.Now()
	time.Sleep(20 * time.Second) // 20 scrapes at 1 s, 20 requests
	p.Restart(t)
	up := time.Now()
	t.Logf("Prometheus down for %s", up.Sub(down).Round(10*time.Millisecond))

	// Every second between well before the outage and well after it has its sample.
	from, to := down.Add(-3*time.Second), up.Add(5*time.Second)
	prom.Eventually(t, 90*time.Second, "the outage's samples arrive", func() error {
		pts, err := p.QueryRange(fmt.Sprintf(`%s[%ds]`, series, int(math.Ceil(time.Since(from).Seconds()))))
		if err != nil {
			return err
		}
		if len(pts) != 1 {
			return fmt.Errorf("%d series", len(pts))
		}
		var n int
		var gap time.Duration
		var first, prev time.Time
		for _, pt := range pts[0].Points {
			if pt.T.Before(from) || pt.T.After(to) {
				continue
			}
			if first.IsZero() {
				first = pt.T
			}
			if !prev.IsZero() && pt.T.Sub(prev) > gap {
				gap = pt.T.Sub(prev)
			}
			prev = pt.T
			n++
		}
		want := int(to.Sub(from).Seconds())
		if time.Now().Before(to) || n < want-1 || gap > 1500*time.Millisecond {
			// Where the samples start and end, relative to the outage, says which edge lacks.
			return fmt.Errorf("%d samples in %s (want %d), largest gap %s; outage %s..%s, samples %s..%s (times from the outage's start)",
				n, to.Sub(from), want, gap, time.Duration(0), up.Sub(down).Round(time.Millisecond),
				first.Sub(down).Round(time.Millisecond), prev.Sub(down).Round(time.Millisecond))
		}
		return nil
	})
	if strings.Contains(agent.Output(), "Dropping data") {
		t.Error("the agent dropped data during a 20 s outage")
	}
}

// TestKilledAgentDeliversItsWALAfterRestart: with the opt-in WAL overlay, Prometheus is
// down, the agent buffers in its WAL and is killed (SIGKILL: nothing flushed); restarted on
// the same WAL directory once Prometheus is back, it delivers what it had buffered.
func TestKilledAgentDeliversItsWALAfterRestart(t *testing.T) {
	p := prom.Start(t, "")
	wal := t.TempDir()
	node := agentNode{walDir: wal, overlays: []string{"../deploy/config-overlays/remote-write-wal.yaml"}}
	p.Stop()
	agent := startAgentOn(t, p, "e2e-crash", "dgxh100", "steady-training", node)
	bufferedFrom := time.Now()
	time.Sleep(8 * time.Second)
	agent.Kill()
	bufferedTo := time.Now()

	p.Restart(t)
	startAgentOn(t, p, "e2e-crash", "dgxh100", "steady-training", node)
	series := `hw_energy_joules_total{host_name="e2e-crash",nvidia_gpu_index="0"}`
	prom.Eventually(t, 90*time.Second, "samples buffered before the kill", func() error {
		pts, err := p.QueryRange(fmt.Sprintf(`%s[%ds]`, series, int(math.Ceil(time.Since(bufferedFrom).Seconds()))+1))
		if err != nil {
			return err
		}
		n := 0
		for _, s := range pts {
			for _, pt := range s.Points {
				if !pt.T.Before(bufferedFrom) && pt.T.Before(bufferedTo) {
					n++
				}
			}
		}
		if n < 5 {
			return fmt.Errorf("%d samples from the %s before the kill arrived", n, bufferedTo.Sub(bufferedFrom).Round(time.Second))
		}
		return nil
	})
}

// TestNVMLAppearingLaterStartsMetricsWithoutRestart: the driver's library is missing when
// the agent starts (it keeps running, reports NVML unavailable) and appears 8 s later:
// GPU metrics start flowing without a restart.
func TestNVMLAppearingLaterStartsMetricsWithoutRestart(t *testing.T) {
	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-late-driver", "dgxh100", "steady-training", agentNode{sets: []string{
		"receivers::gpu::simulated::nvml_missing_for=8s",
		"receivers::gpu::nvml::init_retry::initial_interval=1s",
		"receivers::gpu::nvml::init_retry::max_interval=2s",
	}})
	prom.Eventually(t, 60*time.Second, "NVML reported unavailable", func() error {
		s, err := p.Query(`nvidia_nvml_init_errors_total{host_name="e2e-late-driver",nvidia_nvml_error="ERROR_LIBRARY_NOT_FOUND"} > 0`)
		if err != nil || len(s) != 1 {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})
	prom.Eventually(t, 60*time.Second, "GPU metrics once NVML is there", func() error {
		s, err := p.Query(`count(hw_power_watts{host_name="e2e-late-driver"})`)
		if err != nil || len(s) != 1 || s[0].Value != 8 {
			return fmt.Errorf("%v %v", s, err)
		}
		a, err := p.Query(`nvidia_nvml_available{host_name="e2e-late-driver"}`)
		if err != nil || len(a) != 1 || a[0].Value != 1 {
			return fmt.Errorf("nvidia_nvml_available %v %v", a, err)
		}
		return nil
	})
}

// flakyBackend stands in front of Prometheus's remote-write endpoint and, while broken,
// answers every write slowly (2 s) with 503.
// flakyBackend sits in front of Prometheus: broken, it answers 503 slowly (an overloaded
// backend, worth retrying); rejecting, it answers 400 at once (a request refused for good,
// as Prometheus does for out-of-bounds samples); otherwise it forwards.
type flakyBackend struct {
	broken, rejecting atomic.Bool
	rejected          atomic.Int64
	target            string
}

func (f *flakyBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.broken.Load() {
		time.Sleep(2 * time.Second)
		http.Error(w, "backend overloaded", http.StatusServiceUnavailable)
		return
	}
	if f.rejecting.Load() {
		f.rejected.Add(1)
		http.Error(w, "out of bounds", http.StatusBadRequest)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, f.target, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// TestFailingBackendKeepsMemoryBoundedAndDeliveryResumes: the backend answers 5xx, slowly,
// for 20 s. The agent does not crash, its memory stays within the memory_limiter's bounds,
// and delivery resumes when the backend recovers.
func TestFailingBackendKeepsMemoryBoundedAndDeliveryResumes(t *testing.T) {
	p := prom.Start(t, "")
	flaky := &flakyBackend{target: p.RemoteWriteURL()}
	flaky.broken.Store(true)
	srv := httptest.NewServer(flaky)
	t.Cleanup(srv.Close)

	agent := startAgentOn(t, &prom.Server{Addr: strings.TrimPrefix(srv.URL, "http://")}, "e2e-5xx", "dgxh100", "shared-gpu", agentNode{})
	var peak int64
	for range 20 {
		time.Sleep(time.Second)
		if exited, err := agent.Exited(); exited {
			t.Fatalf("the agent exited while the backend failed: %v", err)
		}
		rss, err := agent.RSS()
		if err != nil {
			t.Fatal(err)
		}
		peak = max(peak, rss)
	}
	t.Logf("peak RSS while the backend failed: %d MiB", peak>>20)
	if peak > 250<<20 { // memory_limiter: 200 MiB limit, 50 MiB spike
		t.Errorf("RSS reached %d MiB", peak>>20)
	}

	flaky.broken.Store(false)
	prom.Eventually(t, 90*time.Second, "delivery resumes", func() error {
		s, err := p.Query(`count(hw_power_watts{host_name="e2e-5xx"})`)
		if err != nil || len(s) != 1 || s[0].Value != 8 {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})
}

// TestRejectedRequestsAreDroppedAndDeliveryGoesOn: the backend refuses every request for
// 5 s with a 400 (as Prometheus does for out-of-order or out-of-bounds samples). The
// shipped agent drops those requests (retrying cannot help) and delivers everything after
// them: one bad batch never stops a node's telemetry.
func TestRejectedRequestsAreDroppedAndDeliveryGoesOn(t *testing.T) {
	p := prom.Start(t, "")
	flaky := &flakyBackend{target: p.RemoteWriteURL()}
	srv := httptest.NewServer(flaky)
	t.Cleanup(srv.Close)
	agent := startAgentOn(t, &prom.Server{Addr: strings.TrimPrefix(srv.URL, "http://")}, "e2e-400", "dgxh100", "steady-training", agentNode{})
	series := `hw_energy_joules_total{host_name="e2e-400",nvidia_gpu_index="0"}`
	prom.Eventually(t, 60*time.Second, "first samples", func() error {
		s, err := p.Query(series)
		if err != nil || len(s) != 1 {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})

	flaky.rejecting.Store(true)
	rejectFrom := time.Now()
	time.Sleep(5 * time.Second)
	flaky.rejecting.Store(false)
	rejectTo := time.Now()
	if flaky.rejected.Load() == 0 {
		t.Fatal("no request reached the rejecting backend")
	}

	// Every second after the rejections has its sample: nothing waits behind the refused
	// requests. Those requests themselves are gone (a 400 is not retried).
	from, to := rejectTo.Add(time.Second), rejectTo.Add(11*time.Second)
	prom.Eventually(t, 60*time.Second, "samples after the rejected requests", func() error {
		pts, err := p.QueryRange(fmt.Sprintf(`%s[%ds]`, series, int(math.Ceil(time.Since(rejectFrom).Seconds()))+2))
		if err != nil || len(pts) != 1 {
			return fmt.Errorf("%v %v", pts, err)
		}
		var after, during int
		for _, pt := range pts[0].Points {
			switch {
			case !pt.T.Before(from) && pt.T.Before(to):
				after++
			case pt.T.After(rejectFrom.Add(time.Second)) && pt.T.Before(rejectTo.Add(-time.Second)):
				during++
			}
		}
		if time.Now().Before(to) || after < 9 {
			return fmt.Errorf("%d samples in the 10 s after the rejections, want 10", after)
		}
		if during > 0 {
			return fmt.Errorf("%d samples from inside the rejected window arrived: the backend refused them", during)
		}
		return nil
	})
	if exited, err := agent.Exited(); exited {
		t.Fatalf("the agent exited: %v", err)
	}
	if !strings.Contains(agent.Output(), "400") {
		t.Error("the agent did not log the rejected requests")
	}
}

// TestXIDStormAndLostGPUKeepTheAgentBounded: one agent whose GPU 0 raises 20 XIDs a
// second, another whose GPU 3 falls off the bus and comes back. The XID counter in
// Prometheus matches what the simulated driver raised, the lost GPU reports failed and then
// ok-with-data again, and neither agent's CPU or memory runs away.
func TestXIDStormAndLostGPUKeepTheAgentBounded(t *testing.T) {
	p := prom.Start(t, "")
	storm := startAgentOn(t, p, "e2e-storm", "dgxh100", "xid-storm", agentNode{})
	lost := startAgentOn(t, p, "e2e-falls", "dgxh100", "gpu-lost", agentNode{})
	start := time.Now()
	cpu0 := map[*proc.Process]float64{storm: cpuOf(t, storm), lost: cpuOf(t, lost)}

	prom.Eventually(t, 90*time.Second, "the lost GPU reports failed, the others ok", func() error {
		failed, err := p.Query(`hw_status{host_name="e2e-falls",hw_state="failed"} == 1`)
		if err != nil || len(failed) != 1 || failed[0].Labels["nvidia_gpu_index"] != "3" {
			return fmt.Errorf("failed GPUs %v %v", failed, err)
		}
		ok, err := p.Query(`count(hw_status{host_name="e2e-falls",hw_state="ok"} == 1)`)
		if err != nil || len(ok) != 1 || ok[0].Value != 7 {
			return fmt.Errorf("ok GPUs %v %v", ok, err)
		}
		return nil
	})
	fellAt := time.Now()
	prom.Eventually(t, 90*time.Second, "the lost GPU reports data again after it returns", func() error {
		// It is off the bus for 20 s and reports no power meanwhile: a sample taken over
		// 10 s after it was seen failed comes from after its return.
		r, err := p.Query(`timestamp(hw_power_watts{host_name="e2e-falls",nvidia_gpu_index="3"})`)
		if err != nil || len(r) != 1 || r[0].Value < float64(fellAt.Add(10*time.Second).Unix()) {
			return fmt.Errorf("GPU 3 has not answered since it fell: %v %v", r, err)
		}
		return nil
	})

	// The storm: 20 XIDs a second since the agent started, counted exactly.
	s, err := p.Query(`nvidia_gpu_xid_errors_total{host_name="e2e-storm",nvidia_gpu_xid="13"}`)
	if err != nil || len(s) != 1 {
		t.Fatalf("XID 13 counter: %v %v", s, err)
	}
	elapsed := time.Since(start).Seconds()
	if s[0].Value < 20*(elapsed-15) || s[0].Value > 20*(elapsed+15) {
		t.Errorf("XID 13 count %v after %.0f s at 20/s", s[0].Value, elapsed)
	}
	for agent, c0 := range cpu0 {
		cores := (cpuOf(t, agent) - c0) / time.Since(start).Seconds()
		rss, err := agent.RSS()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %.3f cores, RSS %d MiB", agent.Name, cores, rss>>20)
		if cores > 0.5 || rss > 250<<20 {
			t.Errorf("%s runs away: %.2f cores, %d MiB", agent.Name, cores, rss>>20)
		}
	}
}

// TestHangingKubeletNeverDelaysScrapes: the kubelet accepts connections and never answers.
// GPU metrics keep flowing every second, unattributed, and attribution age grows.
func TestHangingKubeletNeverDelaysScrapes(t *testing.T) {
	dir := fakekubelet.SocketDir(t)
	node := agentNode{kubeletSocket: filepath.Join(dir, "kubelet.sock")}
	srv, err := fakekubelet.Start(node.kubeletSocket, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.SetMode(fakekubelet.ModeHang)
	t.Cleanup(srv.Stop)
	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-hung-kubelet", "dgxh100", "steady-training", node)
	time.Sleep(15 * time.Second)
	prom.Eventually(t, 60*time.Second, "a sample every second, unattributed", func() error {
		c, err := p.Query(`count_over_time(hw_power_watts{host_name="e2e-hung-kubelet",nvidia_gpu_index="0"}[10s])`)
		if err != nil || len(c) != 1 || c[0].Value < 9 {
			return fmt.Errorf("samples in 10 s: %v %v", c, err)
		}
		if c[0].Labels["k8s_pod_name"] != "" {
			return fmt.Errorf("attributed by a kubelet that never answered: %v", c[0].Labels)
		}
		age, err := p.Query(`nvidia_gpu_attribution_age_seconds{host_name="e2e-hung-kubelet"}`)
		if err != nil || len(age) != 1 || age[0].Value < 10 {
			return fmt.Errorf("attribution age %v %v", age, err)
		}
		return nil
	})
}

func cpuOf(t *testing.T, p *proc.Process) float64 {
	t.Helper()
	c, err := p.CPUSeconds()
	if err != nil {
		t.Fatal(err)
	}
	return c
}
