//go:build e2e

package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"google.golang.org/grpc/codes"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

const (
	identityNamespace = "otelcol-gpu"
	agentSA           = "otelcol-gpu-agent"
	gatewayAudience   = "otelcol-gpu-gateway"
)

// identityCluster is a real API server holding what the kubelet would see: nodes node-a
// and node-b, an agent pod on each (ServiceAccount otelcol-gpu-agent) and another
// workload's pod on node-a; the issuer's discovery document is readable without
// credentials, as deploy/config-overlays/gateway-agent-identity.yaml asks of clusters
// whose issuer is not public.
func identityCluster(t *testing.T) *kubeapi.Server {
	t.Helper()
	kube := kubeapi.Start(t)
	kube.EnsureServiceAccount(t, identityNamespace, agentSA)
	kube.EnsureServiceAccount(t, identityNamespace, "batch-job")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, node := range []string{"node-a", "node-b"} {
		if _, err := kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, pod := range []struct{ name, sa, node string }{
		{"agent-a", agentSA, "node-a"},
		{"agent-b", agentSA, "node-b"},
		{"batch-job-a", "batch-job", "node-a"},
	} {
		_, err := kube.Client.CoreV1().Pods(identityNamespace).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod.name},
			Spec: corev1.PodSpec{
				ServiceAccountName: pod.sa, NodeName: pod.node,
				Containers: []corev1.Container{{Name: "c", Image: "registry.example/c:1"}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := kube.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "service-account-issuer-discovery-unauthenticated"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "system:service-account-issuer-discovery"},
		Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "Group", Name: "system:unauthenticated"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// forged is what a compromised agent sends to blame another node: host.name and
// k8s.node.name of victim, a failed GPU (hw.status, which fires GPUFailed) in a namespace
// of another team.
func forged(victim, gpu string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	attrs := rm.Resource().Attributes()
	attrs.PutStr("host.name", victim)
	attrs.PutStr("k8s.node.name", victim)
	attrs.PutStr("k8s.namespace.name", "payments")
	attrs.PutStr("hw.id", gpu)
	attrs.PutStr("hw.type", "gpu")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("hw.status")
	dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.Attributes().PutStr("hw.state", "failed")
	dp.SetIntValue(1)
	dp.SetTimestamp(pcommon.NewTimestampFromTime(time.Now()))
	return md
}

// TestGatewayStampsEachAgentsOwnNode runs the gateway with
// deploy/config-overlays/gateway-agent-identity.yaml against a real kube-apiserver's
// service-account issuer. Node A's agent, with its pod's projected token, cannot write
// series that say node B: whatever host.name and k8s.node.name it sends, they are stored
// as node-a; node B's token writes node-b. Tokens that are not an agent pod's are refused
// and counted: another workload's token on the same node, the agents' ServiceAccount
// without a pod (no node in it), a token for another audience, the shared static token,
// none. A real agent whose projected token file is swapped the way the kubelet renews it
// (..data symlink) starts being accepted without a restart, and its series carry its
// token's node even though its configuration says node-b.
func TestGatewayStampsEachAgentsOwnNode(t *testing.T) {
	kube := identityCluster(t)
	tokenA := kube.PodToken(t, identityNamespace, agentSA, "agent-a", gatewayAudience)
	tokenB := kube.PodToken(t, identityNamespace, agentSA, "agent-b", gatewayAudience)

	p := prom.Start(t, "")
	a := newGatewayAuth(t)
	a.extraEnv = []string{
		"OTELCOL_GPU_AGENT_TOKEN_ISSUER=" + kube.Issuer,
		"OTELCOL_GPU_AGENT_TOKEN_ISSUER_CA_FILE=" + kube.CAFile,
	}
	configs := []string{
		filepath.Join(proc.RepoRoot(), "configs", "gateway.yaml"),
		filepath.Join(proc.RepoRoot(), "deploy", "config-overlays", "gateway-agent-identity.yaml"),
	}
	otlp, telemetry, _ := startGatewayWithTelemetry(t, p.RemoteWriteURL(), a, configs, "processors::batch::timeout=1s")

	if got := export(t, otlp, forged("node-b", "GPU-forged-by-a"), a.dialOptions(tokenA)...); got != codes.OK {
		t.Fatalf("node A's token: %s, want OK", got)
	}
	if got := export(t, otlp, forged("node-b", "GPU-of-b"), a.dialOptions(tokenB)...); got != codes.OK {
		t.Fatalf("node B's token: %s, want OK", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hour := int64(3600)
	nodeless, err := kube.Client.CoreV1().ServiceAccounts(identityNamespace).CreateToken(ctx, agentSA,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour, Audiences: []string{gatewayAudience}}},
		metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]string{
		"another workload's pod on node-a": kube.PodToken(t, identityNamespace, "batch-job", "batch-job-a", gatewayAudience),
		"the agents' account, no pod":      nodeless.Status.Token,
		"node A's pod, another audience":   kube.PodToken(t, identityNamespace, agentSA, "agent-a", "vault"),
		"the shared static token":          a.token,
		"no token":                         "",
	}
	for what, token := range refused {
		if got := export(t, otlp, forged("node-b", "GPU-refused"), a.dialOptions(token)...); got != codes.Unauthenticated {
			t.Errorf("%s: %s, want Unauthenticated", what, got)
		}
	}

	prom.Eventually(t, 60*time.Second, "the forged and the genuine series", func() error {
		got, err := p.Query(`hw_status{hw_state="failed"}`)
		if err != nil {
			return err
		}
		hosts := map[string]string{}
		for _, s := range got {
			if s.Labels["k8s_node_name"] != s.Labels["host_name"] {
				return fmt.Errorf("%s: k8s_node_name %q, host_name %q: both must be the token's node", s.Labels["hw_id"], s.Labels["k8s_node_name"], s.Labels["host_name"])
			}
			hosts[s.Labels["hw_id"]] = s.Labels["host_name"]
		}
		want := map[string]string{"GPU-forged-by-a": "node-a", "GPU-of-b": "node-b"}
		if fmt.Sprint(hosts) != fmt.Sprint(want) {
			return fmt.Errorf("GPU → stored host_name %v, want %v (node A's forgery stored as node-a; nothing refused stored)", hosts, want)
		}
		return nil
	})
	// Two of the refusals are identities the oidc extension accepted (valid tokens of this
	// cluster) and auth_audit refused: another ServiceAccount, no node.
	if got := selfMetric(t, telemetry, `otelcol_auth_refusals`); got != float64(len(refused)) {
		t.Errorf("otelcol_auth_refusals = %v, want %d", got, len(refused))
	}

	// A real agent, configured as node-b (a compromised agent's configuration), whose
	// projected token starts as another workload's and is then renewed the kubelet's way:
	// the atomic writer's ..data symlink swapped to a new directory.
	tokenDir := t.TempDir()
	previous := ""
	project := func(gen, token string) {
		t.Helper()
		dir := filepath.Join(tokenDir, "..gen"+gen)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(tokenDir, "..data_tmp")
		if err := os.Symlink(filepath.Base(dir), tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(tokenDir, "..data")); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(tokenDir, "token")); err != nil {
			if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(tokenDir, "token")); err != nil {
				t.Fatal(err)
			}
		}
		// The atomic writer then removes the previous generation (what the agent's file
		// watcher notices: its token file's inode goes away).
		if previous != "" {
			if err := os.RemoveAll(previous); err != nil {
				t.Fatal(err)
			}
		}
		previous = dir
	}
	project("1", refused["another workload's pod on node-a"])

	uuids := simulatedUUIDs(t, "dgxh100")
	node := fakeNode(t, uuids)
	agentHealth := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	proc.Agent(t, "agent-on-node-a", []string{
		"OTELCOL_GPU_GATEWAY_CA_FILE=" + a.caFile,
		"OTELCOL_GPU_GATEWAY_TOKEN_FILE=" + filepath.Join(tokenDir, "token"),
		"OTELCOL_GPU_GATEWAY_ENDPOINT=" + otlp,
		"OTELCOL_GPU_HOST_NAME=node-b",
		"K8S_NODE_NAME=node-b",
		"OTELCOL_GPU_INTERVAL=1s",
		"OTELCOL_GPU_KUBELET_SOCKET=unix://" + node.kubeletSocket,
		"OTELCOL_GPU_PROC_ROOT=" + node.procRoot,
		"OTELCOL_GPU_POD_LOGS_DIR=" + node.podLogsDir,
		"OTELCOL_GPU_QUEUE_DIR=" + t.TempDir(),
		"OTELCOL_GPU_HEALTH_ENDPOINT=" + agentHealth,
		fmt.Sprintf("OTELCOL_GPU_TELEMETRY_PORT=%d", proc.FreePort(t)),
	}, []string{filepath.Join(proc.RepoRoot(), "configs", "agent-to-gateway.yaml")}, agentHealth,
		"receivers::gpu::backend=simulated",
		"receivers::gpu::simulated::scenario=shared-gpu",
		"processors::batch::timeout=1s",
		"service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,batch]")

	// Refused while it presents the other workload's token: nothing of it is stored.
	time.Sleep(5 * time.Second)
	if got, err := p.Query(`count by (host_name) (hw_gpu_utilization_ratio)`); err != nil || len(got) != 0 {
		t.Fatalf("with another workload's token the agent's series were stored: %v %v", got, err)
	}
	project("2", tokenA)
	prom.Eventually(t, 90*time.Second, "the agent's series after its token was renewed", func() error {
		got, err := p.Query(`count by (host_name, k8s_node_name) (hw_gpu_utilization_ratio{hw_gpu_task="general"})`)
		if err != nil {
			return err
		}
		var seen []string
		for _, s := range got {
			seen = append(seen, fmt.Sprintf("host_name=%q k8s_node_name=%q: %v", s.Labels["host_name"], s.Labels["k8s_node_name"], s.Value))
		}
		if len(got) != 1 || got[0].Labels["host_name"] != "node-a" || got[0].Value != float64(len(uuids)) {
			return fmt.Errorf("GPU series by node: %s; want all %d on node-a", strings.Join(seen, "; "), len(uuids))
		}
		return nil
	})
}
