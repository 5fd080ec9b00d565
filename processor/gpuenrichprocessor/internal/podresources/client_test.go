package podresources

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	gpuA    = "GPU-aaaaaaaa-0000-4000-8000-000000000001"
	gpuB    = "GPU-aaaaaaaa-0000-4000-8000-000000000002"
	gpuC    = "GPU-aaaaaaaa-0000-4000-8000-000000000003"
	gpuD    = "GPU-aaaaaaaa-0000-4000-8000-000000000004"
	migX    = "MIG-bbbbbbbb-0000-5000-8000-000000000001"
	migY    = "MIG-bbbbbbbb-0000-5000-8000-000000000002"
	legacyM = "MIG-" + gpuD + "/1/0"

	// Generous upper bound for things that happen within a few refreshes.
	eventually = 10 * time.Second
	tick       = time.Millisecond
)

func ctr(name string, devs ...fakekubelet.Devices) fakekubelet.Container {
	return fakekubelet.Container{Name: name, Devices: devs}
}

func devs(res string, ids ...string) fakekubelet.Devices {
	return fakekubelet.Devices{ResourceName: res, DeviceIDs: ids}
}

func pod(ns, name string, ctrs ...fakekubelet.Container) fakekubelet.Pod {
	return fakekubelet.Pod{Namespace: ns, Name: name, Containers: ctrs}
}

// node is a node with whole GPUs, a time-sliced GPU shared by two pods, MIG
// devices (current and legacy ids), a non-GPU resource and an index id.
func node() ([]fakekubelet.Pod, []fakekubelet.Devices) {
	pods := []fakekubelet.Pod{
		pod("ml", "train-0",
			ctr("trainer", devs("nvidia.com/gpu", gpuA, gpuB)),
			ctr("sidecar")),
		pod("nb", "alice", ctr("notebook", devs("nvidia.com/gpu.shared", gpuC+"::0"))),
		pod("nb", "bob", ctr("notebook", devs("nvidia.com/gpu.shared", gpuC+"::1"))),
		pod("inf", "mig-small", ctr("server", devs("nvidia.com/mig-1g.10gb", migX))),
		pod("inf", "mig-legacy", ctr("server", devs("nvidia.com/mig-2g.20gb", legacyM))),
		pod("hw", "fpga", ctr("job", devs("example.com/fpga", gpuD))), // not a GPU resource
		pod("hw", "indexed", ctr("job", devs("nvidia.com/gpu", "3"))), // unparseable, skipped
	}
	allocatable := []fakekubelet.Devices{
		devs("nvidia.com/gpu", gpuA, gpuB, "3"),
		devs("nvidia.com/gpu.shared", gpuC+"::0", gpuC+"::1", gpuC+"::2", gpuC+"::3"),
		devs("nvidia.com/mig-1g.10gb", migX, migY),
		devs("example.com/fpga", gpuD),
	}
	return pods, allocatable
}

// socketPath is short because unix socket paths are limited to ~108 bytes.
func socketPath(t *testing.T) string {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	return filepath.Join(dir, "kubelet.sock")
}

func startKubelet(t *testing.T, path string, pods []fakekubelet.Pod, allocatable []fakekubelet.Devices) *fakekubelet.Server {
	t.Helper()
	srv, err := fakekubelet.Start(path, pods, allocatable)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	return srv
}

func startNode(t *testing.T, path string) *fakekubelet.Server {
	t.Helper()
	pods, allocatable := node()
	return startKubelet(t, path, pods, allocatable)
}

func fastConfig(path string) Config {
	return Config{Endpoint: "unix://" + path, RefreshInterval: 2 * time.Millisecond, Timeout: 2 * time.Second}
}

func startClient(t *testing.T, cfg Config, logger *zap.Logger) *Client {
	t.Helper()
	if logger == nil {
		logger = zaptest.NewLogger(t)
	}
	c := New(cfg, logger, nil)
	require.NoError(t, c.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, c.Shutdown()) })
	return c
}

func waitFor(t *testing.T, c *Client, what string, cond func(*Snapshot, Status) bool) (*Snapshot, Status) {
	t.Helper()
	var (
		snap *Snapshot
		st   Status
	)
	require.Eventually(t, func() bool {
		snap, st = c.Snapshot()
		return cond(snap, st)
	}, eventually, tick, what)
	return snap, st
}

func hasSnapshot(s *Snapshot, _ Status) bool { return s != nil }
func failing(_ *Snapshot, st Status) bool    { return st.ConsecutiveFailures > 0 }

func TestSnapshotContents(t *testing.T) {
	path := socketPath(t)
	srv := startNode(t, path)
	pods, allocatable := node()
	// DRA: a claim of NVIDIA's driver, and one of another driver (not a GPU).
	pods = append(pods, fakekubelet.Pod{Namespace: "dra", Name: "trainer", Containers: []fakekubelet.Container{{
		Name: "main",
		DynamicResources: []fakekubelet.DynamicResource{
			{ClaimName: "gpus", ClaimNamespace: "dra", ClaimResources: []fakekubelet.ClaimResource{
				{DriverName: "gpu.nvidia.com", PoolName: "node-1", DeviceName: "gpu-3", CDIDevices: []string{"k8s.gpu.nvidia.com/claim=1234-gpu-3"}},
			}},
			{ClaimName: "nic", ClaimNamespace: "dra", ClaimResources: []fakekubelet.ClaimResource{
				{DriverName: "sriovnetwork.example.com", PoolName: "node-1", DeviceName: "vf-1"},
			}},
		},
	}}})
	srv.SetPods(pods)
	srv.SetAllocatable(allocatable)
	taken := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(fastConfig(path), zaptest.NewLogger(t), func() time.Time { return taken })
	require.NoError(t, c.Start(t.Context()))
	defer func() { require.NoError(t, c.Shutdown()) }()

	snap, st := waitFor(t, c, "DRA pod", func(s *Snapshot, _ Status) bool { return s != nil && len(s.Pods) == 8 })
	assert.Equal(t, map[string][]string{
		gpuA:         {"ml/train-0/trainer"},
		gpuB:         {"ml/train-0/trainer"},
		gpuC + "::0": {"nb/alice/notebook"},
		gpuC + "::1": {"nb/bob/notebook"},
		migX:         {"inf/mig-small/server"},
		legacyM:      {"inf/mig-legacy/server"},
		"3":          {"hw/indexed/job"}, // kept as the kubelet gives it: the processor maps indexes
	}, holders(snap), "the fpga resource is not a GPU resource")
	assert.Equal(t, []ClaimDevice{{Claim: "gpus", ClaimNamespace: "dra", Driver: "gpu.nvidia.com", Pool: "node-1", Device: "gpu-3"}},
		snap.Pods[0].Containers[0].Claims, "only the GPU driver's devices")
	train := snap.Pods[slices.IndexFunc(snap.Pods, func(p Pod) bool { return p.Name == "train-0" })]
	assert.Equal(t, "sidecar", train.Containers[1].Name, "containers without devices are listed too")
	assert.Equal(t, map[string][]string{
		"nvidia.com/gpu":         {gpuA, gpuB, "3"},
		"nvidia.com/gpu.shared":  {gpuC + "::0", gpuC + "::1", gpuC + "::2", gpuC + "::3"},
		"nvidia.com/mig-1g.10gb": {migX, migY},
	}, snap.Allocatable)
	assert.Equal(t, taken, snap.Taken)
	assert.Equal(t, Status{LastSuccess: taken}, st)
}

func TestResourceNameFilter(t *testing.T) {
	path := socketPath(t)
	startNode(t, path)
	cfg := fastConfig(path)
	cfg.ResourceNames = []string{"nvidia.com/mig-*", "example.com/fpga"}
	c := startClient(t, cfg, nil)

	snap, _ := waitFor(t, c, "first snapshot", hasSnapshot)
	assert.ElementsMatch(t, []string{migX, legacyM, gpuD}, keys(holders(snap)))
	assert.Equal(t, map[string][]string{"nvidia.com/mig-1g.10gb": {migX, migY}, "example.com/fpga": {gpuD}}, snap.Allocatable)
}

// A resource outside ResourceNames whose IDs name GPUs (a renamed nvidia.com/a100-80gb)
// is kept aside for the processor to report; another vendor's numbered devices are not.
func TestUnlistedGPUResourceIsKeptAside(t *testing.T) {
	path := socketPath(t)
	startKubelet(t, path, []fakekubelet.Pod{
		pod("ml", "renamed", ctr("c", devs("nvidia.com/a100-80gb", gpuA, strings.ToUpper(gpuB)+"::1"), devs("nvidia.com/gpu", gpuC))),
		pod("ml", "gke", ctr("c", devs("cloud.example.com/accel", "nvidia3"))),
		pod("hw", "fpga", ctr("c", devs("example.com/fpga", "0", "1"))),
	}, nil)
	c := startClient(t, fastConfig(path), nil)
	snap, _ := waitFor(t, c, "first snapshot", hasSnapshot)
	unlisted := map[string][]Device{}
	for _, p := range snap.Pods {
		unlisted[p.Name] = p.Containers[0].Unlisted
	}
	assert.Equal(t, map[string][]Device{
		"renamed": {{ResourceName: "nvidia.com/a100-80gb", ID: gpuA}, {ResourceName: "nvidia.com/a100-80gb", ID: strings.ToUpper(gpuB) + "::1"}},
		"gke":     {{ResourceName: "cloud.example.com/accel", ID: "nvidia3"}},
		"fpga":    nil,
	}, unlisted)
	assert.Equal(t, map[string][]string{gpuC: {"ml/renamed/c"}}, holders(snap), "only listed resources are attributed")
}

func TestRefreshPicksUpChanges(t *testing.T) {
	path := socketPath(t)
	srv := startKubelet(t, path, []fakekubelet.Pod{pod("ml", "a", ctr("c", devs("nvidia.com/gpu", gpuA)))}, nil)
	c := startClient(t, fastConfig(path), nil)
	waitFor(t, c, "first snapshot", hasSnapshot)

	srv.SetPods([]fakekubelet.Pod{pod("ml", "b", ctr("c", devs("nvidia.com/gpu", gpuB)))})
	snap, _ := waitFor(t, c, "pod b", func(s *Snapshot, _ Status) bool { return len(holders(s)[gpuB]) == 1 })
	assert.Equal(t, map[string][]string{gpuB: {"ml/b/c"}}, holders(snap))
}

func TestKubeletDownAtStart(t *testing.T) {
	path := socketPath(t)
	c := startClient(t, fastConfig(path), nil)

	snap, st := waitFor(t, c, "a failure", failing)
	assert.Nil(t, snap)
	assert.ErrorContains(t, st.LastError, "does not exist", "a missing socket is reported without dialling")
	assert.True(t, st.LastSuccess.IsZero())

	startNode(t, path)
	snap, st = waitFor(t, c, "snapshot once the kubelet is up", hasSnapshot)
	assert.Contains(t, holders(snap), gpuA)
	assert.NoError(t, st.LastError)
	assert.Zero(t, st.ConsecutiveFailures)
}

func TestMissingSocketDirectory(t *testing.T) {
	c := startClient(t, fastConfig(filepath.Join(t.TempDir(), "no", "such", "kubelet.sock")), nil)
	snap, st := waitFor(t, c, "a failure", func(_ *Snapshot, st Status) bool { return st.ConsecutiveFailures >= 3 })
	assert.Nil(t, snap)
	assert.ErrorContains(t, st.LastError, "does not exist")
}

// failuresAfter waits for n more failures than st had; it returns the
// snapshot at the first failure and the one after n more.
func failuresAfter(t *testing.T, c *Client, n int) (first, last *Snapshot, st Status) {
	t.Helper()
	first, st = waitFor(t, c, "a failure", failing)
	want := st.ConsecutiveFailures + n
	last, st = waitFor(t, c, "more failures", func(_ *Snapshot, st Status) bool { return st.ConsecutiveFailures >= want })
	return first, last, st
}

func TestKubeletErrorsAfterSuccess(t *testing.T) {
	path := socketPath(t)
	srv := startNode(t, path)
	c := startClient(t, fastConfig(path), nil)
	waitFor(t, c, "first snapshot", hasSnapshot)

	srv.SetMode(fakekubelet.ModeError)
	good, snap, st := failuresAfter(t, c, 3)
	require.NotNil(t, good)
	assert.Same(t, good, snap, "the last good snapshot is kept")
	assert.Equal(t, codes.Unavailable, status.Code(st.LastError), "%v", st.LastError)
	assert.Equal(t, good.Taken, st.LastSuccess)

	srv.SetMode(fakekubelet.ModeOK)
	snap, st = waitFor(t, c, "recovery", func(s *Snapshot, _ Status) bool { return s != good })
	assert.NoError(t, st.LastError)
	assert.Zero(t, st.ConsecutiveFailures)
	assert.Equal(t, good.Pods, snap.Pods)
}

// While a call to a hung kubelet is in flight, Snapshot answers from the
// cache, and Shutdown aborts the call instead of waiting for its timeout.
func TestSnapshotDoesNotWaitForHungKubelet(t *testing.T) {
	path := socketPath(t)
	srv := startNode(t, path)
	cfg := fastConfig(path)
	cfg.Timeout = time.Hour // the call stays in flight for the whole test
	c := New(cfg, zaptest.NewLogger(t), nil)
	require.NoError(t, c.Start(t.Context()))
	waitFor(t, c, "first snapshot", hasSnapshot)

	srv.SetMode(fakekubelet.ModeHang)
	require.Eventually(t, func() bool { return srv.Hanging() > 0 }, eventually, tick)
	snap, st := c.Snapshot()
	assert.NotNil(t, snap)
	assert.NoError(t, st.LastError)
	assert.Positive(t, srv.Hanging(), "Snapshot returned while the kubelet call was still in flight")

	require.NoError(t, c.Shutdown()) // returns without waiting the hour
	require.Eventually(t, func() bool { return srv.Hanging() == 0 }, eventually, tick, "the server sees the call cancelled")
}

func TestHungKubeletTimesOut(t *testing.T) {
	path := socketPath(t)
	srv := startNode(t, path)
	cfg := fastConfig(path)
	cfg.Timeout = 20 * time.Millisecond
	c := startClient(t, cfg, nil)
	waitFor(t, c, "first snapshot", hasSnapshot)

	srv.SetMode(fakekubelet.ModeHang)
	good, snap, st := failuresAfter(t, c, 2)
	require.NotNil(t, good)
	assert.Same(t, good, snap)
	assert.Equal(t, codes.DeadlineExceeded, status.Code(st.LastError), "%v", st.LastError)
}

func TestGarbageOnSocket(t *testing.T) {
	path := socketPath(t)
	stop, err := fakekubelet.StartGarbage(path)
	require.NoError(t, err)
	defer stop()
	c := startClient(t, fastConfig(path), nil)

	snap, st := waitFor(t, c, "failures", func(_ *Snapshot, st Status) bool { return st.ConsecutiveFailures >= 3 })
	assert.Nil(t, snap)
	assert.Equal(t, codes.Unavailable, status.Code(st.LastError), "%v", st.LastError)
	require.NoError(t, c.Shutdown())
}

func TestUnimplementedAllocatable(t *testing.T) {
	path := socketPath(t)
	srv := startNode(t, path)
	srv.SetMode(fakekubelet.ModeUnimplementedAllocatable)
	c := startClient(t, fastConfig(path), nil)

	snap, st := waitFor(t, c, "first snapshot", hasSnapshot)
	assert.Nil(t, snap.Allocatable, "unknown, not empty")
	assert.Contains(t, holders(snap), gpuA)
	assert.Equal(t, Status{LastSuccess: st.LastSuccess}, st)
}

func TestAllocatableDisabledOnOldKubelet(t *testing.T) {
	assert.True(t, allocatableDisabled(status.Error(codes.Unimplemented, "method GetAllocatableResources not implemented")))
	assert.True(t, allocatableDisabled(status.Error(codes.Unknown, "PodResources API GetAllocatableResources disabled")))
	assert.False(t, allocatableDisabled(status.Error(codes.Unavailable, "connection refused")))
	assert.False(t, allocatableDisabled(status.Error(codes.Unknown, "boom")))
}

func TestMessageSizeLimit(t *testing.T) {
	path := socketPath(t)
	var pods []fakekubelet.Pod
	for i := range 100 {
		pods = append(pods, pod("ns", fmt.Sprintf("pod-%d", i), ctr("c", devs("nvidia.com/gpu", gpuA))))
	}
	startKubelet(t, path, pods, nil)
	cfg := fastConfig(path)
	cfg.MaxMessageBytes = 1024
	c := startClient(t, cfg, nil)

	_, st := waitFor(t, c, "a failure", failing)
	assert.Equal(t, codes.ResourceExhausted, status.Code(st.LastError), "%v", st.LastError)
}

// A big node's List answer exceeds gRPC's 4 MiB default receive limit.
func TestLargeListWithinDefaultLimit(t *testing.T) {
	path := socketPath(t)
	id := "GPU-" + strings.Repeat("f", 100)
	var pods []fakekubelet.Pod
	for i := range 30000 {
		pods = append(pods, pod("namespace", fmt.Sprintf("pod-%06d", i), ctr("container", devs("nvidia.com/gpu", id))))
	}
	startKubelet(t, path, pods, nil)
	c := startClient(t, Config{Endpoint: path, RefreshInterval: time.Hour}, nil)

	snap, _ := waitFor(t, c, "first snapshot", hasSnapshot)
	assert.Len(t, holders(snap)[id], 30000)
}

func TestLogsOncePerStateChange(t *testing.T) {
	path := socketPath(t)
	srv := startNode(t, path)
	core, logs := observer.New(zapcore.InfoLevel)
	c := startClient(t, fastConfig(path), zap.New(core))
	waitFor(t, c, "first snapshot", hasSnapshot)

	srv.SetMode(fakekubelet.ModeError)
	waitFor(t, c, "failures", func(_ *Snapshot, st Status) bool { return st.ConsecutiveFailures >= 5 })
	srv.SetMode(fakekubelet.ModeOK)
	recovered, _ := waitFor(t, c, "recovery", func(_ *Snapshot, st Status) bool { return st.ConsecutiveFailures == 0 })
	waitFor(t, c, "another refresh", func(s *Snapshot, _ Status) bool { return s != recovered })
	require.NoError(t, c.Shutdown())

	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Level.String()+": "+e.Message)
	}
	assert.Equal(t, []string{
		"warn: cannot read GPU assignments from the kubelet; keeping the last snapshot, pod attribution goes stale",
		"info: reading GPU assignments from the kubelet again",
	}, msgs)
}

func TestLifecycle(t *testing.T) {
	c := New(Config{}, nil, nil)
	require.NoError(t, c.Shutdown(), "Shutdown before Start")

	path := socketPath(t)
	srv, err := fakekubelet.Start(path, nil, nil)
	require.NoError(t, err)
	c = New(fastConfig(path), nil, nil)
	require.NoError(t, c.Start(t.Context()))
	require.Error(t, c.Start(t.Context()), "second Start")
	waitFor(t, c, "first snapshot", hasSnapshot)
	require.NoError(t, c.Shutdown())
	require.NoError(t, c.Shutdown(), "second Shutdown")
	srv.Stop()
	goleak.VerifyNone(t)
}

// holders maps each device id of the snapshot to the "namespace/pod/container"s holding it.
func holders(s *Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				out[d.ID] = append(out[d.ID], p.Namespace+"/"+p.Name+"/"+c.Name)
			}
		}
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
