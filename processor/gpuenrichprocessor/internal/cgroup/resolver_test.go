package cgroup

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyProc copies the fixture tree so tests can change and delete entries.
func copyProc(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	require.NoError(t, os.CopyFS(root, os.DirFS("testdata/proc")))
	return root
}

func TestResolverFixtures(t *testing.T) {
	tests := []struct {
		pid     uint32
		want    Container
		wantErr error
	}{
		{pid: 1001, want: Container{PodUID: "ff549e0d-f4c2-47f3-bfcb-c076e17b6b36", ContainerID: "98a06d318c7bac860d88cf725e88a7e53516e5bb2cfe5b7e3a3ff0473bfe92a8", Runtime: "containerd", QoS: "burstable"}},
		{pid: 1002, want: Container{PodUID: "d338d846-6abc-495c-ba38-569817ad4646", ContainerID: "639da35cfb35d90f60b9fb583482f24e5c9f0763b532f9dfae89591902729878", Runtime: "cri-o", QoS: "besteffort"}},
		{pid: 1003, want: Container{PodUID: "10488001-23df-4962-876d-2ba71a41cba8", ContainerID: "f7766403702f2b4050fbea600fff0e9ac6bcc49d3f2af352e8324f0c485a55cd", Runtime: "containerd", QoS: "burstable"}},
		{pid: 1004, want: Container{PodUID: "76de46c2-8e01-4b89-8ba5-064921e1639e", ContainerID: "551fd3188a88f6aa1a864281295172c3e78e57b33ed76abd03ed0d7121251f1b", QoS: "guaranteed"}},
		{pid: 1005, want: Container{PodUID: "7fe71cab-8ee8-423d-8623-a76763e2064e", ContainerID: "e1996d2d95b6c980f77ea51e0015bc80179f562272636eab15728e7ef52aa2e0", Runtime: "cri-o", QoS: "besteffort"}},
		{pid: 1006, want: Container{ContainerID: "65e936e5f11ae9cb070847dbc58ace55c95b4b53574542f4bb8631386b34ded9", Runtime: "docker"}},
		{pid: 1007, want: Container{ContainerID: "160c0c732032a40ecaf33d25f151eb5a40ee6fb98d44e3b4ea38a44be661ed50", Runtime: "podman"}},
		{pid: 1008, wantErr: ErrNotAContainer},
		{pid: 1009, wantErr: ErrNotAContainer},
		{pid: 1010, wantErr: ErrNotAContainer},
		{pid: 1011, want: Container{PodUID: "1795bfc3-4a26-4b1a-93e7-18e74de49dc7", QoS: "guaranteed"}},
		{pid: 1012, want: Container{PodUID: "1795bfc3-4a26-4b1a-93e7-18e74de49dc7", ContainerID: "85cdf19487d1d639a162e8064ba65525b3ae68ea528e632d251c0b18ef5f03dc", Runtime: "docker", QoS: "guaranteed"}},
		{pid: 4242, wantErr: ErrProcessGone},
	}
	r := NewResolver("testdata/proc")
	// Twice: the second pass is served from the cache.
	for pass := range 2 {
		for _, tc := range tests {
			got, err := r.Lookup(tc.pid)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr, "pass %d pid %d", pass, tc.pid)
				continue
			}
			require.NoError(t, err, "pass %d pid %d", pass, tc.pid)
			assert.Equal(t, tc.want, got, "pass %d pid %d", pass, tc.pid)
		}
	}
}

func TestResolverCaches(t *testing.T) {
	root := copyProc(t)
	r := NewResolver(root)

	first, err := r.Lookup(1001)
	require.NoError(t, err)

	// Move the process to a host slice: the cached answer still stands.
	path := filepath.Join(root, "1001", "cgroup")
	require.NoError(t, os.WriteFile(path, []byte("0::/user.slice/user-1000.slice/session-3.scope\n"), 0o644))
	got, err := r.Lookup(1001)
	require.NoError(t, err)
	assert.Equal(t, first, got)

	// Still on a GPU: Forget keeps it.
	r.Forget(map[uint32]bool{1001: true})
	got, err = r.Lookup(1001)
	require.NoError(t, err)
	assert.Equal(t, first, got)

	// Gone from the GPUs (a recycled PID next time): Forget drops it and the
	// file is read again.
	r.Forget(map[uint32]bool{1002: true})
	_, err = r.Lookup(1001)
	require.ErrorIs(t, err, ErrNotAContainer)
}

func TestResolverCachesNotAContainer(t *testing.T) {
	root := copyProc(t)
	r := NewResolver(root)

	_, err := r.Lookup(1009)
	require.ErrorIs(t, err, ErrNotAContainer)

	// The file now says container, but the negative answer is cached.
	require.NoError(t, os.WriteFile(filepath.Join(root, "1009", "cgroup"),
		[]byte("0::/docker/65e936e5f11ae9cb070847dbc58ace55c95b4b53574542f4bb8631386b34ded9\n"), 0o644))
	_, err = r.Lookup(1009)
	require.ErrorIs(t, err, ErrNotAContainer)

	r.Forget(nil)
	got, err := r.Lookup(1009)
	require.NoError(t, err)
	assert.Equal(t, "docker", got.Runtime)
}

func TestResolverProcessGone(t *testing.T) {
	root := copyProc(t)
	r := NewResolver(root)

	_, err := r.Lookup(1002)
	require.NoError(t, err)

	// The process exits while cached.
	require.NoError(t, os.RemoveAll(filepath.Join(root, "1002")))
	_, err = r.Lookup(1002)
	require.ErrorIs(t, err, ErrProcessGone)

	// Dropped from the cache: a new process with the same PID is read.
	require.NoError(t, os.CopyFS(filepath.Join(root, "1002"), os.DirFS("testdata/proc/1006")))
	got, err := r.Lookup(1002)
	require.NoError(t, err)
	assert.Equal(t, "docker", got.Runtime)

	// Never existed.
	_, err = r.Lookup(0)
	require.ErrorIs(t, err, ErrProcessGone)
	_, err = NewResolver(filepath.Join(root, "missing")).Lookup(1001)
	require.ErrorIs(t, err, ErrProcessGone)
}

func TestResolverConcurrent(t *testing.T) {
	r := NewResolver("testdata/proc")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				for _, pid := range []uint32{1001, 1002, 1009, 4242} {
					_, _ = r.Lookup(pid)
				}
				r.Forget(map[uint32]bool{1001: true})
			}
		})
	}
	wg.Wait()
	got, err := r.Lookup(1001)
	require.NoError(t, err)
	assert.Equal(t, "containerd", got.Runtime)
}
