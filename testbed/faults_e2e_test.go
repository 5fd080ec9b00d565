//go:build e2e

package testbed

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestPrometheusOutageLosesNoSample: with the shipped agent configuration (remote-write
// WAL on), Prometheus goes away for long enough to miss many batches and comes back: every
// sample the agent produced in the meantime arrives.
func TestPrometheusOutageLosesNoSample(t *testing.T) {
	p := prom.Start(t, "")
	startAgent(t, p, "e2e-outage", "dgxh100", "steady-training")
	series := `hw_energy_joules_total{host_name="e2e-outage",nvidia_gpu_index="0"}`
	prom.Eventually(t, 60*time.Second, "first samples", func() error {
		s, err := p.Query(series)
		if err != nil || len(s) != 1 {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})

	p.Stop()
	down := time.Now()
	time.Sleep(12 * time.Second) // 12 scrapes at 1 s, several batches
	p.Restart(t)
	up := time.Now()

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
		var prev time.Time
		for _, pt := range pts[0].Points {
			if pt.T.Before(from) || pt.T.After(to) {
				continue
			}
			if !prev.IsZero() && pt.T.Sub(prev) > gap {
				gap = pt.T.Sub(prev)
			}
			prev = pt.T
			n++
		}
		want := int(to.Sub(from).Seconds())
		if time.Now().Before(to) || n < want-1 || gap > 1500*time.Millisecond {
			return fmt.Errorf("%d samples in %s (want %d), largest gap %s", n, to.Sub(from), want, gap)
		}
		return nil
	})
}

// TestKilledAgentDeliversItsWALAfterRestart: Prometheus is down, the agent buffers in its
// WAL and is killed (SIGKILL: nothing flushed); restarted on the same WAL directory once
// Prometheus is back, it delivers what it had buffered.
func TestKilledAgentDeliversItsWALAfterRestart(t *testing.T) {
	p := prom.Start(t, "")
	wal := t.TempDir()
	node := agentNode{walDir: wal}
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
type flakyBackend struct {
	broken atomic.Bool
	target string
}

func (f *flakyBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.broken.Load() {
		time.Sleep(2 * time.Second)
		http.Error(w, "backend overloaded", http.StatusServiceUnavailable)
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
