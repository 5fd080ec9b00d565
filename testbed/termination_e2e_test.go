//go:build e2e

package testbed

import (
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// The termination tests stop the collector as Kubernetes and systemd do: SIGTERM, then
// SIGKILL once the grace period has passed. The shipped configs bound shutdown with the
// drain extension's flush timeout (OTELCOL_GPU_FLUSH_TIMEOUT, 20 s by default, under
// grace periods of 30 and 60 s); these tests shorten it to keep the suite quick.
const (
	testFlush = 8 * time.Second
	// stopMargin is what a stop may take besides the flush timeout (deploy/test holds the
	// manifests' grace periods to at least this much more than their flush timeout).
	stopMargin = 5 * time.Second
)

// terminate sends SIGTERM and waits for the exit; with grace > 0 it sends SIGKILL when the
// program is still running after grace, as the kubelet does. It returns how long the
// program took to exit and whether it had to be killed.
func terminate(t *testing.T, p *proc.Process, grace time.Duration) (took time.Duration, killed bool) {
	t.Helper()
	start := time.Now()
	p.Signal(syscall.SIGTERM)
	wait := grace
	if wait == 0 {
		wait = 5 * time.Minute // only so that a hang fails the test instead of the suite
	}
	select {
	case <-p.Done():
		return time.Since(start), false
	case <-time.After(wait):
	}
	if grace == 0 {
		t.Fatalf("%s still running %s after SIGTERM", p.Name, wait)
	}
	p.Signal(syscall.SIGKILL)
	<-p.Done()
	return time.Since(start), true
}

var droppedLine = regexp.MustCompile(`Shutdown: (\d+) samples in (\d+) requests dropped after the flush timeout \(([^)]+)\)`)

// dropped reads the drain extension's summary: samples and requests dropped.
func dropped(t *testing.T, p *proc.Process) (samples, requests int) {
	t.Helper()
	m := droppedLine.FindStringSubmatch(p.Output())
	if m == nil {
		t.Fatalf("%s logged no 'Shutdown: N samples in M requests dropped after the flush timeout' line", p.Name)
	}
	samples, _ = strconv.Atoi(m[1])
	requests, _ = strconv.Atoi(m[2])
	return samples, requests
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

// checkStopTime: with the backend down the collector keeps trying for the whole flush
// timeout (no earlier: that time is for a backend that comes back), then exits.
func checkStopTime(t *testing.T, p *proc.Process, took time.Duration) {
	t.Helper()
	t.Logf("%s stopped %s after SIGTERM (flush timeout %s)", p.Name, took.Round(10*time.Millisecond), testFlush)
	if took < testFlush-500*time.Millisecond {
		t.Errorf("%s exited after %s, before its flush timeout %s: it gave up on the buffer early", p.Name, took, testFlush)
	}
	if took > testFlush+stopMargin {
		t.Errorf("%s took %s to stop, more than the flush timeout %s + %s", p.Name, took, testFlush, stopMargin)
	}
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

// TestAgentTerminationDuringOutage: Prometheus is down (connections refused) and the agent
// is told to stop. It retries for its flush timeout (set through OTELCOL_GPU_FLUSH_TIMEOUT),
// then drops what it still buffers, logs how many samples, and exits without a SIGKILL,
// releasing its ports.
func TestAgentTerminationDuringOutage(t *testing.T) {
	p := prom.Start(t, "")
	telemetry := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	agent := startAgentOn(t, p, "e2e-term-agent", "dgxh100", "steady-training", agentNode{env: []string{
		"OTELCOL_GPU_FLUSH_TIMEOUT=" + testFlush.String(),
		"OTELCOL_GPU_TELEMETRY_PORT=" + strings.TrimPrefix(telemetry, "127.0.0.1:"),
	}})
	waitSeries(t, p, "e2e-term-agent")

	p.Stop()
	time.Sleep(6 * time.Second) // six scrapes buffered
	took, killed := terminate(t, agent, 0)
	if killed {
		t.Fatal("killed")
	}
	checkStopTime(t, agent, took)
	samples, requests := dropped(t, agent)
	t.Logf("dropped %d samples in %d requests", samples, requests)
	if samples < 6*8 { // at least a sample per GPU and buffered scrape
		t.Errorf("dropped %d samples in %d requests: the outage buffered six scrapes of 8 GPUs", samples, requests)
	}
	if !strings.Contains(agent.Output(), "Exporting failed. Dropping data.") {
		t.Error("the exporter did not log the data it dropped")
	}
	portFree(t, telemetry)
}

// TestAgentTerminationSIGKILLAfterGraceNeverComes: the kubelet's sequence during an outage, with the
// WAL overlay: SIGTERM, and SIGKILL after a grace period of flush timeout + margin. The
// agent exits before the SIGKILL, says that what it could not send stays on disk, and,
// restarted once Prometheus is back, delivers the samples it buffered during the outage.
func TestAgentTerminationSIGKILLAfterGraceNeverComes(t *testing.T) {
	p := prom.Start(t, "")
	node := agentNode{
		walDir:   t.TempDir(),
		overlays: []string{"../deploy/config-overlays/remote-write-wal.yaml"},
		env:      []string{"OTELCOL_GPU_FLUSH_TIMEOUT=" + testFlush.String()},
	}
	agent := startAgentOn(t, p, "e2e-term-wal", "dgxh100", "steady-training", node)
	waitSeries(t, p, "e2e-term-wal")

	p.Stop()
	down := time.Now()
	time.Sleep(6 * time.Second)
	sigterm := time.Now()
	took, killed := terminate(t, agent, testFlush+stopMargin)
	if killed {
		t.Fatalf("the agent was still running %s after SIGTERM and had to be killed", took)
	}
	t.Logf("%s stopped %s after SIGTERM (grace %s)", agent.Name, took.Round(10*time.Millisecond), testFlush+stopMargin)
	if took > testFlush+stopMargin {
		t.Errorf("took %s", took)
	}
	out := agent.Output()
	if droppedLine.MatchString(out) {
		t.Error("with the WAL, nothing may be called dropped")
	}
	if strings.Contains(out, "Dropping data") {
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
// everything: the batch that was still open (every sample of the run here) arrives, and
// the log says everything was sent within the flush timeout.
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
	if !strings.Contains(agent.Output(), "Shutdown: everything buffered was sent within the flush timeout") {
		t.Error("the drain extension did not report a complete flush")
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
// stop and comes back within the flush timeout (the shipped default, 20 s): the agent
// delivers what it buffered during the outage, then exits, nothing dropped.
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
		t.Fatal("the agent exited with Prometheus down, before its flush timeout")
	}
	p.Restart(t)
	back := time.Since(sigterm)
	select {
	case <-agent.Done():
	case <-time.After(20*time.Second + stopMargin - back):
		t.Fatal("the agent did not stop within the default flush timeout")
	}
	t.Logf("Prometheus back %s after SIGTERM; the agent stopped %s after SIGTERM", back.Round(10*time.Millisecond), time.Since(sigterm).Round(10*time.Millisecond))
	if !strings.Contains(agent.Output(), "Shutdown: everything buffered was sent within the flush timeout") || droppedLine.MatchString(agent.Output()) {
		t.Errorf("the agent did not report a complete flush:\n%s", agent.Output()[max(0, len(agent.Output())-3000):])
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
// (accepts connections, answers nothing). The gateway, told to stop, gives up after its
// flush timeout (requests in flight are cancelled then), logs what it dropped and exits
// before the SIGKILL of its grace period, its OTLP port free. The agent, whose gateway is
// now gone, stops at once and keeps its unsent batches on disk: restarted against a new
// gateway with Prometheus back, it delivers them.
func TestGatewayTerminationDuringOutage(t *testing.T) {
	p := prom.Start(t, "")
	auth := newGatewayAuth(t)
	t.Setenv("OTELCOL_GPU_FLUSH_TIMEOUT", testFlush.String()) // read by the gateway
	otlp, gw := startGateway(t, p.RemoteWriteURL(), auth, nil, "processors::batch::timeout=1s")
	queue := t.TempDir()
	agent := startAgentToGateway(t, auth, otlp, "e2e-term-gw", queue)
	waitSeries(t, p, "e2e-term-gw")

	p.Process().Pause()
	t.Cleanup(p.Process().Resume)
	hung := time.Now()
	time.Sleep(6 * time.Second)
	gwSigterm := time.Now()
	took, killed := terminate(t, gw, testFlush+stopMargin)
	if killed {
		t.Fatalf("the gateway was still running %s after SIGTERM and had to be killed", took)
	}
	checkStopTime(t, gw, took)
	samples, requests := dropped(t, gw)
	t.Logf("the gateway dropped %d samples in %d requests", samples, requests)
	if samples == 0 {
		t.Error("the gateway buffered six seconds of a node's samples and dropped none")
	}
	portFree(t, otlp)

	// The agent's gateway is gone: it stops within one export attempt, keeping its queue.
	time.Sleep(3 * time.Second)
	agentSigterm := time.Now()
	took, killed = terminate(t, agent, testFlush+stopMargin)
	if killed {
		t.Fatalf("the agent was still running %s after SIGTERM", took)
	}
	t.Logf("agent-to-gateway stopped %s after SIGTERM with its gateway gone", took.Round(10*time.Millisecond))
	if took > 5*time.Second+stopMargin {
		t.Errorf("the agent took %s to stop", took)
	}
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
