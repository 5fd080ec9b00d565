package gpuenrichprocessor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/kube"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// platform is one testdata/platforms/*.yaml file: a node as a real platform lays it out
// (cgroup files, the kubelet's pod-resources answer, /var/log/pods, ResourceSlices), with
// the attribution each GPU process must get. See testdata/platforms/README.md for where
// every string comes from.
type platform struct {
	Platform   string `yaml:"platform"`
	Attributed string `yaml:"attributed"`
	Node       string `yaml:"node"`
	GPUs       []struct {
		UUID  string `yaml:"uuid"`
		Index int    `yaml:"index"`
		Minor int    `yaml:"minor"`
		MIG   []struct {
			UUID          string `yaml:"uuid"`
			GPUInstanceID int    `yaml:"gpu_instance_id"`
			Profile       string `yaml:"profile"`
		} `yaml:"mig"`
	} `yaml:"gpus"`
	Kubelet struct {
		ResourceNames []string `yaml:"resource_names"`
		Pods          []struct {
			Namespace  string `yaml:"namespace"`
			Name       string `yaml:"name"`
			UID        string `yaml:"uid"`
			Phase      string `yaml:"phase"`
			Containers []struct {
				Name    string `yaml:"name"`
				ID      string `yaml:"id"`
				Devices []struct {
					ResourceName string   `yaml:"resource_name"`
					DeviceIDs    []string `yaml:"device_ids"`
				} `yaml:"devices"`
				DynamicResources []struct {
					ClaimName      string `yaml:"claim_name"`
					ClaimNamespace string `yaml:"claim_namespace"`
					ClaimResources []struct {
						DriverName string   `yaml:"driver_name"`
						PoolName   string   `yaml:"pool_name"`
						DeviceName string   `yaml:"device_name"`
						CDIDevices []string `yaml:"cdi_devices"`
					} `yaml:"claim_resources"`
				} `yaml:"dynamic_resources"`
			} `yaml:"containers"`
		} `yaml:"pods"`
	} `yaml:"kubelet"`
	ResourceSlices []struct {
		Driver string `yaml:"driver"`
		Pool   struct {
			Name       string `yaml:"name"`
			Generation int64  `yaml:"generation"`
		} `yaml:"pool"`
		NodeName string `yaml:"node_name"`
		Devices  []struct {
			Name       string            `yaml:"name"`
			Attributes map[string]string `yaml:"attributes"`
		} `yaml:"devices"`
	} `yaml:"resource_slices"`
	PodLogDirs []string `yaml:"pod_log_dirs"`
	Processes  []struct {
		PID       uint32            `yaml:"pid"`
		StartTime uint64            `yaml:"start_time"`
		GPU       string            `yaml:"gpu"`
		What      string            `yaml:"what"`
		Cgroup    string            `yaml:"cgroup"`
		Expect    map[string]string `yaml:"expect"`
	} `yaml:"processes"`
}

// expectKeys maps the fixtures' expectation keys to the resource attributes they name.
var expectKeys = map[string]string{
	"namespace":    "k8s.namespace.name",
	"pod":          "k8s.pod.name",
	"pod_uid":      "k8s.pod.uid",
	"container":    "k8s.container.name",
	"container_id": "container.id",
	"claim_name":   "k8s.resourceclaim.name",
	"slurm_job":    "slurm.job.id",
	"slurm_sluid":  "slurm.job.sluid",
	"slurm_step":   "slurm.job.step",
}

func loadPlatforms(t *testing.T) map[string]*platform {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "platforms", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]*platform{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var p platform
		require.NoError(t, yaml.Unmarshal(raw, &p), f)
		out[strings.TrimSuffix(filepath.Base(f), ".yaml")] = &p
	}
	return out
}

// nodeFiles writes the platform's /proc/<pid>/{cgroup,stat} and /var/log/pods.
func (p *platform) nodeFiles(t *testing.T) (procRoot, podLogs string) {
	t.Helper()
	root := t.TempDir()
	procRoot, podLogs = filepath.Join(root, "proc"), filepath.Join(root, "pods")
	for _, proc := range p.Processes {
		dir := filepath.Join(procRoot, fmt.Sprint(proc.PID))
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(proc.Cgroup), 0o644))
		stat := fmt.Sprintf("%d (python3) S 1 %d %d 0 -1 4194560 1 0 0 0 1 0 0 0 20 0 1 0 %d 1 1 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
			proc.PID, proc.PID, proc.PID, proc.StartTime)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	}
	for _, d := range p.PodLogDirs {
		require.NoError(t, os.MkdirAll(filepath.Join(podLogs, d), 0o755))
	}
	return procRoot, podLogs
}

// kubelet serves the platform's pod-resources answer on a real gRPC socket.
func (p *platform) kubelet(t *testing.T) string {
	t.Helper()
	var pods []fakekubelet.Pod
	for _, pod := range p.Kubelet.Pods {
		fp := fakekubelet.Pod{Namespace: pod.Namespace, Name: pod.Name}
		for _, c := range pod.Containers {
			fc := fakekubelet.Container{Name: c.Name}
			for _, d := range c.Devices {
				fc.Devices = append(fc.Devices, fakekubelet.Devices{ResourceName: d.ResourceName, DeviceIDs: d.DeviceIDs})
			}
			for _, dr := range c.DynamicResources {
				fdr := fakekubelet.DynamicResource{ClaimName: dr.ClaimName, ClaimNamespace: dr.ClaimNamespace}
				for _, r := range dr.ClaimResources {
					fdr.ClaimResources = append(fdr.ClaimResources, fakekubelet.ClaimResource{DriverName: r.DriverName, PoolName: r.PoolName, DeviceName: r.DeviceName, CDIDevices: r.CDIDevices})
				}
				fc.DynamicResources = append(fc.DynamicResources, fdr)
			}
			fp.Containers = append(fp.Containers, fc)
		}
		pods = append(pods, fp)
	}
	socket := shortSocket(t)
	srv, err := fakekubelet.Start(socket, pods, nil)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return socket
}

// apiServer is the Kubernetes API as it would answer for this node: its pods (UIDs,
// phases, container IDs as "containerd://<id>") and the DRA drivers' ResourceSlices.
func (p *platform) apiServer(t *testing.T) *kube.Client {
	t.Helper()
	cs := fake.NewClientset()
	for _, pod := range p.Kubelet.Pods {
		obj := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID)},
			Spec:       corev1.PodSpec{NodeName: p.Node},
			Status:     corev1.PodStatus{Phase: corev1.PodPhase(pod.Phase)},
		}
		if isConfigHash(pod.UID) { // a static pod: its mirror carries the config hash
			obj.UID = types.UID(mirrorUID(pod.UID))
			obj.Annotations = map[string]string{"kubernetes.io/config.mirror": pod.UID}
		}
		for _, c := range pod.Containers {
			obj.Spec.Containers = append(obj.Spec.Containers, corev1.Container{Name: c.Name})
			obj.Status.ContainerStatuses = append(obj.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, ContainerID: "containerd://" + c.ID})
		}
		_, err := cs.CoreV1().Pods(pod.Namespace).Create(context.Background(), obj, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	for i, s := range p.ResourceSlices {
		obj := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", s.NodeName, i)},
			Spec: resourcev1.ResourceSliceSpec{Driver: s.Driver, NodeName: &s.NodeName,
				Pool: resourcev1.ResourcePool{Name: s.Pool.Name, Generation: s.Pool.Generation, ResourceSliceCount: 1}},
		}
		for _, d := range s.Devices {
			dev := resourcev1.Device{Name: d.Name, Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}}
			for k, v := range d.Attributes {
				dev.Attributes[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{StringValue: &v}
			}
			obj.Spec.Devices = append(obj.Spec.Devices, dev)
		}
		_, err := cs.ResourceV1().ResourceSlices().Create(context.Background(), obj, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	cs.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{
		GroupVersion: "resource.k8s.io/v1", APIResources: []metav1.APIResource{{Name: "resourceslices"}},
	}}
	return kube.NewWithClient(kube.Config{AuthType: kube.AuthKubeConfig, NodeName: p.Node}, zap.NewNop(), cs)
}

// batch is what the gpu receiver would emit for this node: every GPU and MIG instance
// with its identity, and every process on the device NVML lists it on.
func (p *platform) batch() pmetric.Metrics {
	md := pmetric.NewMetrics()
	ts := pcommon.NewTimestampFromTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	gauge := func(rm pmetric.ResourceMetrics, name string, v int64) {
		m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(ts)
		dp.SetIntValue(v)
	}
	identity := map[string]func(pcommon.Map){}
	host := md.ResourceMetrics().AppendEmpty()
	host.Resource().Attributes().PutStr("host.name", p.Node)
	for _, g := range p.GPUs {
		gpuAttrs := func(a pcommon.Map) {
			a.PutStr("host.name", p.Node)
			a.PutStr("hw.id", g.UUID)
			a.PutInt("nvidia.gpu.index", int64(g.Index))
			a.PutInt("nvidia.gpu.minor_number", int64(g.Minor))
		}
		identity[g.UUID] = gpuAttrs
		rm := md.ResourceMetrics().AppendEmpty()
		gpuAttrs(rm.Resource().Attributes())
		gauge(rm, metricMemoryUsage, 1<<30)
		for _, m := range g.MIG {
			migAttrs := func(a pcommon.Map) {
				gpuAttrs(a)
				a.PutStr("hw.id", m.UUID)
				a.PutStr("hw.parent", g.UUID)
				a.PutStr("nvidia.mig.uuid", m.UUID)
				a.PutInt("nvidia.mig.gpu_instance_id", int64(m.GPUInstanceID))
				a.PutStr("nvidia.mig.profile", m.Profile)
			}
			identity[m.UUID] = migAttrs
			rm := md.ResourceMetrics().AppendEmpty()
			migAttrs(rm.Resource().Attributes())
			gauge(rm, metricMemoryUsage, 1<<28)
		}
	}
	for _, proc := range p.Processes {
		rm := md.ResourceMetrics().AppendEmpty()
		if id := identity[proc.GPU]; id != nil {
			id(rm.Resource().Attributes())
		} else {
			rm.Resource().Attributes().PutStr("hw.id", proc.GPU)
		}
		rm.Resource().Attributes().PutInt("process.pid", int64(proc.PID))
		gauge(rm, metricProcessMemory, 1<<20)
	}
	return md
}

// run attributes the platform's batch the way the shipped agent does: kubelet
// pod-resources, host /proc, and either the Kubernetes API or only /var/log/pods.
func (p *platform) run(t *testing.T, withAPI bool) pmetric.Metrics {
	t.Helper()
	procRoot, podLogs := p.nodeFiles(t)
	cfg := testConfig()
	cfg.Processes.MaxPerGPU = 0 // every process's attribution is checked
	cfg.Kubelet.Endpoint = "unix://" + p.kubelet(t)
	cfg.Kubelet.RefreshInterval = 10 * time.Millisecond
	if len(p.Kubelet.ResourceNames) > 0 {
		cfg.Kubelet.ResourceNames = p.Kubelet.ResourceNames
	}
	src := sources{
		pods: podresources.New(podresources.Config{Endpoint: cfg.Kubelet.Endpoint, RefreshInterval: cfg.Kubelet.RefreshInterval,
			Timeout: time.Second, ResourceNames: cfg.Kubelet.ResourceNames, DRADrivers: cfg.Kubelet.DRADrivers}, zap.NewNop(), time.Now),
		pids:  cgroup.NewResolver(procRoot),
		names: podnames.New(podLogs, time.Minute, time.Now),
	}
	if withAPI {
		k := p.apiServer(t)
		src.kube = k
		src.names = firstNamed(k, src.names)
	}
	proc := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), time.Now, src)
	require.NoError(t, proc.start(context.Background(), nil))
	t.Cleanup(func() { require.NoError(t, proc.shutdown(context.Background())) })
	require.Eventually(t, func() bool {
		snap, _ := src.pods.Snapshot()
		if snap == nil {
			return false
		}
		if withAPI && len(p.Kubelet.Pods) > 0 {
			_, ok := src.kube.(*kube.Client).Lookup(p.Kubelet.Pods[len(p.Kubelet.Pods)-1].UID)
			return ok && (len(p.ResourceSlices) == 0 || src.kube.Devices() != nil)
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "kubelet and API answers")
	out, err := proc.processMetrics(context.Background(), p.batch())
	require.NoError(t, err)
	return out
}

// TestPlatforms runs every platform fixture through the processor and checks each GPU
// process's attribution against what the platform's own sources say it must be.
func TestPlatforms(t *testing.T) {
	for name, p := range loadPlatforms(t) {
		t.Run(name, func(t *testing.T) {
			for _, withAPI := range []bool{true, false} {
				out := p.run(t, withAPI)
				byPID := map[int64]pcommon.Map{}
				for i := 0; i < out.ResourceMetrics().Len(); i++ {
					a := out.ResourceMetrics().At(i).Resource().Attributes()
					if pid, ok := a.Get("process.pid"); ok {
						byPID[pid.Int()] = a
					}
				}
				for _, proc := range p.Processes {
					attrs, ok := byPID[int64(proc.PID)]
					require.True(t, ok, "process %d is in the output", proc.PID)
					checkOwner(t, withAPI, len(p.ResourceSlices) > 0, proc.PID, proc.What, proc.Expect, attrs)
				}
				if withAPI || len(p.ResourceSlices) == 0 {
					checkNothingUnmapped(t, out)
				}
			}
		})
	}
}

// isConfigHash tells a static pod's UID in the fixtures: the kubelet's config hash (32 hex
// digits) instead of an API UID.
func isConfigHash(uid string) bool { return len(uid) == 32 }

// mirrorUID is the UID this test's API server gives a static pod's mirror.
func mirrorUID(hash string) string { return "00000000-0000-4000-8000-" + hash[:12] }

// checkOwner: with the API every expected attribute is there and nothing else is. Without
// it nothing is ever wrong, but a container name may be missing (a pod with several
// containers cannot be told apart by name), and so may a DRA claim whose device the
// driver names ambiguously (two MIG devices of one profile on one GPU).
func checkOwner(t *testing.T, withAPI, dra bool, pid uint32, what string, expect map[string]string, attrs pcommon.Map) {
	t.Helper()
	msg := fmt.Sprintf("pid %d (%s), API %v", pid, what, withAPI)
	for key, attr := range expectKeys {
		want, wanted := expect[key]
		if key == "pod_uid" && withAPI && isConfigHash(want) {
			// A static pod: its cgroup's config hash, but the API's mirror UID on the
			// series when the API names it (what k8s_attributes associates by).
			want = mirrorUID(want)
		}
		got, has := attrs.Get(attr)
		switch {
		case wanted && has:
			assert.Equal(t, want, got.AsString(), "%s: %s", msg, attr)
		case wanted && !has:
			if !withAPI && (key == "container" || (dra && key == "claim_name")) {
				continue
			}
			t.Errorf("%s: %s missing, want %q", msg, attr, want)
		case !wanted && has:
			t.Errorf("%s: %s=%q, want none", msg, attr, got.AsString())
		}
	}
	method, hasMethod := attrs.Get("nvidia.gpu.attribution.method")
	if len(expect) > 0 && expect["host"] == "" {
		require.True(t, hasMethod, "%s: how it was attributed", msg)
		assert.Equal(t, methodCgroup, method.AsString(), "%s: observed, not inferred", msg)
	} else {
		assert.False(t, hasMethod, "%s: the host's or unknown: nothing attributed", msg)
	}
}

func checkNothingUnmapped(t *testing.T, out pmetric.Metrics) {
	t.Helper()
	for i := 0; i < out.ResourceMetrics().Len(); i++ {
		pdatawalk.EachPoint(out.ResourceMetrics().At(i), func(name string, dp pmetric.NumberDataPoint) {
			if name == "nvidia.gpu.attribution.unmapped_devices" {
				assert.Zero(t, pdatawalk.Value(dp), "every allocated device maps to a GPU: %s", attr(dp, "nvidia.gpu.resource_name"))
			}
		})
	}
}

// gpuOwner returns the pod attributes on a GPU's (or MIG instance's) own resource.
func gpuOwner(t *testing.T, out pmetric.Metrics, uuid string) map[string]string {
	t.Helper()
	for i := 0; i < out.ResourceMetrics().Len(); i++ {
		rm := out.ResourceMetrics().At(i)
		a := rm.Resource().Attributes()
		id, hasID := a.Get("hw.id")
		_, isProc := a.Get("process.pid")
		if !hasID || id.AsString() != uuid || isProc || !hasScopeMetric(rm, metricMemoryUsage) {
			continue
		}
		got := map[string]string{}
		for _, k := range []string{"k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid", "k8s.container.name", "k8s.resourceclaim.name", "nvidia.gpu.attribution.method"} {
			if v, ok := a.Get(k); ok {
				got[k] = v.AsString()
			}
		}
		return got
	}
	t.Fatalf("no resource for GPU %s", uuid)
	return nil
}

// A pod that finished but that an older kubelet still lists with the GPU now given to a
// running pod holds nothing: the GPU is the running pod's alone, and the finished pod
// raises no idle-while-allocated of its own.
func TestFinishedPodHoldsNoGPU(t *testing.T) {
	p := loadPlatforms(t)["mixed-node-negatives"]
	const gpu1 = "GPU-ce918bc1-6445-4088-b2d1-72e04da0cf4e"
	out := p.run(t, true)
	assert.Equal(t, map[string]string{
		"k8s.namespace.name": "ml", "k8s.pod.name": "trainer-b-0", "k8s.container.name": "trainer",
		"k8s.pod.uid": "0f7e65d8-b4e7-4ae5-a853-2ff0648178f7", "nvidia.gpu.attribution.method": methodAllocation,
	}, gpuOwner(t, out, gpu1), "the holder's UID, from the API, for whoever keys on it")
	for _, rm := range resources(out, map[string]string{"hw.id": gpu1, "k8s.pod.name": "nightly-eval-29171040-zt6kx"}) {
		t.Errorf("the finished pod has series on the GPU: %v", rm.Resource().Attributes().AsRaw())
	}
	host := resources(out, map[string]string{"!hw.id": "", "host.name": "*"})[0]
	assert.Equal(t, 2.0, point(t, host, "nvidia.gpu.devices.allocated", "nvidia.gpu.resource_name", "nvidia.com/gpu"),
		"two GPUs held by running pods, not three allocations")

	// Without the API the finished pod cannot be told (pod-resources has no phase): the GPU
	// looks shared, so it is given to neither pod — less said, nothing wrong.
	out = p.run(t, false)
	assert.Empty(t, gpuOwner(t, out, gpu1))
}

// A GPU allocated through a DRA claim is its pod's, with the claim on the series, whether
// the device is named by minor number (gpu-1 is NVML index 0) or is a MIG device.
func TestDRAClaimHoldsItsGPUs(t *testing.T) {
	p := loadPlatforms(t)["dra-nvidia"]
	out := p.run(t, true)
	for _, uuid := range []string{"GPU-228c95aa-0b0e-4824-865d-cead3dcd9506", "GPU-e781e781-b221-46e2-abbf-b23248883d7b"} {
		assert.Equal(t, map[string]string{
			"k8s.namespace.name": "ml", "k8s.pod.name": "train-llama-0", "k8s.container.name": "trainer",
			"k8s.pod.uid": "dd3ef8b3-20c6-4934-ae5a-b6bbd91a3f33", "k8s.resourceclaim.name": "train-llama-0-gpus-8xk2p",
			"nvidia.gpu.attribution.method": methodAllocation,
		}, gpuOwner(t, out, uuid), uuid)
	}
	assert.Equal(t, "erin-mig", gpuOwner(t, out, "MIG-7f6f29cd-984a-4a7b-9aa0-ae1ef446928e")["k8s.resourceclaim.name"])
	assert.Empty(t, gpuOwner(t, out, "GPU-41366064-e8e5-4474-8ccf-7f537672fc75"), "gpu-2 is claimed by nobody")
	host := resources(out, map[string]string{"!hw.id": "", "host.name": "*"})[0]
	assert.Equal(t, 3.0, point(t, host, "nvidia.gpu.devices.allocated", "nvidia.gpu.resource_name", "gpu.nvidia.com"))
	assert.Equal(t, 5.0, point(t, host, "nvidia.gpu.devices.allocatable", "nvidia.gpu.resource_name", "gpu.nvidia.com"))
}

// TestREADMEPlatformTableNamesEveryFixture keeps the README's platform table and the
// fixtures in step: each fixture backs a row.
func TestREADMEPlatformTableNamesEveryFixture(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	for name := range loadPlatforms(t) {
		assert.Contains(t, string(readme), "`"+name+"`", "README.md's platform table has no row for testdata/platforms/%s.yaml", name)
	}
}
