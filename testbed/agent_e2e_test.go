//go:build e2e

package testbed

import (
	"fmt"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// identityLabels must be on every GPU series in Prometheus.
var identityLabels = []string{"host_name", "hw_id", "nvidia_gpu_index", "hw_model", "nvidia_gpu_pci_bus_id", "hw_driver_version"}

// startFakeKubelet serves the pod-resources API on socket with pods and the node's
// allocatable devices until the test ends.
func startFakeKubelet(t *testing.T, socket string, pods []fakekubelet.Pod, allocatable []fakekubelet.Devices) *fakekubelet.Server {
	t.Helper()
	srv, err := fakekubelet.Start(socket, pods, allocatable)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return srv
}

// agentNode is where an agent finds the node's kubelet and processes; zero values point at
// nothing (no kubelet, an empty /proc), so GPUs flow unattributed.
type agentNode struct {
	kubeletSocket, procRoot, podLogsDir string
	// overlays are config files merged over configs/agent.yaml, e.g. dcgm-compat.yaml.
	overlays []string
	// walDir is the remote-write WAL's directory (a fresh one when empty).
	walDir string
	// queueDir is the OTLP overlay's on-disk send queue (OTELCOL_GPU_QUEUE_DIR; a fresh
	// one when empty).
	queueDir string
	// sets are extra --set overrides.
	sets []string
	// env is extra environment (e.g. KUBECONFIG for k8s_attributes).
	env []string
	// flags are extra command-line flags (e.g. --feature-gates).
	flags []string
	// binary is the collector to run: by default the node agent's lean build
	// (proc.AgentBinary), which the shipped DaemonSets and systemd unit start, the
	// dcgm-exporter compatibility overlays included.
	binary string
}

// startAgent runs the shipped configs/agent.yaml with the GPU backend switched to the
// simulator, remote-writing into prom. k8s_attributes is left out of the pipeline: it needs
// a Kubernetes API server (k8sattributes_e2e_test.go puts it back with one).
func startAgent(t *testing.T, p *prom.Server, host, system, scenario string) {
	t.Helper()
	startAgentOn(t, p, host, system, scenario, agentNode{})
}

func startAgentOn(t *testing.T, p *prom.Server, host, system, scenario string, node agentNode) *proc.Process {
	t.Helper()
	if node.walDir == "" {
		node.walDir = t.TempDir()
	}
	if node.queueDir == "" {
		node.queueDir = t.TempDir()
	}
	if node.kubeletSocket == "" {
		node.kubeletSocket = filepath.Join(t.TempDir(), "no-kubelet.sock")
	}
	if node.procRoot == "" {
		node.procRoot = t.TempDir()
	}
	if node.podLogsDir == "" {
		node.podLogsDir = t.TempDir()
	}
	health := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	env := []string{
		"OTELCOL_GPU_KUBELET_SOCKET=unix://" + node.kubeletSocket,
		"OTELCOL_GPU_PROC_ROOT=" + node.procRoot,
		"OTELCOL_GPU_POD_LOGS_DIR=" + node.podLogsDir,
		"PROMETHEUS_REMOTE_WRITE_URL=" + p.RemoteWriteURL(),
		"OTELCOL_GPU_HOST_NAME=" + host,
		"OTELCOL_GPU_WAL_DIR=" + node.walDir,
		"OTELCOL_GPU_QUEUE_DIR=" + node.queueDir,
		"OTELCOL_GPU_INTERVAL=1s",
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + health,
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", proc.FreePort(t)),
	}
	// As the shipped DaemonSets and systemd unit run it.
	env = append(env, proc.ShippedRuntimeEnv(t)...)
	env = append(env, node.env...)
	configs := []string{filepath.Join(proc.RepoRoot(), "configs", "agent.yaml")}
	for _, o := range node.overlays {
		configs = append(configs, filepath.Join(proc.RepoRoot(), "configs", o))
	}
	sets := append([]string{
		"receivers::gpu::backend=simulated",
		"receivers::gpu::simulated::system=" + system,
		"receivers::gpu::simulated::scenario=" + scenario,
		"processors::gpu_enrich::kubelet::refresh_interval=1s",
		"service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,batch]",
	}, node.sets...)
	if node.binary == "" {
		node.binary = proc.AgentBinary(t)
	}
	return proc.StartCollector(t, node.binary, "otelcol-gpu "+host, env, node.flags, configs, health, sets...)
}

// TestAgentRemoteWritesEveryGPUWithItsIdentity runs two agents (a training node and a node
// whose job leaks GPU memory) into one Prometheus and checks what a user would query.
func TestAgentRemoteWritesEveryGPUWithItsIdentity(t *testing.T) {
	p := prom.Start(t, "")
	startAgent(t, p, "e2e-train", "dgxh100", "steady-training")
	startAgent(t, p, "e2e-leak", "dgxa100", "memory-leak")

	t.Run("each GPU has the core series with its identity labels", func(t *testing.T) {
		for _, metric := range []string{
			`hw_gpu_utilization_ratio{hw_gpu_task="general"}`,
			`hw_gpu_memory_usage_bytes`,
			`hw_temperature_celsius{hw_sensor_location="gpu"}`,
			`hw_power_watts`,
			`hw_energy_joules_total`,
		} {
			prom.Eventually(t, 60*time.Second, metric, func() error {
				for _, host := range []string{"e2e-train", "e2e-leak"} {
					if err := eightGPUsWithIdentity(p, metric, host); err != nil {
						return err
					}
				}
				return nil
			})
		}
	})

	t.Run("the energy counter only grows", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "energy counters grow", func() error {
			series, err := p.QueryRange(`hw_energy_joules_total{host_name="e2e-train"}[5m]`)
			if err != nil {
				return err
			}
			if len(series) != 8 {
				return fmt.Errorf("%d energy series, want 8", len(series))
			}
			for _, s := range series {
				if len(s.Points) < 3 {
					return fmt.Errorf("GPU %s: %d samples so far", s.Labels["hw_id"], len(s.Points))
				}
				for i := 1; i < len(s.Points); i++ {
					if s.Points[i].V < s.Points[i-1].V {
						t.Fatalf("GPU %s: energy went down from %v to %v", s.Labels["hw_id"], s.Points[i-1].V, s.Points[i].V)
					}
				}
				if s.Points[len(s.Points)-1].V <= s.Points[0].V {
					return fmt.Errorf("GPU %s: energy did not grow", s.Labels["hw_id"])
				}
			}
			return nil
		})
	})

	t.Run("memory-leak: framebuffer use rises on every GPU", func(t *testing.T) {
		prom.Eventually(t, 90*time.Second, "framebuffer rises", func() error {
			series, err := p.QueryRange(`hw_gpu_memory_usage_bytes{host_name="e2e-leak"}[5m]`)
			if err != nil {
				return err
			}
			if len(series) != 8 {
				return fmt.Errorf("%d framebuffer series, want 8", len(series))
			}
			for _, s := range series {
				rises := 0
				for i := 1; i < len(s.Points); i++ {
					if s.Points[i].V < s.Points[i-1].V {
						t.Fatalf("GPU %s: leaking framebuffer went down", s.Labels["hw_id"])
					}
					if s.Points[i].V > s.Points[i-1].V {
						rises++
					}
				}
				if rises < 2 {
					return fmt.Errorf("GPU %s: framebuffer rose %d times so far", s.Labels["hw_id"], rises)
				}
			}
			return nil
		})
		// ... while on the training node it stays flat (within 1 %).
		series, err := p.QueryRange(`hw_gpu_memory_usage_bytes{host_name="e2e-train"}[5m]`)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range series {
			first, last := s.Points[0].V, s.Points[len(s.Points)-1].V
			if last > first*1.01 || last < first*0.99 {
				t.Errorf("training GPU %s: framebuffer moved from %v to %v", s.Labels["hw_id"], first, last)
			}
		}
	})
}

// eightGPUsWithIdentity checks that a host has the series for GPUs 0–7, each with every
// identity label set.
func eightGPUsWithIdentity(p *prom.Server, selector, host string) error {
	q := fmt.Sprintf(`%s`, withHost(selector, host))
	samples, err := p.Query(q)
	if err != nil {
		return err
	}
	var indexes []string
	uuids := map[string]bool{}
	for _, s := range samples {
		for _, l := range identityLabels {
			if s.Labels[l] == "" {
				return fmt.Errorf("%s: series %v lacks label %s", q, s.Labels, l)
			}
		}
		indexes = append(indexes, s.Labels["nvidia_gpu_index"])
		uuids[s.Labels["hw_id"]] = true
	}
	sort.Strings(indexes)
	if fmt.Sprint(indexes) != "[0 1 2 3 4 5 6 7]" || len(uuids) != 8 {
		return fmt.Errorf("%s: GPU indexes %v, %d UUIDs; want 0–7 and 8 UUIDs", q, indexes, len(uuids))
	}
	return nil
}

// withHost adds a host_name matcher to a selector.
func withHost(selector, host string) string {
	matcher := fmt.Sprintf(`host_name=%q`, host)
	if n := len(selector); n > 0 && selector[n-1] == '}' {
		return selector[:n-1] + "," + matcher + "}"
	}
	return selector + "{" + matcher + "}"
}
