//go:build e2e

package testbed

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/kubeapi"
)

// The DRA node: NVIDIA's DRA driver (gpu.nvidia.com) publishes the node's eight GPUs in a
// ResourceSlice of the real API server, named by device-node minor as the driver does
// (dgxh100's simulated minors by NVML index). ml/train-dra holds GPUs 0 and 1 through its
// claim; batch/eval-done finished (phase Succeeded) but the kubelet, as older ones do,
// still lists its claim on GPU 2; ml/legacy holds GPU 3 through the device plugin.
var draMinors = []int{2, 3, 0, 1, 6, 7, 4, 5}

// draContainer is train-dra's trainer container; its pod's UID is the API server's.
const draContainer = "5d377d1a99217696f8b18ea8eb864545fdc3620aa3c89965ad9700b97c935896"

func draSlice(uuids []string) *resourcev1.ResourceSlice {
	node := k8sNode
	s := &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: k8sNode + "-gpu.nvidia.com"},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.nvidia.com",
			Pool:     resourcev1.ResourcePool{Name: k8sNode, Generation: 1, ResourceSliceCount: 1},
			NodeName: &node,
		},
	}
	for i, uuid := range uuids {
		typ, product := "gpu", "NVIDIA H100 80GB HBM3"
		s.Spec.Devices = append(s.Spec.Devices, resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", draMinors[i]),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"type": {StringValue: &typ}, "uuid": {StringValue: &uuid}, "productName": {StringValue: &product},
			},
		})
	}
	return s
}

// draNode serves the DRA node's pod-resources answer and /proc: the training processes
// (the simulator's PIDs 20000 and 20001 on GPUs 0 and 1) run in train-dra's container
// (pod UID trainUID); the process on GPU 2 is the host's.
func draNode(t *testing.T, uuids []string, trainUID string) agentNode {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	node := agentNode{kubeletSocket: filepath.Join(dir, "kubelet.sock"), procRoot: filepath.Join(dir, "proc"), podLogsDir: filepath.Join(dir, "pods")}
	claim := func(ns, name string, gpus ...int) fakekubelet.DynamicResource {
		dr := fakekubelet.DynamicResource{ClaimName: name, ClaimNamespace: ns}
		for _, g := range gpus {
			dev := fmt.Sprintf("gpu-%d", draMinors[g])
			dr.ClaimResources = append(dr.ClaimResources, fakekubelet.ClaimResource{
				DriverName: "gpu.nvidia.com", PoolName: k8sNode, DeviceName: dev,
				CDIDevices: []string{"k8s.gpu.nvidia.com/claim=" + trainUID + "-" + dev},
			})
		}
		return dr
	}
	pods := []fakekubelet.Pod{
		{Namespace: "ml", Name: "train-dra", Containers: []fakekubelet.Container{
			{Name: "trainer", DynamicResources: []fakekubelet.DynamicResource{claim("ml", "train-gpus", 0, 1)}},
			{Name: "log-shipper"},
		}},
		{Namespace: "batch", Name: "eval-done", Containers: []fakekubelet.Container{
			{Name: "eval", DynamicResources: []fakekubelet.DynamicResource{claim("batch", "eval-gpu", 2)}},
		}},
		{Namespace: "ml", Name: "legacy", Containers: []fakekubelet.Container{
			{Name: "main", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{uuids[3]}}}},
		}},
	}
	startFakeKubelet(t, node.kubeletSocket, pods, []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: uuids[3:]}})
	podCgroup := fmt.Sprintf("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod%s.slice/cri-containerd-%s.scope\n",
		strings.ReplaceAll(trainUID, "-", "_"), draContainer)
	for pid, cg := range map[int]string{20000: podCgroup, 20001: podCgroup, 20002: "0::/system.slice/nvidia-dcgm.service\n"} {
		writeProc(t, node.procRoot, pid, cg)
	}
	return node
}

// createDRAPods creates the node's pods in the API server with the status the kubelet
// would report: phases and container IDs. It returns train-dra's UID.
func createDRAPods(t *testing.T, s *kubeapi.Server) string {
	t.Helper()
	ctx := context.Background()
	for _, ns := range []string{"ml", "batch"} {
		s.EnsureServiceAccount(t, ns, "default")
	}
	var trainUID string
	for _, p := range []struct {
		ns, name string
		phase    corev1.PodPhase
		ctrs     []string
	}{
		{"ml", "train-dra", corev1.PodRunning, []string{"trainer", "log-shipper"}},
		{"batch", "eval-done", corev1.PodSucceeded, []string{"eval"}},
		{"ml", "legacy", corev1.PodRunning, []string{"main"}},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.ns, Name: p.name}, Spec: corev1.PodSpec{NodeName: k8sNode}}
		for _, c := range p.ctrs {
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "registry.example/gpu:1"})
		}
		created, err := s.Client.CoreV1().Pods(p.ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("pod %s/%s: %v", p.ns, p.name, err)
		}
		created.Status.Phase = p.phase
		for i, c := range p.ctrs {
			id := strings.Repeat(fmt.Sprint(i+1), 64)
			if p.name == "train-dra" && c == "trainer" {
				id = draContainer
			}
			created.Status.ContainerStatuses = append(created.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: c, Image: "registry.example/gpu:1", ImageID: "registry.example/gpu@sha256:" + strings.Repeat("0", 64), ContainerID: "containerd://" + id,
			})
		}
		if _, err := s.Client.CoreV1().Pods(p.ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("pod %s/%s status: %v", p.ns, p.name, err)
		}
		if p.name == "train-dra" {
			trainUID = string(created.UID)
		}
	}
	return trainUID
}

// TestDRAAllocatedGPUsLandInPrometheus: GPUs allocated through DRA ResourceClaims are
// attributed exactly as device-plugin GPUs — the claim's device joined with the
// ResourceSlice the driver published in the real API server — and count in allocation and
// idle-while-allocated; a finished pod the kubelet still lists holds nothing.
func TestDRAAllocatedGPUsLandInPrometheus(t *testing.T) {
	uuids := simulatedUUIDs(t, "dgxh100")
	s := kubeapi.Start(t)
	applyShippedAgentRBAC(t, s)
	trainUID := createDRAPods(t, s)
	if _, err := s.Client.ResourceV1().ResourceSlices().Create(context.Background(), draSlice(uuids), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := prom.Start(t, "")
	node := draNode(t, uuids, trainUID)
	node.env = []string{"KUBECONFIG=" + s.WriteKubeconfig(t, s.Token(t, "otelcol-gpu", "otelcol-gpu-agent"), "otelcol-gpu"), "K8S_NODE_NAME=" + k8sNode}
	node.sets = []string{"processors::gpu_enrich::kube_api::auth_type=kubeConfig", "processors::gpu_enrich::idle::window=5s"}
	startAgentOn(t, p, "e2e-dra", "dgxh100", "idle", node)

	t.Run("the claimed GPUs carry their pod and claim", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "DRA attribution", func() error {
			gpus, err := gpuLabels(p, "e2e-dra")
			if err != nil {
				return err
			}
			for _, i := range []string{"0", "1"} {
				l := gpus[i]
				if l["k8s_pod_name"] != "train-dra" || l["k8s_namespace_name"] != "ml" || l["k8s_container_name"] != "trainer" ||
					l["k8s_resourceclaim_name"] != "train-gpus" || l["nvidia_gpu_attribution_method"] != "allocation" {
					return fmt.Errorf("GPU %s labelled %v", i, l)
				}
			}
			if pod := gpus["2"]["k8s_pod_name"]; pod != "" {
				return fmt.Errorf("GPU 2 attributed to %q: the finished pod holds nothing", pod)
			}
			if pod := gpus["3"]["k8s_pod_name"]; pod != "legacy" {
				return fmt.Errorf("GPU 3 attributed to %q, want the device-plugin pod", pod)
			}
			return nil
		})
	})

	t.Run("its processes carry the claim, the host's process nothing", func(t *testing.T) {
		prom.Eventually(t, 30*time.Second, "DRA processes", func() error {
			s, err := p.Query(`nvidia_gpu_process_memory_usage_bytes{host_name="e2e-dra"}`)
			if err != nil {
				return err
			}
			// One process per GPU: PIDs 20000, 20001, 20002 on GPUs 0, 1, 2.
			byGPU := map[string]map[string]string{}
			for _, x := range s {
				byGPU[x.Labels["nvidia_gpu_index"]] = x.Labels
			}
			for _, gpu := range []string{"0", "1"} {
				l := byGPU[gpu]
				if l["k8s_pod_name"] != "train-dra" || l["k8s_container_name"] != "trainer" || l["k8s_resourceclaim_name"] != "train-gpus" || l["nvidia_gpu_attribution_method"] != "cgroup" {
					return fmt.Errorf("the process on GPU %s labelled %v", gpu, l)
				}
			}
			if l := byGPU["2"]; l == nil || l["k8s_pod_name"] != "" || l["nvidia_gpu_attribution_method"] != "" {
				return fmt.Errorf("the host's process on GPU 2 labelled %v", l)
			}
			return nil
		})
	})

	t.Run("allocation counts the claims of running pods", func(t *testing.T) {
		prom.Eventually(t, 30*time.Second, "DRA allocation", func() error {
			for q, want := range map[string]float64{
				`nvidia_gpu_devices_allocated{host_name="e2e-dra",nvidia_gpu_resource_name="gpu.nvidia.com"}`:   2,
				`nvidia_gpu_devices_allocatable{host_name="e2e-dra",nvidia_gpu_resource_name="gpu.nvidia.com"}`: 8,
				`nvidia_gpu_devices_allocated{host_name="e2e-dra",nvidia_gpu_resource_name="nvidia.com/gpu"}`:   1,
				`nvidia_gpu_attribution_unmapped_devices{host_name="e2e-dra"}`:                                  0,
			} {
				s, err := p.Query(q)
				if err != nil {
					return err
				}
				for _, x := range s {
					if x.Value != want {
						return fmt.Errorf("%s = %v, want %v", q, x.Value, want)
					}
				}
				if len(s) == 0 {
					return fmt.Errorf("%s: no series", q)
				}
			}
			return nil
		})
	})

	t.Run("idle DRA GPUs are idle-while-allocated, the finished pod's GPU is not", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "idle while allocated", func() error {
			s, err := p.Query(`nvidia_gpu_idle_while_allocated{host_name="e2e-dra"}`)
			if err != nil {
				return err
			}
			got := map[string]float64{}
			for _, x := range s {
				got[x.Labels["nvidia_gpu_index"]] = x.Value
			}
			for i, want := range map[string]float64{"0": 1, "1": 1, "2": 0, "3": 1, "4": 0} {
				if v, ok := got[i]; !ok || v != want {
					return fmt.Errorf("GPU %s idle-while-allocated %v (present %v), want %v", i, v, ok, want)
				}
			}
			return nil
		})
	})
}
