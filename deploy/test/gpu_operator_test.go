package deploytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

// The NVIDIA GPU Operator cannot unload the kernel module (driver upgrade) or change the
// MIG layout while a process holds /dev/nvidia* open. Its k8s-driver-manager and
// mig-manager move GPU clients off the node by rewriting node labels their DaemonSets
// select on; the agent's node affinity follows the same labels (deploy/README.md,
// "GPU Operator: driver upgrades and MIG changes").
const (
	pausedForDriverUpgrade = "paused-for-driver-upgrade"
	pausedForMIGChange     = "paused-for-mig-change"
	clientLabel            = "nvidia.com/gpu.deploy.client"        // GPU Operator 26.7+
	dcgmExporterLabel      = "nvidia.com/gpu.deploy.dcgm-exporter" // every version
)

// gpuOperatorNodes are nodes as the GPU Operator (or no operator) labels them, and whether
// the agent belongs there.
var gpuOperatorNodes = []struct {
	name   string
	labels map[string]string
	runs   bool
}{
	{"GFD, no GPU Operator", map[string]string{"nvidia.com/gpu.present": "true"}, true},
	{"NFD only", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true"}, true},
	{"no GPU", map[string]string{"kubernetes.io/os": "linux"}, false},
	{"GPU Operator 26.7, running", map[string]string{"nvidia.com/gpu.present": "true", clientLabel: "true", dcgmExporterLabel: "true"}, true},
	{"GPU Operator 26.7, driver upgrade", map[string]string{"nvidia.com/gpu.present": "true", clientLabel: pausedForDriverUpgrade, dcgmExporterLabel: pausedForDriverUpgrade}, false},
	{"GPU Operator 26.7, MIG change", map[string]string{"nvidia.com/gpu.present": "true", clientLabel: pausedForMIGChange, dcgmExporterLabel: pausedForMIGChange}, false},
	// k8s-driver-manager appends its value to one it does not know.
	{"driver upgrade during a MIG change", map[string]string{"nvidia.com/gpu.present": "true", clientLabel: pausedForMIGChange + "_" + pausedForDriverUpgrade}, false},
	{"GPU clients disabled on the node", map[string]string{"nvidia.com/gpu.present": "true", clientLabel: "false"}, false},
	{"older GPU Operator, running", map[string]string{"nvidia.com/gpu.present": "true", dcgmExporterLabel: "true"}, true},
	{"older GPU Operator, driver upgrade", map[string]string{"nvidia.com/gpu.present": "true", dcgmExporterLabel: pausedForDriverUpgrade}, false},
	{"older GPU Operator, MIG change", map[string]string{"feature.node.kubernetes.io/pci-10de.present": "true", dcgmExporterLabel: pausedForMIGChange}, false},
	// The agent replaces dcgm-exporter: turning dcgm-exporter off on a node keeps the agent.
	{"dcgm-exporter off on the node", map[string]string{"nvidia.com/gpu.present": "true", clientLabel: "true", dcgmExporterLabel: "false"}, true},
	{"DRA stack, driver upgrade", map[string]string{"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.dcgm-exporter-dra": pausedForDriverUpgrade}, false},
}

// checkLeavesForGPUOperator evaluates the agent's required node affinity on
// gpuOperatorNodes, as the scheduler and the DaemonSet controller evaluate it.
func checkLeavesForGPUOperator(t *testing.T, a *corev1.Affinity) {
	t.Helper()
	sel, err := nodeaffinity.NewNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	if err != nil {
		t.Fatalf("node affinity: %v", err)
	}
	for _, n := range gpuOperatorNodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node", Labels: n.labels}}
		if got := sel.Match(node); got != n.runs {
			t.Errorf("node %q (%v): the agent runs there = %v, want %v", n.name, n.labels, got, n.runs)
		}
	}
}

// TestAgentLeavesForGPUOperator: with a real API server and a real DaemonSet controller
// (kube-controller-manager, daemonset controller only), the agent's pod is deleted from a
// GPU node when the GPU Operator pauses its GPU clients there for a driver upgrade or a MIG
// change, and comes back when it sets them back; a node without the GPU Operator's labels
// keeps its agent throughout. Both the kustomize base and the Helm chart's DaemonSet are
// applied as rendered, so the admission policy admits the controller's hostPID pods too.
func TestAgentLeavesForGPUOperator(t *testing.T) {
	for _, f := range []struct {
		name   string
		render func(t *testing.T) *objects
	}{
		{"kustomize base", func(t *testing.T) *objects { return kustomizeBuild(t, "base", "") }},
		{"helm defaults", func(t *testing.T) *objects { return helmTemplate(t, "") }},
	} {
		t.Run(f.name, func(t *testing.T) {
			// A cluster of its own: both forms name their DaemonSet alike in one namespace.
			s := kubeapi.Start(t)
			startDaemonSetController(t, s)
			o := f.render(t)
			newApplier(t, s).apply(t, o)
			ds := o.daemonSet(t, "otelcol-gpu-agent")
			if ds.Namespace == "" {
				ds.Namespace = releaseNamespace
			}
			stop := emulateNodes(t, s, ds.Namespace)
			defer stop()
			checkAgentLeavesForGPUOperator(t, s, ds)
		})
	}
}

func checkAgentLeavesForGPUOperator(t *testing.T, s *kubeapi.Server, ds *appsv1.DaemonSet) {
	ctx := context.Background()
	ns := ds.Namespace
	// GPU Operator 26.7 labels its GPU nodes so; an older one has no client label.
	nodes := map[string]map[string]string{
		"gpu-operated":     {"nvidia.com/gpu.present": "true", clientLabel: "true", dcgmExporterLabel: "true"},
		"gpu-old-operator": {"nvidia.com/gpu.present": "true", dcgmExporterLabel: "true"},
		"gpu-no-operator":  {"feature.node.kubernetes.io/pci-10de.present": "true"},
		"cpu":              {"kubernetes.io/os": "linux"},
	}
	for name, labels := range nodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		node, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// The API server taints a new node not-ready (NoSchedule), which no DaemonSet pod
		// tolerates; the kubelet's first Ready status lifts it. No kubelet runs here.
		node.Spec.Taints = nil
		if _, err := s.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// agentOn: whether the DaemonSet has a live (not terminating) pod for node.
	agentOn := func(node string) (bool, error) {
		pods, err := s.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(ds.Spec.Selector)})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && podNode(p) == node {
				return true, nil
			}
		}
		return false, nil
	}
	waitAgent := func(node string, want bool, why string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := agentOn(node)
			if err == nil && got == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: agent pod on node %s = %v (err %v), want %v", why, node, got, err, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitAgent("gpu-operated", true, "GPU Operator 26.7 node")
	waitAgent("gpu-old-operator", true, "older GPU Operator node")
	waitAgent("gpu-no-operator", true, "node without the GPU Operator")
	waitAgent("cpu", false, "node without a GPU")

	for _, pause := range []struct {
		node   string
		labels map[string]string
	}{
		// What k8s-driver-manager's evictAllGPUOperatorComponents and mig-manager's
		// shutdownKubernetesGPUClients write; then what they write back.
		{"gpu-operated", map[string]string{clientLabel: pausedForDriverUpgrade, dcgmExporterLabel: pausedForDriverUpgrade}},
		{"gpu-operated", map[string]string{clientLabel: pausedForMIGChange, dcgmExporterLabel: pausedForMIGChange}},
		{"gpu-old-operator", map[string]string{dcgmExporterLabel: pausedForDriverUpgrade}},
		{"gpu-old-operator", map[string]string{dcgmExporterLabel: pausedForMIGChange}},
	} {
		restore := map[string]string{}
		for k := range pause.labels {
			restore[k] = nodes[pause.node][k]
		}
		labelNode(t, s, pause.node, pause.labels)
		waitAgent(pause.node, false, fmt.Sprintf("labels %v", pause.labels))
		// The node without the GPU Operator keeps its agent throughout.
		if on, err := agentOn("gpu-no-operator"); err != nil || !on {
			t.Errorf("labels %v on %s: the agent left gpu-no-operator too (err %v)", pause.labels, pause.node, err)
		}
		labelNode(t, s, pause.node, restore)
		waitAgent(pause.node, true, fmt.Sprintf("labels set back to %v", restore))
	}
}

// emulateNodes does, for the pods of namespace, the two things of a cluster that the
// DaemonSet controller waits for and no process here does: the scheduler binds each new
// pod to the node the controller pinned it to, and the node's kubelet, once a bound pod is
// being deleted, stops it and removes it (a delete with no grace period). Every decision
// to create or delete a pod stays the controller's.
func emulateNodes(t *testing.T, s *kubeapi.Server, namespace string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := s.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, p := range pods.Items {
					switch {
					case p.DeletionTimestamp != nil:
						_ = s.Client.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))})
					case p.Spec.NodeName == "" && podNode(p) != "":
						_ = s.Client.CoreV1().Pods(namespace).Bind(ctx, &corev1.Binding{
							ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: namespace},
							Target:     corev1.ObjectReference{Kind: "Node", Name: podNode(p)},
						}, metav1.CreateOptions{})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// podNode is the node a DaemonSet pod is for: spec.nodeName once bound, else the
// metadata.name field the controller's node affinity pins it to.
func podNode(p corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// labelNode sets labels on a node (a merge patch, as `kubectl label --overwrite` does).
func labelNode(t *testing.T, s *kubeapi.Server, node string, labels map[string]string) {
	t.Helper()
	var parts []string
	for k, v := range labels {
		parts = append(parts, strconv.Quote(k)+":"+strconv.Quote(v))
	}
	patch := `{"metadata":{"labels":{` + strings.Join(parts, ",") + `}}}`
	if _, err := s.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("labelling node %s: %v", node, err)
	}
}

// startDaemonSetController runs kube-controller-manager (built by `make deps` from the
// same Kubernetes release as kube-apiserver) against s with the DaemonSet controller only,
// as cluster admin, until the test ends.
func startDaemonSetController(t *testing.T, s *kubeapi.Server) {
	t.Helper()
	bin := filepath.Join(repoRoot(t), "bin", "kube-controller-manager")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("kube-controller-manager is not built (%v): run `make deps` at the repository root", err)
	}
	dir := t.TempDir()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubeapi"] = &clientcmdapi.Cluster{Server: s.URL, CertificateAuthorityData: s.CAData}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: s.Admin.CertData, ClientKeyData: s.Admin.KeyData}
	cfg.Contexts["kubeapi"] = &clientcmdapi.Context{Cluster: "kubeapi", AuthInfo: "admin"}
	cfg.CurrentContext = "kubeapi"
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "kube-controller-manager.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin,
		"--kubeconfig="+kubeconfig,
		"--controllers=daemonset",
		"--leader-elect=false",
		// Its own serving endpoint (health, metrics) on loopback, a port the kernel picks.
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--cert-dir="+filepath.Join(dir, "certs"),
		"-v=2",
	)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = out.Close()
		if t.Failed() {
			log, _ := os.ReadFile(out.Name())
			t.Logf("kube-controller-manager's log (tail):\n%s", tail(string(log), 8000))
		}
	})
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
