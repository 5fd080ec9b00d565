//go:build e2e

package testbed

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestAgentThroughGatewayToPrometheus runs the shipped gateway tier: an agent on
// configs/agent-to-gateway.yaml sends OTLP over loopback, with TLS and its token, to a
// gateway on configs/gateway.yaml, which remote-writes to Prometheus. The GPU identity and pod labels
// survive the extra hop.
func TestAgentThroughGatewayToPrometheus(t *testing.T) {
	p := prom.Start(t, "")
	auth := newGatewayAuth(t)
	otlp, _ := startGateway(t, p.RemoteWriteURL(), auth, nil, "processors::batch::timeout=1s")

	uuids := simulatedUUIDs(t, "dgxh100")
	node := fakeNode(t, uuids)
	agentHealth := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	proc.Agent(t, "agent-to-gateway", append(auth.agentEnv(),
		"OTELCOL_GPU_GATEWAY_ENDPOINT="+otlp,
		"OTELCOL_GPU_HOST_NAME=e2e-gw-node",
		"OTELCOL_GPU_INTERVAL=1s",
		"OTELCOL_GPU_KUBELET_SOCKET=unix://"+node.kubeletSocket,
		"OTELCOL_GPU_PROC_ROOT="+node.procRoot,
		"OTELCOL_GPU_POD_LOGS_DIR="+node.podLogsDir,
		"OTELCOL_GPU_QUEUE_DIR="+t.TempDir(),
		"OTELCOL_GPU_HEALTH_ENDPOINT="+agentHealth,
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", proc.FreePort(t)),
	), []string{filepath.Join(proc.RepoRoot(), "configs", "agent-to-gateway.yaml")}, agentHealth,
		"receivers::gpu::backend=simulated",
		"receivers::gpu::simulated::scenario=shared-gpu",
		"processors::batch::timeout=1s",
		"service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,batch]")

	prom.Eventually(t, 90*time.Second, "series through the gateway", func() error {
		if err := eightGPUsWithIdentity(p, `hw_gpu_utilization_ratio{hw_gpu_task="general"}`, "e2e-gw-node"); err != nil {
			return err
		}
		pods, err := p.Query(`nvidia_gpu_pod_memory_usage_bytes{host_name="e2e-gw-node",nvidia_gpu_index="0"}`)
		if err != nil {
			return err
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d pods on the shared GPU, want 2", len(pods))
		}
		return nil
	})
}
