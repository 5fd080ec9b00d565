//go:build e2e

package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

// now deletes a pod at once, as the kubelet confirms a pod's end: with no kubelet, a
// graceful deletion would leave the pod in the API server, marked, for good.
var now = metav1.DeleteOptions{GracePeriodSeconds: new(int64)}

// k8sNode is the node the k8s_attributes tests run the agent on: its pods exist in the
// API server (with owners and labels) and in the fake kubelet (with GPUs).
const k8sNode = "gpu-node-1"

// k8sPod is one workload pod on the node: its owner as the API server holds it, its
// app label, and the GPU (index) the kubelet assigned to it.
type k8sPod struct {
	namespace, name string
	ownerKind       string // ReplicaSet, StatefulSet or Job
	ownerName       string
	labels          map[string]string
	gpu             int
	// configHash makes it a static pod's mirror: the kubelet's UID for the pod (its
	// cgroups, its log directory), while the API object has a UID of its own.
	configHash string
}

var k8sPods = []k8sPod{
	// A Deployment's pod: k8s_attributes names the Deployment from the ReplicaSet's name
	// and the pod-template-hash label, as the Deployment controller makes them.
	{"ml", "trainer-5d8f7c9b4f-x2x7k", "ReplicaSet", "trainer-5d8f7c9b4f",
		map[string]string{"app.kubernetes.io/name": "trainer", "pod-template-hash": "5d8f7c9b4f"}, 0, ""},
	{"ml", "ranks-0", "StatefulSet", "ranks", map[string]string{"app.kubernetes.io/name": "ranks"}, 1, ""},
	{"batch", "eval-q8k2p", "Job", "eval", map[string]string{"app.kubernetes.io/name": "eval"}, 2, ""},
	// Deleted from the API server during the test; the kubelet keeps reporting it.
	{"ml", "scratch", "", "", map[string]string{"app.kubernetes.io/name": "scratch"}, 3, ""},
	// A static pod (a node's GPU health check from /etc/kubernetes/manifests), owned by the
	// node as the kubelet writes its mirror.
	{"kube-system", "gpu-check-" + k8sNode, "Node", k8sNode, map[string]string{"app.kubernetes.io/name": "gpu-check"}, 5,
		"6f1e2d3c4b5a69788796a5b4c3d2e1f0"},
}

// startK8sAgent runs the shipped agent on the node with k8s_attributes in its pipeline,
// reaching the API server as the shipped agent ServiceAccount (deploy/kubernetes/base RBAC
// applied): only the API endpoint and the credentials differ from a pod's, a kubeconfig in
// place of the in-cluster token. extraSets go after those (e.g. the delete grace period).
func startK8sAgent(t *testing.T, p *prom.Server, s *kubeapi.Server, host string, extraSets ...string) *proc.Process {
	t.Helper()
	return startK8sAgentAs(t, p, s, host, "otelcol-gpu-agent", nil, nil, extraSets...)
}

// startK8sAgentAs is startK8sAgent as the ServiceAccount otelcol-gpu/account, with config
// overlays (relative to configs/, merged after agent.yaml) and extra environment.
func startK8sAgentAs(t *testing.T, p *prom.Server, s *kubeapi.Server, host, account string, overlays, env []string, extraSets ...string) *proc.Process {
	t.Helper()
	uuids := simulatedUUIDs(t, "dgxh100")
	kubeconfig := s.WriteKubeconfig(t, s.Token(t, "otelcol-gpu", account), "otelcol-gpu")
	node := k8sFakeNode(t, uuids)
	node.overlays = overlays
	node.sets = append([]string{
		"processors::k8s_attributes::auth_type=kubeConfig",
		"processors::gpu_enrich::kube_api::auth_type=kubeConfig",
		"service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,k8s_attributes,batch]",
	}, extraSets...)
	node.env = append([]string{"KUBECONFIG=" + kubeconfig, "K8S_NODE_NAME=" + k8sNode}, env...)
	return startAgentOn(t, p, host, "dgxh100", "steady-training", node)
}

// k8sFakeNode serves k8sPods from a fake kubelet, each with its GPU.
func k8sFakeNode(t *testing.T, uuids []string) agentNode {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	var pods []fakekubelet.Pod
	for _, p := range k8sPods {
		pods = append(pods, fakekubelet.Pod{Namespace: p.namespace, Name: p.name, Containers: []fakekubelet.Container{
			{Name: "main", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{uuids[p.gpu]}}}},
		}})
	}
	node := agentNode{kubeletSocket: filepath.Join(dir, "kubelet.sock")}
	startFakeKubelet(t, node.kubeletSocket, pods, []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: uuids}})
	return node
}

// createK8sPods creates k8sPods in the API server, bound to the node as the scheduler would.
func createK8sPods(t *testing.T, s *kubeapi.Server) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"ml", "batch", "kube-system"} {
		s.EnsureServiceAccount(t, ns, "default")
	}
	for _, p := range k8sPods {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: p.namespace, Name: p.name, Labels: p.labels},
			Spec: corev1.PodSpec{
				NodeName:   k8sNode,
				Containers: []corev1.Container{{Name: "main", Image: "registry.example/train:1"}},
			},
		}
		if p.configHash != "" {
			pod.Annotations = map[string]string{"kubernetes.io/config.mirror": p.configHash}
		}
		if p.ownerKind != "" {
			apiVersion := "apps/v1"
			switch p.ownerKind {
			case "Job":
				apiVersion = "batch/v1"
			case "Node":
				apiVersion = "v1"
			}
			controller := true
			pod.OwnerReferences = []metav1.OwnerReference{{
				APIVersion: apiVersion, Kind: p.ownerKind, Name: p.ownerName,
				UID: types.UID("owner-" + p.ownerName), Controller: &controller,
			}}
		}
		if _, err := s.Client.CoreV1().Pods(p.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("pod %s/%s: %v", p.namespace, p.name, err)
		}
	}
}

// applyShippedAgentRBAC creates the agent's namespace, ServiceAccount, ClusterRole and
// binding from deploy/kubernetes/base, as `kubectl apply -k` would.
func applyShippedAgentRBAC(t *testing.T, s *kubeapi.Server) {
	t.Helper()
	ctx := context.Background()
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml"} {
		raw, err := os.ReadFile(filepath.Join(proc.RepoRoot(), "deploy", "kubernetes", "base", f))
		if err != nil {
			t.Fatal(err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
		for {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			switch o := obj.(type) {
			case *corev1.Namespace:
				_, err = s.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ServiceAccount:
				_, err = s.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = s.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = s.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			default:
				t.Fatalf("%s: unexpected %T", f, obj)
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
		}
	}
}

// nodePoolRule is the rule deploy/kubernetes/components/node-pool adds to the agent's
// ClusterRole, read from the component: its one JSON patch on ClusterRole
// otelcol-gpu-agent, one `add` of one rule at the end of the rules.
func nodePoolRule(t *testing.T) rbacv1.PolicyRule {
	t.Helper()
	const rel = "deploy/kubernetes/components/node-pool/kustomization.yaml"
	raw, err := os.ReadFile(filepath.Join(proc.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Patches []struct {
			Target struct{ Kind, Name string }
			Patch  string
		}
	}
	if err := utilyaml.Unmarshal(raw, &k); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	var rules []rbacv1.PolicyRule
	for _, p := range k.Patches {
		if p.Target.Kind != "ClusterRole" {
			continue
		}
		if p.Target.Name != "otelcol-gpu-agent" {
			t.Fatalf("%s patches ClusterRole %q, want otelcol-gpu-agent", rel, p.Target.Name)
		}
		var ops []struct {
			Op, Path string
			Value    rbacv1.PolicyRule
		}
		if err := utilyaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatalf("%s: the ClusterRole patch: %v", rel, err)
		}
		for _, op := range ops {
			if op.Op != "add" || op.Path != "/rules/-" {
				t.Fatalf("%s: the ClusterRole patch does %s %s, want add /rules/-", rel, op.Op, op.Path)
			}
			rules = append(rules, op.Value)
		}
	}
	if len(rules) != 1 {
		t.Fatalf("%s adds %d ClusterRole rules, want 1: %+v", rel, len(rules), rules)
	}
	return rules[0]
}

// gpuLabels is each GPU's (by index) label set of one GPU series on host, as written in
// the last 5 s: a series whose labels changed stays visible for Prometheus's 5-minute
// lookback under its old labels, since nothing marks it stale.
func gpuLabels(p *prom.Server, host string) (map[string]map[string]string, error) {
	s, err := p.Query(fmt.Sprintf(`last_over_time(hw_gpu_utilization_ratio{host_name=%q,hw_gpu_task="general"}[5s])`, host))
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, x := range s {
		if _, dup := out[x.Labels["nvidia_gpu_index"]]; dup {
			return nil, fmt.Errorf("GPU %s has two series in the last 5 s: %v and %v", x.Labels["nvidia_gpu_index"], out[x.Labels["nvidia_gpu_index"]], x.Labels)
		}
		out[x.Labels["nvidia_gpu_index"]] = x.Labels
	}
	if len(out) != 8 {
		return out, fmt.Errorf("%d GPUs of %s in Prometheus, want 8", len(out), host)
	}
	return out, nil
}

// TestK8sAttributesFromTheAPIServer: the shipped agent, with k8s_attributes watching a real
// API server under the shipped least-privilege role, puts each GPU's workload, app label
// and node on its series; a pod deleted from the API server loses them.
func TestK8sAttributesFromTheAPIServer(t *testing.T) {
	s := kubeapi.Start(t)
	applyShippedAgentRBAC(t, s)
	createK8sPods(t, s)
	p := prom.Start(t, "")
	// A short grace before a deleted pod is forgotten (contrib's default is 2 minutes; its
	// delete loop still runs every 30 s): a timing knob of the test, not of the setup.
	startK8sAgent(t, p, s, "e2e-k8s", "processors::k8s_attributes::pod_delete_grace_period=1s")

	mirror, err := s.Client.CoreV1().Pods("kube-system").Get(context.Background(), "gpu-check-"+k8sNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"0": {"k8s_deployment_name": "trainer", "k8s_pod_label_app": "trainer", "k8s_pod_name": "trainer-5d8f7c9b4f-x2x7k"},
		"1": {"k8s_statefulset_name": "ranks", "k8s_pod_label_app": "ranks", "k8s_pod_name": "ranks-0"},
		"2": {"k8s_job_name": "eval", "k8s_pod_label_app": "eval", "k8s_namespace_name": "batch"},
		"3": {"k8s_pod_label_app": "scratch", "k8s_pod_name": "scratch"},
		// The static pod's GPU carries its mirror's UID (what k8s_attributes and
		// kube-state-metrics know), not the config hash, so k8s_attributes finds it.
		"5": {"k8s_pod_label_app": "gpu-check", "k8s_pod_name": "gpu-check-" + k8sNode, "k8s_pod_uid": string(mirror.UID)},
	}
	prom.Eventually(t, 90*time.Second, "workload labels from the API server", func() error {
		got, err := gpuLabels(p, "e2e-k8s")
		if err != nil {
			return err
		}
		for gpu, labels := range want {
			for k, v := range labels {
				if got[gpu][k] != v {
					return fmt.Errorf("GPU %s: %s=%q, want %q (labels %v)", gpu, k, got[gpu][k], v, got[gpu])
				}
			}
			if got[gpu]["k8s_node_name"] != k8sNode {
				return fmt.Errorf("GPU %s: k8s_node_name=%q, want %s", gpu, got[gpu]["k8s_node_name"], k8sNode)
			}
		}
		if l := got["4"]; l["k8s_pod_name"] != "" || l["k8s_deployment_name"] != "" {
			return fmt.Errorf("GPU 4 (no pod) is labelled %v", l)
		}
		return nil
	})

	if err := s.Client.CoreV1().Pods("ml").Delete(context.Background(), "scratch", now); err != nil {
		t.Fatal(err)
	}
	prom.Eventually(t, 90*time.Second, "the deleted pod's labels gone", func() error {
		got, err := gpuLabels(p, "e2e-k8s")
		if err != nil {
			return err
		}
		// gpu_enrich still attributes GPU 3 (the kubelet reports the pod); only what came
		// from the API server is gone.
		if l := got["3"]; l["k8s_pod_label_app"] != "" || l["k8s_node_name"] != "" || l["k8s_pod_name"] != "scratch" {
			return fmt.Errorf("GPU 3 after the pod's deletion: %v", l)
		}
		if got["0"]["k8s_deployment_name"] != "trainer" {
			return fmt.Errorf("GPU 0 lost its deployment: %v", got["0"])
		}
		return nil
	})
}

// TestK8sNodePoolFromTheNodeLabel: deploy/config-overlays/node-pool.yaml on the shipped
// agent, against a real API server that holds the agent's Node with a GKE pool label, under
// the shipped role plus the rule components/node-pool adds (as `kubectl apply -k` with the
// component would leave it): every GPU a pod holds carries the label's value as
// k8s_node_pool, with its workload labels; a GPU no pod holds carries none. The Node is
// watched: a new value follows. A second agent with the overlay under the shipped role
// alone (no nodes) keeps its workload labels and gets no pool, and logs the refusal, which
// names its own Node: it asked for that one only (a field selector on the name).
func TestK8sNodePoolFromTheNodeLabel(t *testing.T) {
	const poolLabel = "cloud.google.com/gke-nodepool"
	ctx := context.Background()
	s := kubeapi.Start(t)
	applyShippedAgentRBAC(t, s)
	createK8sPods(t, s)
	if _, err := s.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: k8sNode, Labels: map[string]string{poolLabel: "h100-spot", "kubernetes.io/hostname": k8sNode},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The shipped role alone, for the second agent's own ServiceAccount.
	role, err := s.Client.RbacV1().ClusterRoles().Get(ctx, "otelcol-gpu-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const withoutNodes = "otelcol-gpu-agent-without-nodes"
	s.EnsureServiceAccount(t, "otelcol-gpu", withoutNodes)
	if _, err := s.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: withoutNodes}, Rules: role.Rules,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: withoutNodes},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: withoutNodes},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: withoutNodes, Namespace: "otelcol-gpu"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The component's rule on the shipped role.
	role.Rules = append(role.Rules, nodePoolRule(t))
	if _, err := s.Client.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	p := prom.Start(t, "")
	overlay := []string{"../deploy/config-overlays/node-pool.yaml"}
	env := []string{"OTELCOL_GPU_NODE_POOL_LABEL=" + poolLabel}
	startK8sAgentAs(t, p, s, "e2e-k8s-pool", "otelcol-gpu-agent", overlay, env)
	refused := startK8sAgentAs(t, p, s, "e2e-k8s-pool-refused", withoutNodes, overlay, env)

	pooled := func(host, pool string) func() error {
		return func() error {
			got, err := gpuLabels(p, host)
			if err != nil {
				return err
			}
			for gpu, l := range got {
				held := l["k8s_pod_label_app"] != ""
				switch {
				case gpu == "4" || gpu == "6" || gpu == "7":
					if held || l["k8s_node_pool"] != "" {
						return fmt.Errorf("GPU %s (no pod) is labelled %v", gpu, l)
					}
				case !held || l["k8s_node_name"] != k8sNode:
					return fmt.Errorf("GPU %s: no workload labels from the API server yet: %v", gpu, l)
				case l["k8s_node_pool"] != pool:
					return fmt.Errorf("GPU %s: k8s_node_pool=%q, want %q (labels %v)", gpu, l["k8s_node_pool"], pool, l)
				}
			}
			if got["0"]["k8s_deployment_name"] != "trainer" {
				return fmt.Errorf("GPU 0: %v", got["0"])
			}
			return nil
		}
	}
	prom.Eventually(t, 90*time.Second, "the node pool on the pods' GPUs", pooled("e2e-k8s-pool", "h100-spot"))

	// Started with the first and as long ago: without the nodes rule, workload labels and
	// no pool.
	prom.Eventually(t, 30*time.Second, "workload labels without the nodes rule", pooled("e2e-k8s-pool-refused", ""))
	// The API server names the one Node the list asked for: k8s_attributes lists with the
	// field selector metadata.name=$K8S_NODE_NAME, not every Node.
	prom.Eventually(t, 30*time.Second, "a log line naming the refused Node", func() error {
		want := `nodes \"` + k8sNode + `\" is forbidden`
		if out := refused.Output(); !strings.Contains(out, want) || !strings.Contains(out, `cannot list resource \"nodes\"`) {
			return fmt.Errorf("no %s ... cannot list resource \"nodes\" in the agent's log", want)
		}
		return nil
	})

	node, err := s.Client.CoreV1().Nodes().Get(ctx, k8sNode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[poolLabel] = "h100-reserved"
	if _, err := s.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	prom.Eventually(t, 60*time.Second, "the Node's new pool", pooled("e2e-k8s-pool", "h100-reserved"))
}

// TestK8sAttributesSurvivesAPIServerFaults: the API server refusing the agent (no role),
// hanging (frozen) or going away and coming back never stops GPU metrics, and the agent's
// memory does not grow with the outages.
func TestK8sAttributesSurvivesAPIServerFaults(t *testing.T) {
	s := kubeapi.Start(t)
	applyShippedAgentRBAC(t, s)
	createK8sPods(t, s)
	p := prom.Start(t, "")

	t.Run("refused: a ServiceAccount without the role", func(t *testing.T) {
		kubeconfig := s.ServiceAccountKubeconfig(t, "otelcol-gpu", "no-role")
		node := k8sFakeNode(t, simulatedUUIDs(t, "dgxh100"))
		node.sets = []string{
			"processors::k8s_attributes::auth_type=kubeConfig",
			"service::pipelines::metrics::processors=[memory_limiter,gpu_enrich,k8s_attributes,batch]",
		}
		node.env = []string{"KUBECONFIG=" + kubeconfig, "K8S_NODE_NAME=" + k8sNode}
		agent := startAgentOn(t, p, "e2e-k8s-refused", "dgxh100", "steady-training", node)
		prom.Eventually(t, 60*time.Second, "GPU series without workload labels", func() error {
			got, err := gpuLabels(p, "e2e-k8s-refused")
			if err != nil {
				return err
			}
			if l := got["0"]; l["k8s_pod_name"] == "" || l["k8s_deployment_name"] != "" {
				return fmt.Errorf("GPU 0: %v, want gpu_enrich's pod name and no workload", l)
			}
			return nil
		})
		prom.Eventually(t, 30*time.Second, "a log line naming the refusal", func() error {
			if out := agent.Output(); !strings.Contains(out, "forbidden") {
				return errors.New("no 'forbidden' in the agent's log")
			}
			return nil
		})
		if exited, err := agent.Exited(); exited {
			t.Fatalf("agent exited: %v", err)
		}
	})

	agent := startK8sAgent(t, p, s, "e2e-k8s-faults")
	prom.Eventually(t, 90*time.Second, "workload labels", func() error {
		got, err := gpuLabels(p, "e2e-k8s-faults")
		if err != nil {
			return err
		}
		if got["0"]["k8s_deployment_name"] != "trainer" {
			return fmt.Errorf("GPU 0: %v", got["0"])
		}
		return nil
	})

	// samplesDuring counts GPU 0's utilization samples stored for the last window.
	samplesDuring := func(window time.Duration) (int, error) {
		series, err := p.QueryRange(fmt.Sprintf(`hw_gpu_utilization_ratio{host_name="e2e-k8s-faults",hw_gpu_task="general",nvidia_gpu_index="0"}[%ds]`, int(window.Seconds())))
		if err != nil {
			return 0, err
		}
		n := 0
		for _, s := range series {
			n += len(s.Points)
		}
		return n, nil
	}
	outage := func(t *testing.T, what string, start, end func()) {
		t.Helper()
		start()
		time.Sleep(15 * time.Second)
		end()
		// The agent scrapes every second; the window allows for the batch and the
		// remote-write delay at its edges.
		prom.Eventually(t, 30*time.Second, "GPU samples during "+what, func() error {
			n, err := samplesDuring(15 * time.Second)
			if err != nil {
				return err
			}
			if n < 10 {
				return fmt.Errorf("%d samples of GPU 0 in the last 15 s", n)
			}
			return nil
		})
		if exited, err := agent.Exited(); exited {
			t.Fatalf("agent exited during %s: %v", what, err)
		}
	}

	rssBefore, err := agent.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("hung API server", func(t *testing.T) {
		outage(t, "a hung API server", s.Pause, s.Resume)
	})
	for i := range 3 {
		t.Run(fmt.Sprintf("API server gone and back, %d", i+1), func(t *testing.T) {
			outage(t, "an API server outage", s.Stop, func() { s.Restart(t) })
		})
	}
	t.Run("labels come back after the outages", func(t *testing.T) {
		if err := s.Client.CoreV1().Pods("ml").Delete(context.Background(), "ranks-0", now); err != nil {
			t.Fatal(err)
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "ranks-0", Labels: map[string]string{"app.kubernetes.io/name": "ranks-v2"}},
			Spec:       corev1.PodSpec{NodeName: k8sNode, Containers: []corev1.Container{{Name: "main", Image: "registry.example/train:2"}}},
		}
		if _, err := s.Client.CoreV1().Pods("ml").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The watch resumed: a pod changed after the outages is seen.
		prom.Eventually(t, 90*time.Second, "the recreated pod's new label", func() error {
			got, err := gpuLabels(p, "e2e-k8s-faults")
			if err != nil {
				return err
			}
			if got["1"]["k8s_pod_label_app"] != "ranks-v2" {
				return fmt.Errorf("GPU 1: %v", got["1"])
			}
			return nil
		})
	})
	rssAfter, err := agent.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("agent RSS %d MiB before the outages, %d MiB after", rssBefore>>20, rssAfter>>20)
	// A leak per outage (a watch or a connection kept per retry) would show as tens of
	// MiB over four outages; the memory_limiter's ceiling is 200 MiB.
	if rssAfter-rssBefore > 40<<20 {
		t.Errorf("agent RSS grew by %d MiB over four API server outages", (rssAfter-rssBefore)>>20)
	}
}
