package kube

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

const node = "gpu-node-1"

func pod(ns, name, uid string, phase corev1.PodPhase, ctrs ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: phase},
	}
	for i := 0; i+1 < len(ctrs); i += 2 {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: ctrs[i]})
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: ctrs[i], ContainerID: "containerd://" + ctrs[i+1]})
	}
	return p
}

func str(s string) *string { return &s }

func slice(name string, generation int64, devices ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   "gpu.nvidia.com",
			Pool:     resourcev1.ResourcePool{Name: node, Generation: generation, ResourceSliceCount: 1},
			NodeName: str(node),
			Devices:  devices,
		},
	}
}

func device(name, uuidKey, uuid string) resourcev1.Device {
	return resourcev1.Device{Name: name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		"type":                            {StringValue: str("gpu")},
		resourcev1.QualifiedName(uuidKey): {StringValue: str(uuid)},
	}}
}

func start(t *testing.T, objs ...any) *Client {
	t.Helper()
	cs := fake.NewClientset()
	for _, o := range objs {
		switch v := o.(type) {
		case *corev1.Pod:
			_, err := cs.CoreV1().Pods(v.Namespace).Create(t.Context(), v, metav1.CreateOptions{})
			require.NoError(t, err)
		case *resourcev1.ResourceSlice:
			_, err := cs.ResourceV1().ResourceSlices().Create(t.Context(), v, metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "resource.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "resourceslices", Kind: "ResourceSlice"}},
	}}
	c := NewWithClient(Config{AuthType: AuthKubeConfig, NodeName: node}, zaptest.NewLogger(t), cs)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, c.Shutdown()) })
	require.Eventually(t, func() bool {
		pods, slices := c.informers()
		return pods.HasSynced() && slices.HasSynced()
	}, 5*time.Second, time.Millisecond)
	return c
}

func TestPodsOfTheNode(t *testing.T) {
	running := pod("ml", "trainer-0", "5fb5b359-2df7-421a-8b41-2a10445bd33c", corev1.PodRunning, "trainer", "aaa", "metrics-sidecar", "bbb")
	running.Status.ContainerStatuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ContainerID: "containerd://old"}
	mirror := pod("kube-system", "healthcheck-gpu-node-1", "0b0c0d0e-0000-4000-8000-000000000001", corev1.PodRunning, "check", "ccc")
	mirror.Annotations = map[string]string{mirrorAnnotation: "75ac3abd1666de7567d19fee0c3a4b0e"}
	c := start(t, running, mirror,
		pod("ml", "eval-1", "497a1e92-1af3-48b9-8c1e-f80582d90dc6", corev1.PodSucceeded, "eval", "ddd"),
		pod("ml", "smoke-1", "cd052850-83e6-40a1-b361-3ee40a28dcc8", corev1.PodFailed))

	assert.True(t, c.Finished("ml", "eval-1"))
	assert.True(t, c.Finished("ml", "smoke-1"))
	assert.False(t, c.Finished("ml", "trainer-0"))
	assert.False(t, c.Finished("ml", "unknown"), "a pod the API does not know is not taken as finished")

	p, ok := c.Lookup("5fb5b359-2df7-421a-8b41-2a10445bd33c")
	require.True(t, ok)
	assert.Equal(t, "trainer-0", p.Name)
	assert.Equal(t, "metrics-sidecar", p.ContainerName("bbb"), "a container named by its own ID, not by the one that holds the GPU")
	assert.Equal(t, "trainer", p.ContainerName("old"), "the previous instance of a restarted container")
	assert.Empty(t, p.ContainerName("gone"), "an ID no container has: no name among two")

	uid, ok := c.UID("ml", "trainer-0")
	require.True(t, ok)
	assert.Equal(t, "5fb5b359-2df7-421a-8b41-2a10445bd33c", uid)
	uid, ok = c.UID("kube-system", "healthcheck-gpu-node-1")
	require.True(t, ok)
	assert.Equal(t, "0b0c0d0e-0000-4000-8000-000000000001", uid, "a static pod's UID is its mirror's, which k8s_attributes and kube-state-metrics know")
	_, ok = c.UID("ml", "unknown")
	assert.False(t, ok)

	p, ok = c.Lookup("75ac3abd1666de7567d19fee0c3a4b0e")
	require.True(t, ok, "a static pod by the config hash its cgroup carries")
	assert.Equal(t, "healthcheck-gpu-node-1", p.Name)
	assert.Equal(t, "0b0c0d0e-0000-4000-8000-000000000001", p.APIUID, "and its mirror's UID in the API")
	_, ok = c.Lookup("ffffffff-0000-4000-8000-000000000000")
	assert.False(t, ok)
}

func TestResourceSlicesMapDevicesToUUIDs(t *testing.T) {
	c := start(t,
		slice("old", 1, device("gpu-0", "uuid", "GPU-stale")),
		slice("gpus", 2, device("gpu-0", "uuid", "GPU-11111111-0000-4000-8000-000000000000"), device("gpu-1", "gpu.nvidia.com/uuid", "GPU-22222222-0000-4000-8000-000000000000")),
	)
	uuid, ok := c.UUID("gpu.nvidia.com", node, "gpu-0")
	require.True(t, ok)
	assert.Equal(t, "GPU-11111111-0000-4000-8000-000000000000", uuid, "the newest generation of the pool")
	uuid, ok = c.UUID("gpu.nvidia.com", node, "gpu-1")
	require.True(t, ok)
	assert.Equal(t, "GPU-22222222-0000-4000-8000-000000000000", uuid, "an attribute qualified with the driver's domain")
	_, ok = c.UUID("gpu.nvidia.com", node, "gpu-9")
	assert.False(t, ok)
	_, ok = c.UUID("other.example.com", node, "gpu-0")
	assert.False(t, ok)
	assert.Equal(t, map[string]int{"gpu.nvidia.com": 2}, c.Devices(), "stale generations do not count")
}

func TestNoResourceSlicesAPI(t *testing.T) {
	cs := fake.NewClientset(pod("ml", "a", "11111111-0000-4000-8000-000000000000", corev1.PodRunning, "c", "x"))
	c := NewWithClient(Config{AuthType: AuthKubeConfig, NodeName: node}, zaptest.NewLogger(t), cs)
	require.NoError(t, c.Start(t.Context()))
	defer func() { require.NoError(t, c.Shutdown()) }()
	_, ok := c.UUID("gpu.nvidia.com", node, "gpu-0")
	assert.False(t, ok)
	assert.Nil(t, c.Devices())
}

func TestConfigValidate(t *testing.T) {
	require.NoError(t, Config{AuthType: AuthServiceAccount, NodeName: node}.Validate())
	assert.ErrorContains(t, Config{AuthType: "token"}.Validate(), `auth_type: "token"`)
}

// Off-cluster (no node name, no in-cluster credentials) the source says why and answers
// "unknown"; the collector still starts.
func TestNoClusterIsNotAnError(t *testing.T) {
	for name, cfg := range map[string]Config{
		"no node name":       {AuthType: AuthServiceAccount},
		"not in a cluster":   {AuthType: AuthServiceAccount, NodeName: node},
		"no such kubeconfig": {AuthType: AuthKubeConfig, KubeConfig: "/nonexistent/kubeconfig", NodeName: node},
	} {
		t.Run(name, func(t *testing.T) {
			core, logs := observer.New(zap.WarnLevel)
			c := New(cfg, zap.New(core))
			require.NoError(t, c.Start(t.Context()))
			require.NoError(t, c.Shutdown())
			require.Equal(t, 1, logs.Len())
			assert.Contains(t, logs.All()[0].Message, "kube_api")
			assert.False(t, c.Finished("ml", "a"))
			assert.Nil(t, c.Devices())
		})
	}
}

func TestShutdownWithoutStart(t *testing.T) {
	c := New(Config{AuthType: AuthServiceAccount, NodeName: node}, zaptest.NewLogger(t))
	require.NoError(t, c.Shutdown())
	assert.False(t, c.Finished("a", "b"))
	_, ok := c.Lookup("x")
	assert.False(t, ok)
}
