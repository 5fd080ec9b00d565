//go:build e2e

package testbed

import (
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// The termination tests stop the collector as Kubernetes and systemd do: SIGTERM, then
// SIGKILL once the grace period has passed. Nothing of ours bounds a stop: contrib's
// prometheus_remote_write retries each request until its timeout (25 s in the shipped
// configs), at shutdown too, one queued request after the other (deploy/README.md,
// "Stopping").
const (
	// shippedTimeout is prometheus_remote_write's timeout in configs/agent.yaml and
	// configs/gateway.yaml (deploy/test holds the grace periods to it).
	shippedTimeout = 25 * time.Second
	// agentGrace and gatewayGrace are the shipped grace periods before SIGKILL: the
	// agent's terminationGracePeriodSeconds and TimeoutStopSec, the gateway's.
	agentGrace   = 30 * time.Second
	gatewayGrace = 60 * time.Second
	// stopMargin is what a stop may take besides the requests' timeouts.
	stopMargin = 5 * time.Second
)

// terminate sends SIGTERM and waits for the exit; with grace > 0 it sends SIGKILL when the
// program is still running after grace, as the kubelet does. It returns how long the
// program took to exit and whether it had to be killed.
func terminate(t *testing.T, p *proc.Process, grace time.Duration) (took time.Duration, killed bool) {
	t.Helper()
	p.Signal(syscall.SIGTERM)
	return waitExit(t, p, time.Now(), grace)
}

// waitExit waits for p, told to stop at sigterm, to exit; with grace > 0 it sends SIGKILL
// at sigterm+grace.
func waitExit(t *testing.T, p *proc.Process, sigterm time.Time, grace time.Duration) (took time.Duration, killed bool) {
	t.Helper()
	wait := grace
	if wait == 0 {
		wait = 5 * time.Minute // only so that a hang fails the test instead of the suite
	}
	select {
	case <-p.Done():
		return time.Since(sigterm), false
	case <-time.After(time.Until(sigterm.Add(wait))):
	}
	if grace == 0 {
		t.Fatalf("%s still running %s after SIGTERM", p.Name, wait)
	}
	p.Signal(syscall.SIGKILL)
	<-p.Done()
	return time.Since(sigterm), true
}

var droppedItems = regexp.MustCompile(`Exporting failed\. Dropping data\..*"dropped_items": (\d+)`)

// droppedLogged sums what the exporter helper logged as dropped: points and requests.
func droppedLogged(out string) (points, requests int) {
	for _, m := range droppedItems.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		points += n
		requests++
	}
	return points, requests
}

// selfMetric sums a counter of the collector's own telemetry (all its series).
func selfMetric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// downBackend answers every remote-write request with a 503 (a backend that is down or
// failing: retried) and records when each came.
type downBackend struct {
	mu    sync.Mutex
	times []time.Time
}

func (b *downBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	b.mu.Lock()
	b.times = append(b.times, time.Now())
	b.mu.Unlock()
	http.Error(w, "down", http.StatusServiceUnavailable)
}

func (b *downBackend) requests() []time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.times)
}

// first waits for the first request.
func (b *downBackend) first(t *testing.T) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r := b.requests(); len(r) > 0 {
			return r[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no request reached the backend")
	return time.Time{}
}

// startAgentOnDownBackend runs the shipped agent at the shipped 10 s interval against a
// backend that is down.
func startAgentOnDownBackend(t *testing.T, host string, telemetryPort int) (*proc.Process, *downBackend) {
	t.Helper()
	b := &downBackend{}
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	agent := startAgentOn(t, &prom.Server{Addr: strings.TrimPrefix(srv.URL, "http://")}, host, "dgxh100", "steady-training", agentNode{env: []string{
		"OTELCOL_GPU_INTERVAL=10s",
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", telemetryPort),
	}})
	return agent, b
}

// TestAgentTerminationDuringOutage: three agents on the shipped configuration (10 s
// interval), each sending to a backend that is down (503).
//
//   - While the backend is down, a request is retried about once a second
//     (retry_on_failure.initial_interval; contrib's default would be 20 a second), until its
//     25 s timeout: then it is dropped, logged with its count and counted in
//     otelcol_exporter_send_failed_metric_points.
//   - Stopped 3 s into the outage (one request in flight, none queued behind it), the agent
//     gives that request the rest of its timeout, drops it, logs how many points, and exits
//     within the 30 s grace period, its ports free.
//   - Stopped 13 s into the outage (the next scrape's request queued behind), it would need
//     the rest of the first request's timeout plus a whole timeout for the second: it is
//     still running when the SIGKILL comes at 30 s, and what it held is lost without being
//     counted. This is contrib's exporter not stopping its retries at shutdown, the
//     limitation deploy/README.md states ("Stopping"); when this part fails, the exporter
//     got better and the README's figures are stale.
func TestAgentTerminationDuringOutage(t *testing.T) {
	ports := [3]int{proc.FreePort(t), proc.FreePort(t), proc.FreePort(t)}
	early, earlyBackend := startAgentOnDownBackend(t, "e2e-term-early", ports[0])
	late, lateBackend := startAgentOnDownBackend(t, "e2e-term-late", ports[1])
	long, longBackend := startAgentOnDownBackend(t, "e2e-term-long", ports[2])
	earlyFirst, lateFirst, longFirst := earlyBackend.first(t), lateBackend.first(t), longBackend.first(t)

	time.Sleep(time.Until(earlyFirst.Add(3 * time.Second)))
	early.Signal(syscall.SIGTERM)
	earlySigterm := time.Now()
	time.Sleep(time.Until(lateFirst.Add(13 * time.Second)))
	late.Signal(syscall.SIGTERM)
	lateSigterm := time.Now()

	took, killed := waitExit(t, early, earlySigterm, agentGrace)
	t.Logf("stopped 3 s into the outage: exited %s after SIGTERM (killed: %v)", took.Round(10*time.Millisecond), killed)
	if killed {
		t.Errorf("stopped with one request in flight, the agent was still running %s after SIGTERM and was killed", agentGrace)
	}
	// No earlier than the request's timeout: that time is for a backend that comes back.
	if want := shippedTimeout - 3*time.Second - 2*time.Second; took < want {
		t.Errorf("the agent exited %s after SIGTERM, before its request's timeout (%s after SIGTERM): it gave up early", took, want)
	}
	points, requests := droppedLogged(early.Output())
	t.Logf("stopped 3 s into the outage: dropped %d points in %d requests", points, requests)
	if requests != 1 || points < 8 {
		t.Errorf("logged %d points dropped in %d requests, want one request of a scrape of 8 GPUs", points, requests)
	}
	portFree(t, fmt.Sprintf("127.0.0.1:%d", ports[0]))

	// Retries about once a second, not 20 times.
	reqs := earlyBackend.requests()
	span := reqs[len(reqs)-1].Sub(reqs[0])
	rate := float64(len(reqs)-1) / span.Seconds()
	t.Logf("the backend got %d requests in %s: %.2f a second", len(reqs), span.Round(10*time.Millisecond), rate)
	if rate < 0.5 || rate > 2 {
		t.Errorf("%.2f requests a second to a backend that is down, want about 1 (retry_on_failure.initial_interval 1s)", rate)
	}

	// An outage longer than the timeout: the oldest request is dropped and counted while
	// the agent runs.
	time.Sleep(time.Until(longFirst.Add(shippedTimeout + 3*time.Second)))
	points, requests = droppedLogged(long.Output())
	failed := selfMetric(t, fmt.Sprintf("127.0.0.1:%d", ports[2]), "otelcol_exporter_send_failed_metric_points")
	t.Logf("%s into an outage: %d points dropped in %d requests logged, otelcol_exporter_send_failed_metric_points %v",
		time.Since(longFirst).Round(time.Second), points, requests, failed)
	if requests == 0 || points < 8 || float64(points) != failed {
		t.Errorf("the request that outlived its timeout: %d points in %d requests logged as dropped, %v counted", points, requests, failed)
	}

	took, killed = waitExit(t, late, lateSigterm, agentGrace)
	points, requests = droppedLogged(late.Output())
	t.Logf("stopped 13 s into the outage: exited %s after SIGTERM (killed: %v), %d points in %d requests logged as dropped",
		took.Round(10*time.Millisecond), killed, points, requests)
	if !killed {
		t.Errorf("stopped with a request queued behind the one in flight, the agent exited %s after SIGTERM, within the grace period: contrib's exporter stops faster than deploy/README.md says, update it", took)
	}
}

// portFree fails unless addr can be bound: the stopped program holds it no more.
func portFree(t *testing.T, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("%s is still held after the exit: %v", addr, err)
		return
	}
	l.Close()
}

// waitSeries waits until Prometheus has host's GPU 0 power series.
func waitSeries(t *testing.T, p *prom.Server, host string) {
	t.Helper()
	prom.Eventually(t, 90*time.Second, "samples from "+host, func() error {
		s, err := p.Query(`hw_power_watts{host_name="` + host + `",nvidia_gpu_index="0"}`)
		if err != nil || len(s) != 1 {
			return fmt.Errorf("%v %v", s, err)
		}
		return nil
	})
}

// TestAgentTerminationSIGKILLAfterGraceNeverComes: the kubelet's sequence during an outage, with the
// WAL overlay: SIGTERM, and SIGKILL after the 30 s grace period. The agent exits before the
// SIGKILL (its requests come from the WAL, none waits in memory), drops nothing, and,
// restarted once Prometheus is back, delivers the samples it buffered during the outage.
func TestAgentTerminationSIGKILLAfterGraceNeverComes(t *testing.T) {
	p := prom.Start(t, "")
	node := agentNode{
		walDir:   t.TempDir(),
		overlays: []string{"../deploy/config-overlays/remote-write-wal.yaml"},
	}
	agent := startAgentOn(t, p, "e2e-term-wal", "dgxh100", "steady-training", node)
	waitSeries(t, p, "e2e-term-wal")

	p.Stop()
	down := time.Now()
	time.Sleep(6 * time.Second)
	sigterm := time.Now()
	took, killed := terminate(t, agent, agentGrace)
	if killed {
		t.Fatalf("the agent was still running %s after SIGTERM and had to be killed", took)
	}
	t.Logf("%s stopped %s after SIGTERM (grace %s)", agent.Name, took.Round(10*time.Millisecond), agentGrace)
	if took > agentGrace-stopMargin {
		t.Errorf("took %s", took)
	}
	if strings.Contains(agent.Output(), "Dropping data") {
		t.Error("the exporter dropped data although its WAL holds it")
	}

	p.Restart(t)
	startAgentOn(t, p, "e2e-term-wal", "dgxh100", "steady-training", node)
	series := `hw_energy_joules_total{host_name="e2e-term-wal",nvidia_gpu_index="0"}`
	prom.Eventually(t, 90*time.Second, "the outage's samples from the WAL", func() error {
		pts, err := p.QueryRange(fmt.Sprintf(`%s[%ds]`, series, int(math.Ceil(time.Since(down).Seconds()))+2))
		if err != nil || len(pts) != 1 {
			return fmt.Errorf("%v %v", pts, err)
		}
		n := 0
		for _, pt := range pts[0].Points {
			if pt.T.After(down.Add(time.Second)) && pt.T.Before(sigterm) {
				n++
			}
		}
		if n < 4 {
			return fmt.Errorf("%d samples from the outage before SIGTERM arrived", n)
		}
		return nil
	})
}

// TestAgentTerminationFlushesEverythingWithTheBackendUp: a stop while Prometheus is up sends
// everything: the batch that was still open (every sample of the run here) arrives at
// once, and nothing is logged as dropped.
func TestAgentTerminationFlushesEverythingWithTheBackendUp(t *testing.T) {
	p := prom.Start(t, "")
	agent := startAgentOn(t, p, "e2e-term-up", "dgxh100", "steady-training", agentNode{sets: []string{
		// One batch for the whole run: only the flush at shutdown sends it.
		"processors::batch::timeout=10m", "processors::batch::send_batch_size=1000000",
	}})
	time.Sleep(8 * time.Second)
	if s, err := p.Query(`hw_power_watts{host_name="e2e-term-up"}`); err != nil || len(s) != 0 {
		t.Fatalf("samples arrived before the stop (%v %v): the batch is not held", s, err)
	}
	sigterm := time.Now()
	took, killed := terminate(t, agent, 0)
	if killed {
		t.Fatal("killed")
	}
	t.Logf("stopped %s after SIGTERM", took.Round(10*time.Millisecond))
	if took > stopMargin {
		t.Errorf("a stop with the backend up took %s", took)
	}
	if strings.Contains(agent.Output(), "Dropping data") {
		t.Error("the agent dropped data with the backend up")
	}
	// The last sample read before SIGTERM is in Prometheus: none of the open batch was lost.
	r, err := p.Query(`timestamp(hw_energy_joules_total{host_name="e2e-term-up",nvidia_gpu_index="0"})`)
	if err != nil || len(r) != 1 {
		t.Fatalf("%v %v", r, err)
	}
	last := time.UnixMilli(int64(r[0].Value * 1000))
	if gap := sigterm.Sub(last); gap > 2*time.Second {
		t.Errorf("the newest sample in Prometheus is %s older than SIGTERM: the open batch was lost", gap.Round(time.Millisecond))
	}
}

// TestAgentTerminationWaitsForABackendThatComesBack: Prometheus is down when the agent is told to
// stop and comes back 9 s into the outage, within the timeout of the request in flight (25
// s): the agent delivers that request and every one queued behind it, then exits, nothing
// dropped.
func TestAgentTerminationWaitsForABackendThatComesBack(t *testing.T) {
	p := prom.Start(t, "")
	agent := startAgentOn(t, p, "e2e-term-back", "dgxh100", "steady-training", agentNode{})
	waitSeries(t, p, "e2e-term-back")
	p.Stop()
	down := time.Now()
	time.Sleep(5 * time.Second)
	agent.Signal(syscall.SIGTERM)
	sigterm := time.Now()
	time.Sleep(4 * time.Second)
	if exited, _ := agent.Exited(); exited {
		t.Fatal("the agent exited with Prometheus down, before its request's timeout")
	}
	p.Restart(t)
	back := time.Since(sigterm)
	select {
	case <-agent.Done():
	case <-time.After(agentGrace - back):
		t.Fatalf("the agent was still running %s after SIGTERM, with Prometheus back", agentGrace)
	}
	t.Logf("Prometheus back %s after SIGTERM; the agent stopped %s after SIGTERM", back.Round(10*time.Millisecond), time.Since(sigterm).Round(10*time.Millisecond))
	if strings.Contains(agent.Output(), "Dropping data") {
		t.Errorf("the agent dropped data although Prometheus came back:\n%s", agent.Output()[max(0, len(agent.Output())-3000):])
	}
	// The window is measured on the wall clock, as Prometheus's timestamps are: a step of
	// that clock meanwhile (a VM's clock being set) then stretches it instead of cutting
	// off the outage's first samples.
	c, err := p.Query(fmt.Sprintf(`count_over_time(hw_energy_joules_total{host_name="e2e-term-back",nvidia_gpu_index="0"}[%ds])`,
		int(math.Ceil(time.Now().Round(0).Sub(down.Round(0)).Seconds()))))
	if err != nil || len(c) != 1 {
		t.Fatalf("%v %v", c, err)
	}
	if want := sigterm.Sub(down).Seconds() - 1; c[0].Value < want {
		t.Errorf("%v samples since the outage began, want at least %.0f (one a second until SIGTERM)", c[0].Value, want)
	}
}

// TestGatewayTerminationDuringOutage: the gateway tier during a Prometheus that hangs
// (accepts connections, answers nothing). The gateway, told to stop 6 s into the hang with
// six 1 s batches queued, refuses OTLP at once (its port free) but gives each queued
// request its whole 25 s timeout, one after the other: it is still running when the
// SIGKILL of its 60 s grace period comes, and what it held then is lost without being
// counted (contrib's exporter; deploy/README.md, "Stopping"). The agent, whose gateway is
// now gone, stops at once and keeps its unsent batches on disk: restarted against a new
// gateway with Prometheus back, it delivers them.
func TestGatewayTerminationDuringOutage(t *testing.T) {
	p := prom.Start(t, "")
	auth := newGatewayAuth(t)
	otlp, gw := startGateway(t, p.RemoteWriteURL(), auth, nil, "processors::batch::timeout=1s")
	queue := t.TempDir()
	agent := startAgentToGateway(t, auth, otlp, "e2e-term-gw", queue)
	waitSeries(t, p, "e2e-term-gw")

	p.Process().Pause()
	t.Cleanup(p.Process().Resume)
	hung := time.Now()
	time.Sleep(6 * time.Second)
	gwSigterm := time.Now()
	gw.Signal(syscall.SIGTERM)
	// The receiver stops first: the agents' next exports are refused.
	prom.Eventually(t, 10*time.Second, "the gateway's OTLP port closed", func() error {
		c, err := net.DialTimeout("tcp", otlp, time.Second)
		if err == nil {
			c.Close()
			return fmt.Errorf("%s still accepts connections", otlp)
		}
		return nil
	})
	// The agent's gateway is gone: it stops within one export attempt, keeping its queue.
	time.Sleep(8 * time.Second)
	agentSigterm := time.Now()
	took, killed := terminate(t, agent, agentGrace)
	if killed {
		t.Fatalf("the agent was still running %s after SIGTERM", took)
	}
	t.Logf("agent-to-gateway stopped %s after SIGTERM with its gateway gone", took.Round(10*time.Millisecond))
	if took > 5*time.Second+stopMargin {
		t.Errorf("the agent took %s to stop", took)
	}

	took, killed = waitExit(t, gw, gwSigterm, gatewayGrace)
	points, requests := droppedLogged(gw.Output())
	t.Logf("the gateway stopped %s after SIGTERM (killed: %v); %d points in %d requests logged as dropped before",
		took.Round(10*time.Millisecond), killed, points, requests)
	if !killed {
		t.Errorf("with six requests queued during a hang, the gateway exited %s after SIGTERM, within its grace period: contrib's exporter stops faster than deploy/README.md says, update it", took)
	}
	portFree(t, otlp)

	// The exporter helper logs "Exporting failed. Dropping data." for the batches that its
	// shutdown interrupted, but the on-disk queue keeps them: what counts is what arrives.

	// Prometheus back, a new gateway, the agent restarted on its queue: the samples it
	// read while the gateway was stopping and gone arrive.
	p.Process().Resume()
	otlp2, _ := startGateway(t, p.RemoteWriteURL(), auth, nil, "processors::batch::timeout=1s")
	startAgentToGateway(t, auth, otlp2, "e2e-term-gw", queue)
	// From just after the gateway's SIGTERM (the batch in flight then went to the gateway,
	// which dropped it) to the agent's SIGTERM.
	from, to := gwSigterm.Add(2*time.Second), agentSigterm.Add(-time.Second)
	prom.Eventually(t, 120*time.Second, "the agent's queued samples", func() error {
		pts, err := p.QueryRange(fmt.Sprintf(`hw_energy_joules_total{host_name="e2e-term-gw",nvidia_gpu_index="0"}[%ds]`,
			int(math.Ceil(time.Since(hung).Seconds()))+2))
		if err != nil || len(pts) != 1 {
			return fmt.Errorf("%v %v", pts, err)
		}
		n := 0
		for _, pt := range pts[0].Points {
			if !pt.T.Before(from) && pt.T.Before(to) {
				n++
			}
		}
		if want := int(to.Sub(from).Seconds()) - 1; n < want {
			return fmt.Errorf("%d samples between the gateway's exit and the agent's, want %d", n, want)
		}
		return nil
	})
}

// startAgentToGateway runs configs/agent-to-gateway.yaml on simulated GPUs, sending to the
// gateway at otlp with its queue in queueDir.
func startAgentToGateway(t *testing.T, auth *gatewayAuth, otlp, host, queueDir string) *proc.Process {
	t.Helper()
	node := fakeNode(t, simulatedUUIDs(t, "dgxh100"))
	health := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	return proc.Agent(t, "agent-to-gateway", append(auth.agentEnv(),
		"OTELCOL_GPU_GATEWAY_ENDPOINT="+otlp,
		"OTELCOL_GPU_HOST_NAME="+host,
		"OTELCOL_GPU_INTERVAL=1s",
		"OTELCOL_GPU_KUBELET_SOCKET=unix://"+node.kubeletSocket,
		"OTELCOL_GPU_PROC_ROOT="+node.procRoot,
		"OTELCOL_GPU_POD_LOGS_DIR="+node.podLogsDir,
		"OTELCOL_GPU_QUEUE_DIR="+queueDir,
		"OTELCOL_GPU_HEALTH_ENDPOINT="+health,
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", proc.FreePort(t)),
	), []string{filepath.Join(proc.RepoRoot(), "configs", "agent-to-gateway.yaml")}, health,
		"receivers::gpu::backend=simulated",
		"receivers::gpu::simulated::scenario=steady-training",
		"processors::batch::timeout=1s",
		"service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,batch]")
}
