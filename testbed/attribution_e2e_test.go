//go:build e2e

package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// simulatedUUIDs are the GPU UUIDs the agent's simulator (seed 1) will report.
func simulatedUUIDs(t *testing.T, system string) []string {
	t.Helper()
	sim, err := gpusim.New(gpusim.Options{System: system, Scenario: "idle", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return sim.UUIDs()
}

// Pods of the shared-gpu node: GPU 0 is time-sliced between serving/infer-a (process
// 41001) and serving/infer-b (processes 41002, 41003); GPUs 1–7 each belong to ml/train-N.
const (
	uidA = "aaaaaaaa-1111-4111-8111-000000000001"
	uidB = "bbbbbbbb-2222-4222-8222-000000000002"
)

// fakeNode lays out what an agent reads on a node: the kubelet's socket, a /proc with the
// GPU processes' cgroups, and the kubelet's pod log directory.
func fakeNode(t *testing.T, uuids []string) agentNode {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	node := agentNode{kubeletSocket: filepath.Join(dir, "kubelet.sock"), procRoot: filepath.Join(dir, "proc"), podLogsDir: filepath.Join(dir, "pods")}

	var pods []fakekubelet.Pod
	for i := 1; i < len(uuids); i++ {
		pods = append(pods, fakekubelet.Pod{Namespace: "ml", Name: fmt.Sprintf("train-%d", i), Containers: []fakekubelet.Container{
			{Name: "pytorch", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{uuids[i]}}}},
		}})
	}
	for j, name := range []string{"infer-a", "infer-b"} {
		pods = append(pods, fakekubelet.Pod{Namespace: "serving", Name: name, Containers: []fakekubelet.Container{
			{Name: "server", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu.shared", DeviceIDs: []string{fmt.Sprintf("%s::%d", uuids[0], j)}}}},
		}})
	}
	startFakeKubelet(t, node.kubeletSocket, pods, []fakekubelet.Devices{
		{ResourceName: "nvidia.com/gpu", DeviceIDs: uuids[1:]},
		{ResourceName: "nvidia.com/gpu.shared", DeviceIDs: []string{uuids[0] + "::0", uuids[0] + "::1", uuids[0] + "::2", uuids[0] + "::3"}},
	})

	cgroupOf := func(uid, container string) string {
		return fmt.Sprintf("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope\n",
			strings.ReplaceAll(uid, "-", "_"), strings.Repeat(container, 64))
	}
	for pid, content := range map[int]string{41001: cgroupOf(uidA, "a"), 41002: cgroupOf(uidB, "b"), 41003: cgroupOf(uidB, "b")} {
		writeProc(t, node.procRoot, pid, content)
	}
	for uid, name := range map[string]string{uidA: "infer-a", uidB: "infer-b"} {
		mustWrite(t, filepath.Join(node.podLogsDir, "serving_"+name+"_"+uid, "server", "0.log"), "")
	}
	return node
}

// writeProc lays out /proc/<pid> as the processor reads it: the cgroup file, and stat,
// whose field 22 (the start time) tells a process from a later one with its PID.
func writeProc(t *testing.T, procRoot string, pid int, cgroup string) {
	t.Helper()
	mustWrite(t, filepath.Join(procRoot, fmt.Sprint(pid), "cgroup"), cgroup)
	mustWrite(t, filepath.Join(procRoot, fmt.Sprint(pid), "stat"),
		fmt.Sprintf("%d (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 1 1 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n", pid, 5000+pid))
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPodAttributionLandsInPrometheus: with a kubelet (the fake, over the real
// pod-resources API) and cgroups, GPU series carry pod, namespace and container labels,
// and a time-sliced GPU shows its two pods with their own values.
func TestPodAttributionLandsInPrometheus(t *testing.T) {
	uuids := simulatedUUIDs(t, "dgxh200")
	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-pods", "dgxh200", "shared-gpu", fakeNode(t, uuids))

	t.Run("exclusive GPUs carry their pod's labels", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "pod labels", func() error {
			s, err := p.Query(`hw_gpu_utilization_ratio{host_name="e2e-pods",hw_gpu_task="general",k8s_pod_name!=""}`)
			if err != nil {
				return err
			}
			if len(s) != 7 {
				return fmt.Errorf("%d attributed GPUs, want 7 (GPU 0 is shared)", len(s))
			}
			for _, x := range s {
				want := "train-" + x.Labels["nvidia_gpu_index"]
				if x.Labels["k8s_pod_name"] != want || x.Labels["k8s_namespace_name"] != "ml" || x.Labels["k8s_container_name"] != "pytorch" {
					return fmt.Errorf("GPU %s labelled %v", x.Labels["nvidia_gpu_index"], x.Labels)
				}
			}
			return nil
		})
	})

	t.Run("the shared GPU shows two pods with their own memory and energy", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "per-pod series", func() error {
			mem, err := byPod(p, `nvidia_gpu_pod_memory_usage_bytes{host_name="e2e-pods",nvidia_gpu_index="0"}`)
			if err != nil {
				return err
			}
			energy, err := byPod(p, `nvidia_gpu_pod_energy_joules_total{host_name="e2e-pods",nvidia_gpu_index="0"}`)
			if err != nil {
				return err
			}
			for _, m := range []map[string]float64{mem, energy} {
				if len(m) != 2 || m["infer-a"] <= 0 || m["infer-b"] <= 0 || m["infer-a"] == m["infer-b"] {
					return fmt.Errorf("per-pod values %v, want two distinct positive ones", m)
				}
			}
			return nil
		})
		s, err := p.Query(`nvidia_gpu_process_memory_usage_bytes{host_name="e2e-pods",nvidia_gpu_index="0"}`)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range s {
			if x.Labels["k8s_pod_uid"] == "" || x.Labels["container_id"] == "" || x.Labels["k8s_namespace_name"] != "serving" {
				t.Errorf("process %s not attributed: %v", x.Labels["process_pid"], x.Labels)
			}
		}
	})

	t.Run("the HPA example's query gives each GPU pod its utilization", func(t *testing.T) {
		raw, err := os.ReadFile(filepath.Join(proc.RepoRoot(), "deploy", "autoscaling", "query.promql"))
		if err != nil {
			t.Fatal(err)
		}
		prom.Eventually(t, 30*time.Second, "HPA query", func() error {
			s, err := p.Query(strings.TrimSpace(string(raw)))
			if err != nil {
				return err
			}
			got := map[string]float64{}
			for _, x := range s {
				got[x.Labels["k8s_namespace_name"]+"/"+x.Labels["k8s_pod_name"]] = x.Value
			}
			if len(got) != 9 || got["serving/infer-a"] <= 0 || got["ml/train-1"] <= 0 {
				return fmt.Errorf("per-pod utilization %v, want the 7 trainers and the 2 shared pods", got)
			}
			return nil
		})
	})

	t.Run("node allocation is charted", func(t *testing.T) {
		prom.Eventually(t, 30*time.Second, "allocation", func() error {
			s, err := p.Query(`nvidia_gpu_devices_allocatable{host_name="e2e-pods",nvidia_gpu_resource_name="nvidia.com/gpu.shared"}`)
			if err != nil {
				return err
			}
			if len(s) != 1 || s[0].Value != 4 {
				return fmt.Errorf("allocatable shared replicas: %v, want 4", s)
			}
			return nil
		})
	})
}

func byPod(p *prom.Server, q string) (map[string]float64, error) {
	s, err := p.Query(q)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, x := range s {
		out[x.Labels["k8s_pod_name"]] = x.Value
	}
	return out, nil
}
