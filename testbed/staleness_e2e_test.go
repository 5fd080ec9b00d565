//go:build e2e

package testbed

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// lookback is Prometheus's: without an end marker a series that stops keeps answering
// instant queries with its last value for this long.
const lookback = 5 * time.Minute

// endsSoon waits until the instant query of selector sel (a series selector) returns
// nothing, and checks that it answered within the last 10 minutes and stopped long before
// the lookback would have dropped it: an end marker (a Prometheus stale marker) ended it.
// It returns how long after its last sample it stopped answering.
func endsSoon(t *testing.T, p *prom.Server, sel string, timeout time.Duration) time.Duration {
	t.Helper()
	prom.Eventually(t, timeout, sel+" ends", func() error {
		s, err := p.Query(sel)
		if err != nil {
			return err
		}
		if len(s) > 0 {
			return fmt.Errorf("%d series still answer, e.g. %v", len(s), s[0].Labels)
		}
		return nil
	})
	stoppedAt := time.Now()
	series, err := p.QueryRange(sel + `[10m]`)
	if err != nil {
		t.Fatal(err)
	}
	var lastSample time.Time
	for _, s := range series {
		if n := len(s.Points); n > 0 && s.Points[n-1].T.After(lastSample) {
			lastSample = s.Points[n-1].T
		}
	}
	if lastSample.IsZero() {
		t.Fatalf("%s: never had a sample, so its end proves nothing", sel)
	}
	after := stoppedAt.Sub(lastSample)
	if after > lookback/5 {
		t.Errorf("%s stopped answering %s after its last sample: the lookback (%s), not an end marker, ended it", sel, after.Round(time.Second), lookback)
	}
	t.Logf("%s ended %s after its last sample (lookback %s)", sel, after.Round(100*time.Millisecond), lookback)
	return after
}

// answers waits until the instant query returns n series.
func answers(t *testing.T, p *prom.Server, q string, n int, timeout time.Duration) []prom.Sample {
	t.Helper()
	var got []prom.Sample
	prom.Eventually(t, timeout, q, func() error {
		s, err := p.Query(q)
		if err != nil {
			return err
		}
		if len(s) != n {
			return fmt.Errorf("%d series, want %d", len(s), n)
		}
		got = s
		return nil
	})
	return got
}

// TestSeriesGoStaleWhenTheirSubjectEnds: remote-write has no scrape staleness, so gpu_enrich
// writes an end marker for every series whose subject is gone. In Prometheus, native and
// dcgm-exporter-compatible series alike stop answering instant queries within seconds,
// not after the 5-minute lookback, when a pod ends, a process exits, a MIG instance is
// destroyed or a GPU falls off the bus; a GPU that comes back resumes its counters, and
// rate() and increase() over the gap stay right.
func TestSeriesGoStaleWhenTheirSubjectEnds(t *testing.T) {
	uuids := simulatedUUIDs(t, "dgxh100")
	sim, err := gpusim.New(gpusim.Options{System: "dgxh100", Scenario: "churn", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	doomedMIG := sim.MIGDevices()[1][1] // churn destroys GPU 1's second instance

	pods := []fakekubelet.Pod{
		{Namespace: "ml", Name: "trainer", Containers: []fakekubelet.Container{
			{Name: "pytorch", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{uuids[0]}}}}}},
		{Namespace: "ml", Name: "batch-job", Containers: []fakekubelet.Container{
			{Name: "worker", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{uuids[2]}}}}}},
	}
	node, kubelet := kubeletNode(t, pods, uuids)
	node.overlays = []string{"dcgm-compat.yaml"}

	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-churn", "dgxh100", "churn", node)
	lost := agentNode{overlays: []string{"dcgm-compat.yaml"}}
	startAgentOn(t, p, "e2e-lost", "dgxh100", "gpu-lost", lost)

	t.Run("pod gone", func(t *testing.T) {
		native := `{__name__=~"hw_.*|nvidia_.*", host_name="e2e-churn", k8s_pod_name="batch-job"}`
		compat := `{__name__=~"DCGM_FI_.*", Hostname="e2e-churn", pod="batch-job"}`
		answers(t, p, `count(`+native+`) > 0`, 1, 60*time.Second)
		answers(t, p, `count(`+compat+`) > 0`, 1, 60*time.Second)
		kubelet.SetPods(pods[:1])
		endsSoon(t, p, native, 30*time.Second)
		endsSoon(t, p, compat, 30*time.Second)
		// The GPU itself goes on, unattributed.
		answers(t, p, `hw_gpu_utilization_ratio{host_name="e2e-churn",nvidia_gpu_index="2",hw_gpu_task="general",k8s_pod_name=""}`, 1, 30*time.Second)
		answers(t, p, `DCGM_FI_DEV_GPU_UTIL{Hostname="e2e-churn",gpu="2",pod=""}`, 1, 30*time.Second)
	})

	t.Run("process exited", func(t *testing.T) {
		// dcgm-exporter has no per-process series; natively the data loader's ends.
		endsSoon(t, p, `nvidia_gpu_process_memory_usage_bytes{host_name="e2e-churn",process_executable_name="dataloader"}`, 90*time.Second)
		answers(t, p, `nvidia_gpu_process_memory_usage_bytes{host_name="e2e-churn",nvidia_gpu_index="0",process_executable_name="python3"}`, 1, 10*time.Second)
	})

	t.Run("MIG instance destroyed", func(t *testing.T) {
		// The compatible series of that instance are told apart by GPU_I_ID.
		instances, err := p.QueryRange(`hw_gpu_memory_usage_bytes{host_name="e2e-churn",nvidia_mig_uuid="` + doomedMIG + `"}[10m]`)
		if err != nil || len(instances) != 1 {
			t.Fatalf("the instance to be destroyed was never seen: %v %v", instances, err)
		}
		gi := instances[0].Labels["nvidia_mig_gpu_instance_id"]
		endsSoon(t, p, `{__name__=~"hw_.*|nvidia_.*", host_name="e2e-churn", nvidia_mig_uuid="`+doomedMIG+`"}`, 90*time.Second)
		endsSoon(t, p, `{__name__=~"DCGM_FI_.*", Hostname="e2e-churn", gpu="1", GPU_I_ID="`+gi+`"}`, 30*time.Second)
		// The other half of the GPU goes on.
		answers(t, p, `DCGM_FI_DEV_FB_USED{Hostname="e2e-churn",gpu="1",GPU_I_ID!=""}`, 1, 10*time.Second)
	})

	t.Run("GPU lost, and back", func(t *testing.T) {
		// The energy check reads Prometheus's timestamps, which are the wall clock's: a step
		// of that clock inside the measured minute (a VM's clock being set, as once in CI:
		// 26 s) makes the minute hold less time than the GPU drew power over. Then the next
		// loss, a minute later, is measured instead.
		for attempt := 1; ; attempt++ {
			step := gpuLostAndBack(t, p)
			if step == 0 {
				return
			}
			if attempt == 2 {
				t.Fatalf("the wall clock stepped by %s during two measured minutes in a row", step)
			}
			t.Logf("the wall clock stepped by %s during the measured minute: measuring the next loss", step)
		}
	})
}

// clockStep is how far the wall clock moved beyond the time that passed since since (taken
// with time.Now, so it holds both clocks); zero when under a second, as with NTP's slewing.
func clockStep(since time.Time) time.Duration {
	step := time.Now().Round(0).Sub(since.Round(0)) - time.Since(since)
	if step > -time.Second && step < time.Second {
		return 0
	}
	return step
}

// gpuLostAndBack follows one loss of e2e-lost's GPU 3 (it falls off the bus 15 s into every
// minute for 20 s) and its return, and checks the energy counters over the gap unless the
// wall clock stepped meanwhile; it returns that step.
func gpuLostAndBack(t *testing.T, p *prom.Server) time.Duration {
	t.Helper()
	since := time.Now()
	endsSoon(t, p, `hw_gpu_utilization_ratio{host_name="e2e-lost",nvidia_gpu_index="3"}`, 90*time.Second)
	endsSoon(t, p, `{__name__=~"DCGM_FI_DEV_(GPU_UTIL|POWER_USAGE|FB_USED|GPU_TEMP|TOTAL_ENERGY_CONSUMPTION)", Hostname="e2e-lost", gpu="3"}`, 10*time.Second)
	// Meanwhile it reports failed instead of vanishing, and the other seven go on.
	answers(t, p, `hw_status{host_name="e2e-lost",nvidia_gpu_index="3",hw_state="failed"} == 1`, 1, 10*time.Second)
	answers(t, p, `DCGM_FI_DEV_GPU_UTIL{Hostname="e2e-lost"}`, 7, 10*time.Second)

	answers(t, p, `hw_energy_joules_total{host_name="e2e-lost",nvidia_gpu_index="3"}`, 1, 40*time.Second)
	time.Sleep(15 * time.Second)
	if step := clockStep(since); step != 0 {
		return step
	}
	// Over a minute that holds the gap, the energy counters rose by what the GPU drew:
	// the end marker and the return are not a counter reset.
	for _, c := range []struct{ ratio, energy, power string }{
		{
			`increase(hw_energy_joules_total{host_name="e2e-lost",nvidia_gpu_index="3"}[1m]) / (avg_over_time(hw_power_watts{host_name="e2e-lost",nvidia_gpu_index="3"}[1m]) * 60)`,
			`hw_energy_joules_total{host_name="e2e-lost",nvidia_gpu_index="3"}`, `hw_power_watts{host_name="e2e-lost",nvidia_gpu_index="3"}`,
		},
		{
			`increase(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{Hostname="e2e-lost",gpu="3"}[1m]) / 1000 / (avg_over_time(DCGM_FI_DEV_POWER_USAGE{Hostname="e2e-lost",gpu="3"}[1m]) * 60)`,
			`DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{Hostname="e2e-lost",gpu="3"}`, `DCGM_FI_DEV_POWER_USAGE{Hostname="e2e-lost",gpu="3"}`,
		},
	} {
		gap, err := p.QueryRange(c.power + `[1m]`)
		if err != nil || len(gap) != 1 || len(gap[0].Points) > 50 {
			t.Fatalf("the last minute should hold the gap (at most 40 of 60 samples): %v %v", gap, err)
		}
		s := answers(t, p, c.ratio, 1, 10*time.Second)
		if r := s[0].Value; r < 0.8 || r > 1.25 {
			energy, _ := p.QueryRange(c.energy + `[1m]`)
			t.Errorf("%s = %.2f: the counter's increase over the gap does not match the power drawn\nenergy: %v\npower: %v", c.ratio, r, energy, gap)
		} else {
			t.Logf("%s = %.3f", c.ratio, r)
		}
	}
	return 0
}

// kubeletNode is a node whose kubelet serves these pods, returned so that a test can
// change them; /proc is empty.
func kubeletNode(t *testing.T, pods []fakekubelet.Pod, uuids []string) (agentNode, *fakekubelet.Server) {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	node := agentNode{kubeletSocket: filepath.Join(dir, "kubelet.sock")}
	srv := startFakeKubelet(t, node.kubeletSocket, pods, []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: uuids}})
	return node, srv
}
