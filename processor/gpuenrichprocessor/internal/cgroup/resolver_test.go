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
		want    Location
		wantErr error
	}{
		{pid: 1001, want: Location{PodUID: "ff549e0d-f4c2-47f3-bfcb-c076e17b6b36", ContainerID: "98a06d318c7bac860d88cf725e88a7e53516e5bb2cfe5b7e3a3ff0473bfe92a8", Runtime: "containerd", QoS: "burstable"}},
		{pid: 1002, want: Location{PodUID: "d338d846-6abc-495c-ba38-569817ad4646", ContainerID: "639da35cfb35d90f60b9fb583482f24e5c9f0763b532f9dfae89591902729878", Runtime: "cri-o", QoS: "besteffort"}},
		{pid: 1003, want: Location{PodUID: "10488001-23df-4962-876d-2ba71a41cba8", ContainerID: "f7766403702f2b4050fbea600fff0e9ac6bcc49d3f2af352e8324f0c485a55cd", Runtime: "containerd", QoS: "burstable"}},
		{pid: 1004, want: Location{PodUID: "76de46c2-8e01-4b89-8ba5-064921e1639e", ContainerID: "551fd3188a88f6aa1a864281295172c3e78e57b33ed76abd03ed0d7121251f1b", QoS: "guaranteed"}},
		{pid: 1005, want: Location{PodUID: "7fe71cab-8ee8-423d-8623-a76763e2064e", ContainerID: "e1996d2d95b6c980f77ea51e0015bc80179f562272636eab15728e7ef52aa2e0", Runtime: "cri-o", QoS: "besteffort"}},
		{pid: 1006, want: Location{ContainerID: "65e936e5f11ae9cb070847dbc58ace55c95b4b53574542f4bb8631386b34ded9", Runtime: "docker"}},
		{pid: 1007, want: Location{ContainerID: "160c0c732032a40ecaf33d25f151eb5a40ee6fb98d44e3b4ea38a44be661ed50", Runtime: "podman"}},
		{pid: 1008, want: Location{PodUID: "d338d846-6abc-495c-ba38-569817ad4646", QoS: "besteffort"}}, // CRI-O's conmon: the pod's, no container's
		{pid: 1009, want: Location{}}, // a user's session
		{pid: 1010, want: Location{}}, // a host service
		{pid: 1011, want: Location{PodUID: "1795bfc3-4a26-4b1a-93e7-18e74de49dc7", QoS: "guaranteed"}},
		{pid: 1012, want: Location{PodUID: "1795bfc3-4a26-4b1a-93e7-18e74de49dc7", ContainerID: "85cdf19487d1d639a162e8064ba65525b3ae68ea528e632d251c0b18ef5f03dc", Runtime: "docker", QoS: "guaranteed"}},
		// Read from inside the agent's own cgroup namespace: relative to its root.
		{pid: 1013, want: Location{PodUID: "0b6a6e2c-71d4-4c59-9a4e-3f2d1c0b9a87", ContainerID: "2f1c9a0e8d7b6a5c4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d", Runtime: "containerd", QoS: "burstable"}},
		{pid: 1, want: Location{}},           // init
		{pid: 4242, wantErr: ErrProcessGone}, // PID 1 is shown, 4242 is not: it exited
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

	// The same process (same start time): the cached answer stands, the
	// cgroup file is not read again.
	path := filepath.Join(root, "1001", "cgroup")
	require.NoError(t, os.WriteFile(path, []byte("0::/user.slice/user-1000.slice/session-3.scope\n"), 0o644))
	got, err := r.Lookup(1001)
	require.NoError(t, err)
	assert.Equal(t, first, got)

	// Gone from the GPUs: Forget drops it and the file is read again.
	r.Forget(map[uint32]bool{1002: true})
	got, err = r.Lookup(1001)
	require.NoError(t, err)
	assert.True(t, got.IsHost())
}

// A pod's process exits and a host process gets its PID between two scrapes:
// the start time differs, so the new process does not inherit the pod.
func TestResolverPIDReusedByAnotherProcess(t *testing.T) {
	root := copyProc(t)
	r := NewResolver(root)

	pod, err := r.Lookup(1001)
	require.NoError(t, err)
	require.True(t, pod.InPod())

	// PID 1001 is now a user's process, started later.
	require.NoError(t, os.WriteFile(filepath.Join(root, "1001", "cgroup"), []byte("0::/user.slice/user-1000.slice/session-3.scope\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(root, "1001", "stat"),
		[]byte("1001 (nvidia-smi) R 1 1001 1001 0 -1 4194560 120 0 0 0 1 0 0 0 20 0 1 0 99000123 10000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"), 0o644))
	r.Forget(map[uint32]bool{1001: true}) // still a PID on a GPU: kept by Forget
	got, err := r.Lookup(1001)
	require.NoError(t, err)
	assert.True(t, got.IsHost(), "the new process is the host's, not the old pod's: %+v", got)
}

func TestReadStartTime(t *testing.T) {
	read := func(content string) (uint64, error) {
		path := filepath.Join(t.TempDir(), "stat")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		f, err := os.Open(path)
		require.NoError(t, err)
		defer f.Close()
		return readStartTime(f)
	}
	// The command name may hold spaces and parentheses.
	got, err := read("42 (my (weird) name) S 1 42 42 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 123456 1 1 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")
	require.NoError(t, err)
	assert.Equal(t, uint64(123456), got)

	_, err = read("42 (short) S 1\n")
	require.ErrorContains(t, err, "want at least 22")
}

func TestResolverUnreadableIsNotGone(t *testing.T) {
	root := copyProc(t)
	require.NoError(t, os.WriteFile(filepath.Join(root, "1001", "cgroup"), []byte("garbage"), 0o644))
	_, err := NewResolver(root).Lookup(1001)
	require.ErrorIs(t, err, ErrUnreadable)
	require.NotErrorIs(t, err, ErrProcessGone)
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
}

// A PID without a /proc entry has exited only where the proc root shows other processes:
// under hidepid=invisible (PID 1 hidden too) or a proc root that is not the host's, the
// entry is missing for a process that runs, and its cgroup is unreadable, not gone.
func TestResolverHiddenIsNotGone(t *testing.T) {
	root := copyProc(t)
	require.NoError(t, os.RemoveAll(filepath.Join(root, "1")))
	require.NoError(t, os.RemoveAll(filepath.Join(root, "1002")))
	r := NewResolver(root)
	_, err := r.Lookup(1002)
	require.ErrorIs(t, err, ErrProcessHidden)
	require.NotErrorIs(t, err, ErrProcessGone)
	got, err := r.Lookup(1001)
	require.NoError(t, err, "what the proc root shows is still read")
	assert.Equal(t, "containerd", got.Runtime)

	_, err = NewResolver(filepath.Join(root, "missing")).Lookup(1001)
	require.ErrorIs(t, err, ErrProcessHidden, "no proc root at all")
	require.NotErrorIs(t, err, ErrProcessGone)
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
