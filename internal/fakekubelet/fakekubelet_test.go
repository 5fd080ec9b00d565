package fakekubelet

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// socketPath is short because unix socket paths are limited to ~108 bytes.
func socketPath(t *testing.T) string {
	t.Helper()
	dir := SocketDir(t)
	return filepath.Join(dir, "kubelet.sock")
}

func dial(t *testing.T, path string) podresourcesv1.PodResourcesListerClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return podresourcesv1.NewPodResourcesListerClient(conn)
}

var testPods = []Pod{{
	Namespace: "ml", Name: "train",
	Containers: []Container{
		{Name: "trainer", Devices: []Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{"GPU-a", "GPU-b"}}}},
		{Name: "sidecar"},
	},
}}

func TestServer(t *testing.T) {
	path := socketPath(t)
	srv, err := Start(path, testPods, []Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{"GPU-a", "GPU-b", "GPU-c"}}})
	require.NoError(t, err)
	defer srv.Stop()
	api := dial(t, path)
	ctx := t.Context()

	list, err := api.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetPodResources(), 1)
	p := list.GetPodResources()[0]
	assert.Equal(t, "ml", p.GetNamespace())
	assert.Equal(t, "train", p.GetName())
	require.Len(t, p.GetContainers(), 2)
	assert.Equal(t, []string{"GPU-a", "GPU-b"}, p.GetContainers()[0].GetDevices()[0].GetDeviceIds())
	assert.Empty(t, p.GetContainers()[1].GetDevices())

	alloc, err := api.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	require.NoError(t, err)
	assert.Equal(t, []string{"GPU-a", "GPU-b", "GPU-c"}, alloc.GetDevices()[0].GetDeviceIds())

	got, err := api.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "train", PodNamespace: "ml"})
	require.NoError(t, err)
	assert.Equal(t, "train", got.GetPodResources().GetName())
	_, err = api.Get(ctx, &podresourcesv1.GetPodResourcesRequest{PodName: "nope", PodNamespace: "ml"})
	assert.Equal(t, codes.NotFound, status.Code(err))

	srv.SetPods(nil)
	list, err = api.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.GetPodResources())
}

func TestModes(t *testing.T) {
	path := socketPath(t)
	srv, err := Start(path, testPods, nil)
	require.NoError(t, err)
	defer srv.Stop()
	api := dial(t, path)
	ctx := t.Context()

	srv.SetMode(ModeError)
	_, err = api.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))

	srv.SetMode(ModeUnimplementedAllocatable)
	_, err = api.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err)
	_, err = api.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	assert.Equal(t, codes.Unimplemented, status.Code(err))

	srv.SetMode(ModeHang)
	callCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = api.List(callCtx, &podresourcesv1.ListPodResourcesRequest{})
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err))
}

func TestStopReleasesHangingCalls(t *testing.T) {
	path := socketPath(t)
	srv, err := Start(path, testPods, nil)
	require.NoError(t, err)
	api := dial(t, path)
	srv.SetMode(ModeHang)

	errc := make(chan error, 1)
	go func() {
		_, err := api.List(t.Context(), &podresourcesv1.ListPodResourcesRequest{})
		errc <- err
	}()
	require.Eventually(t, func() bool { return srv.Hanging() == 1 }, 10*time.Second, time.Millisecond)
	srv.Stop()
	assert.Error(t, <-errc)
	srv.Stop() // idempotent
	_, err = os.Stat(path)
	assert.ErrorIs(t, err, os.ErrNotExist, "Stop removes the socket")
}

func TestStartReplacesStaleSocket(t *testing.T) {
	path := socketPath(t)
	// A crashed server leaves its socket file behind.
	lis, err := net.Listen("unix", path)
	require.NoError(t, err)
	lis.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, lis.Close())
	require.FileExists(t, path)

	srv, err := Start(path, testPods, nil)
	require.NoError(t, err)
	defer srv.Stop()
	list, err := dial(t, path).List(t.Context(), &podresourcesv1.ListPodResourcesRequest{})
	require.NoError(t, err)
	assert.Len(t, list.GetPodResources(), 1)
}

func TestStartRefusesToReplaceAFile(t *testing.T) {
	path := socketPath(t)
	require.NoError(t, os.WriteFile(path, nil, 0o600))
	_, err := Start(path, nil, nil)
	assert.ErrorContains(t, err, "not a socket")
	_, err = StartGarbage(path)
	assert.ErrorContains(t, err, "not a socket")
}

func TestGarbage(t *testing.T) {
	path := socketPath(t)
	stop, err := StartGarbage(path)
	require.NoError(t, err)
	defer stop()
	api := dial(t, path)

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = api.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}
