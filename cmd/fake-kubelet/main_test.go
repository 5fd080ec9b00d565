package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func socketPath(t *testing.T) string {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	return filepath.Join(dir, "kubelet.sock")
}

// The demo file loads, resolves against 8 UUIDs (a DGX H100) and is served.
func TestRunServesDemoPods(t *testing.T) {
	var uuids []string
	for i := range 8 {
		uuids = append(uuids, fmt.Sprintf("GPU-00000000-0000-4000-8000-%012d", i))
	}
	path := socketPath(t)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		errc <- run(ctx, []string{"--socket", path, "--pods", "pods-demo.yaml", "--uuids", strings.Join(uuids, ",")}, io.Discard)
	}()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil }, 10*time.Second, time.Millisecond)

	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	// The socket file exists from bind(), a moment before listen(): wait for the server to
	// be ready instead of failing on a refused first connection.
	callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
	defer callCancel()
	list, err := podresourcesv1.NewPodResourcesListerClient(conn).List(callCtx, &podresourcesv1.ListPodResourcesRequest{}, grpc.WaitForReady(true))
	require.NoError(t, err)
	ids := map[string]bool{}
	for _, p := range list.GetPodResources() {
		for _, c := range p.GetContainers() {
			for _, d := range c.GetDevices() {
				for _, id := range d.GetDeviceIds() {
					ids[id] = true
				}
			}
		}
	}
	assert.True(t, ids[uuids[0]])
	assert.True(t, ids[uuids[6]+"::1"])
	assert.False(t, ids[uuids[7]], "GPU 7 is left free")

	cancel()
	require.NoError(t, <-errc)
}

func TestRunErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no flags":          nil,
		"no pods":           {"--socket", "x.sock"},
		"index without ids": {"--socket", filepath.Join(t.TempDir(), "k.sock"), "--pods", "pods-demo.yaml"},
		"too few uuids":     {"--socket", filepath.Join(t.TempDir(), "k.sock"), "--pods", "pods-demo.yaml", "--uuids", "GPU-a"},
		"missing file":      {"--socket", "x.sock", "--pods", "nope.yaml"},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Error(t, run(t.Context(), args, io.Discard))
		})
	}
}
