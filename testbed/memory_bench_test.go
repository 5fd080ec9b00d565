//go:build e2e && benchpipelines

package testbed

// TestAgentMemory measures the agent's resident memory on an 8-GPU node at the shipped
// 10 s interval (issue 15's target: under 80 MiB), split into its anonymous part (heap,
// stacks) and its file-backed part (the binary's pages), in three set-ups:
//
//   - the shipped configs/agent.yaml with everything on: the kubelet, gpu_enrich's
//     kube_api and k8s_attributes, both against a real kube-apiserver as the shipped
//     ServiceAccount, in a cluster with BENCH_CLUSTER_REPLICASETS ReplicaSets (k8s_attributes
//     watches them cluster-wide to name Deployments);
//   - the same without k8s_attributes (workload names then come from elsewhere);
//   - a bare host (deploy/config-overlays/bare-host.yaml: no kubelet, no API server).
//
// It runs the node agent's lean build (otelcol-gpu-agent), and the shipped set-up also on
// the full build, to show what the lean one saves. The file-backed part depends on what of
// the binary the page cache holds when the agent starts, and how it got there (the kernel
// maps cached neighbours of every page the agent faults in, whole large folios of a file
// just written), so each set-up starts with the binary evicted from the page cache, as
// after a node's boot or under memory pressure, and the shipped set-up runs again with the
// whole binary read into the cache and with a copy just written, as right after an image
// pull or a package install.
//
// Not a pass/fail test: it logs a table for docs/benchmarks.md.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

func TestAgentMemory(t *testing.T) {
	warm := max(benchEnv("BENCH_WARMUP", 15*time.Second), 60*time.Second)
	window := benchEnv("BENCH_WINDOW", 60*time.Second)
	replicaSets := 500
	if v := os.Getenv("BENCH_CLUSTER_REPLICASETS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("BENCH_CLUSTER_REPLICASETS=%q: %v", v, err)
		}
		replicaSets = n
	}

	s := kubeapi.Start(t)
	applyShippedAgentRBAC(t, s)
	createK8sPods(t, s)
	createReplicaSets(t, s, replicaSets)
	kubeconfig := s.WriteKubeconfig(t, s.Token(t, "otelcol-gpu", "otelcol-gpu-agent"), "otelcol-gpu")
	uuids := simulatedUUIDs(t, "dgxh100")

	shipped := func() agentNode {
		node := k8sFakeNode(t, uuids)
		node.sets = []string{
			"processors::k8s_attributes::auth_type=kubeConfig",
			"processors::gpu_enrich::kube_api::auth_type=kubeConfig",
			"service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,k8s_attributes,batch]",
		}
		node.env = []string{"KUBECONFIG=" + kubeconfig, "K8S_NODE_NAME=" + k8sNode}
		return node
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| set-up | build | binary in page cache at start | VmRSS MiB (mean, max) | RssAnon MiB | RssFile MiB |\n|---|---|---|---|---|---|\n")
	// How much of the binary the page cache holds when the agent starts.
	const (
		evicted = "none (evicted)"
		read    = "all (read)"
		written = "all (just written)"
	)
	for _, setup := range []struct {
		name  string
		full  bool
		cache string
		node  func() agentNode
	}{
		{"shipped agent: kubelet, kube_api, k8s_attributes", false, evicted, shipped},
		{"shipped agent: kubelet, kube_api, k8s_attributes", false, read, shipped},
		{"shipped agent: kubelet, kube_api, k8s_attributes", false, written, shipped},
		{"shipped agent: kubelet, kube_api, k8s_attributes", true, evicted, shipped},
		{"shipped agent: kubelet, kube_api, k8s_attributes", true, written, shipped},
		{"without k8s_attributes: kubelet, kube_api", false, evicted, func() agentNode {
			node := k8sFakeNode(t, uuids)
			node.sets = []string{"processors::gpu_enrich::kube_api::auth_type=kubeConfig"}
			node.env = []string{"KUBECONFIG=" + kubeconfig, "K8S_NODE_NAME=" + k8sNode}
			return node
		}},
		{"bare host (bare-host overlay)", false, evicted, func() agentNode {
			return agentNode{overlays: []string{"../deploy/config-overlays/bare-host.yaml"}}
		}},
	} {
		p := prom.Start(t, "")
		node := setup.node()
		build := "otelcol-gpu-agent"
		node.binary = proc.AgentBinary(t)
		if setup.full {
			node.binary, build = proc.CollectorBinary(t), "otelcol-gpu (full)"
		}
		var err error
		switch setup.cache {
		case evicted:
			err = proc.EvictFromPageCache(node.binary)
		case read:
			err = proc.LoadIntoPageCache(node.binary)
		case written:
			node.binary = proc.FreshCopy(t, node.binary)
		}
		if err != nil {
			t.Fatal(err)
		}
		// The shipped intervals, after startAgentOn's test defaults (the last wins); the batch
		// timeout is configs/agent.yaml's own.
		node.env = append(node.env, "OTELCOL_GPU_INTERVAL=10s")
		node.sets = append(node.sets, "processors::gpu_enrich::kubelet::refresh_interval=10s")
		agent := startAgentOn(t, p, "bench-memory", "dgxh100", "shared-gpu", node)
		time.Sleep(warm)
		var samples []proc.Memory
		for end := time.Now().Add(window); time.Now().Before(end); time.Sleep(5 * time.Second) {
			m, err := agent.Memory()
			if err != nil {
				t.Fatal(err)
			}
			samples = append(samples, m)
		}
		if n, err := seriesOf(p, "bench-memory"); err != nil || len(n) == 0 {
			t.Fatalf("%s: the agent delivered nothing (%v)", setup.name, err)
		}
		mean := func(f func(proc.Memory) int64) float64 {
			var sum int64
			for _, m := range samples {
				sum += f(m)
			}
			return float64(sum) / float64(len(samples)) / (1 << 20)
		}
		var peak int64
		for _, m := range samples {
			peak = max(peak, m.RSS)
		}
		fmt.Fprintf(&table, "| %s | %s | %s | %.1f, %.1f | %.1f | %.1f |\n", setup.name, build, setup.cache,
			mean(func(m proc.Memory) int64 { return m.RSS }), float64(peak)/(1<<20),
			mean(func(m proc.Memory) int64 { return m.Anon }), mean(func(m proc.Memory) int64 { return m.File }))
		agent.Stop(10 * time.Second)
		p.Stop()
	}
	t.Logf("8 simulated H100 at 10 s, %d ReplicaSets in the cluster, %s after %s:%s", replicaSets, window, warm, table.String())
}

// createReplicaSets adds n ReplicaSets on other nodes' behalf, as a cluster of that size
// holds: k8s_attributes keeps every one (trimmed) to name Deployments.
func createReplicaSets(t *testing.T, s *kubeapi.Server, n int) {
	t.Helper()
	ctx := context.Background()
	s.EnsureServiceAccount(t, "apps", "default")
	for i := range n {
		name := fmt.Sprintf("svc-%d-7c9b4f5d8f", i)
		labels := map[string]string{"app": fmt.Sprintf("svc-%d", i), "pod-template-hash": "7c9b4f5d8f"}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, Labels: labels},
			Spec: appsv1.ReplicaSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/svc:1"}}},
				},
			},
		}
		if _, err := s.Client.AppsV1().ReplicaSets("apps").Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatalf("ReplicaSet %s: %v", name, err)
		}
	}
}
