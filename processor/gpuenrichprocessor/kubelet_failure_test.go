package gpuenrichprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// shortSocket returns a socket path short enough for unix sockets (~108 bytes).
func shortSocket(t *testing.T) string {
	t.Helper()
	dir := fakekubelet.SocketDir(t)
	return filepath.Join(dir, "kubelet.sock")
}

func realKubelet(socket string) func([]string, *fakeClock) sources {
	return func(_ []string, clock *fakeClock) sources {
		return sources{pods: podresources.New(podresources.Config{
			Endpoint:        "unix://" + socket,
			RefreshInterval: 20 * time.Millisecond,
			Timeout:         200 * time.Millisecond,
			ResourceNames:   []string{"nvidia.com/gpu"},
		}, zap.NewNop(), time.Now)}
	}
}

func podsFor(uuids []string) []fakekubelet.Pod {
	var pods []fakekubelet.Pod
	for i, u := range uuids {
		pods = append(pods, fakekubelet.Pod{Namespace: "ml", Name: "train-" + string(rune('0'+i)), Containers: []fakekubelet.Container{
			{Name: "pytorch", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{u}}}},
		}})
	}
	return pods
}

// TestKubeletMissingMetricsFlowUnattributed: no kubelet socket at all. Every GPU still
// comes out, without pod attributes, and attribution health says so.
func TestKubeletMissingMetricsFlowUnattributed(t *testing.T) {
	h := newHarness(t, "dgxh100", "steady-training", testConfig(), realKubelet(shortSocket(t)))
	time.Sleep(100 * time.Millisecond) // a few failed refreshes
	md := h.run(2, 10*time.Second)
	for i := range 8 {
		gpu := gpuResource(t, md, string(rune('0'+i)))
		assert.Empty(t, attrOf(gpu, "k8s.pod.name"))
		assert.Positive(t, point(t, gpu, "hw.gpu.memory.utilization"), "derived signals still flow")
	}
	host := resources(md, map[string]string{"!hw.id": "", "host.name": "*"})[0]
	assert.Positive(t, point(t, host, "nvidia.gpu.attribution.errors"))
	assert.Positive(t, point(t, host, "nvidia.gpu.attribution.age"))
}

// TestKubeletHangingNeverBlocksTheDataPath: after a good snapshot the kubelet stops
// answering. While its call hangs, batches go through with the last snapshot.
func TestKubeletHangingNeverBlocksTheDataPath(t *testing.T) {
	socket := shortSocket(t)
	h := newHarness(t, "dgxh100", "steady-training", testConfig(), func(uuids []string, clock *fakeClock) sources {
		return realKubelet(socket)(uuids, clock)
	})
	srv, err := fakekubelet.Start(socket, podsFor(h.src.UUIDs()), nil)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	require.Eventually(t, func() bool {
		snap, _ := h.proc.src.pods.Snapshot()
		return snap != nil
	}, 10*time.Second, 5*time.Millisecond, "the first snapshot arrives once the kubelet is up")

	srv.SetMode(fakekubelet.ModeHang)
	require.Eventually(t, func() bool { return srv.Hanging() > 0 }, 10*time.Second, time.Millisecond)
	md := h.step(10 * time.Second) // runs while a kubelet call hangs
	assert.Positive(t, srv.Hanging(), "the batch did not wait for the hanging call")
	assert.Equal(t, "train-3", attrOf(gpuResource(t, md, "3"), "k8s.pod.name"), "the last good snapshot keeps attributing")

	srv.SetMode(fakekubelet.ModeError)
	require.Eventually(t, func() bool {
		_, st := h.proc.src.pods.Snapshot()
		return st.ConsecutiveFailures > 0
	}, 10*time.Second, 5*time.Millisecond)
	md = h.step(10 * time.Second)
	assert.Equal(t, "train-3", attrOf(gpuResource(t, md, "3"), "k8s.pod.name"))
}

// TestKubeletAnsweringGarbage: something else listens on the socket.
func TestKubeletAnsweringGarbage(t *testing.T) {
	socket := shortSocket(t)
	stop, err := fakekubelet.StartGarbage(socket)
	require.NoError(t, err)
	t.Cleanup(stop)
	h := newHarness(t, "dgxh100", "steady-training", testConfig(), realKubelet(socket))
	require.Eventually(t, func() bool {
		_, st := h.proc.src.pods.Snapshot()
		return st.TotalFailures > 0
	}, 10*time.Second, 5*time.Millisecond)
	md := h.step(10 * time.Second)
	assert.Empty(t, attrOf(gpuResource(t, md, "0"), "k8s.pod.name"))
}
