package podresources

import (
	"fmt"
	"os"
	"path/filepath"
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
	dir, err := os.MkdirTemp("", "podres")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
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
	startNode(t, path)
	taken := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(fastConfig(path), zaptest.NewLogger(t), func() time.Time { return taken })
	require.NoError(t, c.Start(t.Context()))
	defer func() { require.NoError(t, c.Shutdown()) }()

	snap, st := waitFor(t, c, "first snapshot", hasSnapshot)
	assert.Equal(t, map[string][]ContainerRef{
		gpuA: {{Namespace: "ml", Pod: "train-0", Container: "trainer", ResourceName: "nvidia.com/gpu"}},
		gpuB: {{Namespace: "ml", Pod: "train-0", Container: "trainer", ResourceName: "nvidia.com/gpu"}},
		gpuC: { // replicas ::0 and ::1 both map to the GPU
			{Namespace: "nb", Pod: "alice", Container: "notebook", ResourceName: "nvidia.com/gpu.shared"},
			{Namespace: "nb", Pod: "bob", Container: "notebook", ResourceName: "nvidia.com/gpu.shared"},
		},
		migX:    {{Namespace: "inf", Pod: "mig-small", Container: "server", ResourceName: "nvidia.com/mig-1g.10gb"}},
		legacyM: {{Namespace: "inf", Pod: "mig-legacy", Container: "server", ResourceName: "nvidia.com/mig-2g.20gb"}},
	}, snap.ByUUID)
	assert.Equal(t, map[string]int{
		"nvidia.com/gpu":         3, // counted as the kubelet does, parseable or not
		"nvidia.com/gpu.shared":  4, // replicas
		"nvidia.com/mig-1g.10gb": 2,
	}, snap.Allocatable)
	assert.Equal(t, map[string]int{
		"nvidia.com/gpu":         3,
		"nvidia.com/gpu.shared":  2,
		"nvidia.com/mig-1g.10gb": 1,
		"nvidia.com/mig-2g.20gb": 1,
	}, snap.Allocated)
	assert.Equal(t, 1, snap.SkippedDeviceIDs)
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
	assert.ElementsMatch(t, []string{migX, legacyM, gpuD}, keys(snap.ByUUID))
	assert.Equal(t, map[string]int{"nvidia.com/mig-1g.10gb": 2, "example.com/fpga": 1}, snap.Allocatable)
	assert.Equal(t, 0, snap.SkippedDeviceIDs)
}

func TestDuplicateAssignmentsAreMerged(t *testing.T) {
	path := socketPath(t)
	// An init container's device reused by the app container, and one
	// container holding two replicas of the same GPU.
	startKubelet(t, path, []fakekubelet.Pod{
		pod("ml", "p",
			ctr("init", devs("nvidia.com/gpu", gpuA)),
			ctr("app", devs("nvidia.com/gpu", gpuA))),
		pod("nb", "q", ctr("nb", devs("nvidia.com/gpu.shared", gpuC+"::0", gpuC+"::1"))),
	}, nil)
	c := startClient(t, fastConfig(path), nil)

	snap, _ := waitFor(t, c, "first snapshot", hasSnapshot)
	assert.Len(t, snap.ByUUID[gpuA], 2)
	assert.Equal(t, []ContainerRef{{Namespace: "nb", Pod: "q", Container: "nb", ResourceName: "nvidia.com/gpu.shared"}}, snap.ByUUID[gpuC])
	assert.Equal(t, map[string]int{"nvidia.com/gpu": 1, "nvidia.com/gpu.shared": 2}, snap.Allocated)
	assert.Empty(t, snap.Allocatable)
}

func TestRefreshPicksUpChanges(t *testing.T) {
	path := socketPath(t)
	srv := startKubelet(t, path, []fakekubelet.Pod{pod("ml", "a", ctr("c", devs("nvidia.com/gpu", gpuA)))}, nil)
	c := startClient(t, fastConfig(path), nil)
	waitFor(t, c, "first snapshot", hasSnapshot)

	srv.SetPods([]fakekubelet.Pod{pod("ml", "b", ctr("c", devs("nvidia.com/gpu", gpuB)))})
	snap, _ := waitFor(t, c, "pod b", func(s *Snapshot, _ Status) bool { return len(s.ByUUID[gpuB]) == 1 })
	assert.NotContains(t, snap.ByUUID, gpuA)
	assert.Equal(t, "b", snap.ByUUID[gpuB][0].Pod)
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
	assert.Contains(t, snap.ByUUID, gpuA)
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
	assert.Equal(t, good.ByUUID, snap.ByUUID)
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
	assert.Empty(t, snap.Allocatable)
	assert.Contains(t, snap.ByUUID, gpuA)
	assert.Equal(t, 3, snap.Allocated["nvidia.com/gpu"])
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
	assert.Len(t, snap.ByUUID[id], 30000)
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
		"warn: skipping kubelet device ids that are not GPU or MIG UUIDs (is the device plugin using index ids?)",
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

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
