package cgroup

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On the kernel's /proc, a cached process is kept by a descriptor of its stat file; these
// tests use real child processes, since only the kernel makes that descriptor fail once its
// process has exited (ESRCH), which is what keeps a reused PID from inheriting the answer.

func TestResolverKeepsALiveProcessOnProcFS(t *testing.T) {
	cmd := startProcess(t)
	pid := uint32(cmd.Process.Pid)
	r := NewResolver("/proc")
	t.Cleanup(r.Close)

	want, err := Parse(readFile(t, "/proc/self/cgroup")) // the child is in the test's cgroup
	require.NoError(t, err)
	got, err := r.Lookup(pid)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	kept := r.cache[pid].stat
	require.NotNil(t, kept, "a process on /proc is kept by its stat file")

	// Served through the kept descriptor: the same one, the same answer.
	got, err = r.Lookup(pid)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Same(t, kept, r.cache[pid].stat)
}

func TestResolverKeptProcessExits(t *testing.T) {
	cmd := startProcess(t)
	pid := uint32(cmd.Process.Pid)
	r := NewResolver("/proc")
	t.Cleanup(r.Close)
	_, err := r.Lookup(pid)
	require.NoError(t, err)
	kept := r.cache[pid].stat
	require.NotNil(t, kept)

	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait() // reaped: the PID is free for the kernel to give to another process

	// The descriptor now fails: it is the exited process's, whatever has the PID now.
	_, err = kept.ReadAt(make([]byte, 8), 0)
	require.Error(t, err)

	_, err = r.Lookup(pid)
	require.ErrorIs(t, err, ErrProcessGone)
	assert.NotContains(t, r.cache, pid)
	assert.Zero(t, r.kept)
	_, err = kept.ReadAt(make([]byte, 8), 0)
	require.ErrorIs(t, err, os.ErrClosed, "the exited process's descriptor is closed")
}

func TestResolverForgetAndCloseReleaseDescriptors(t *testing.T) {
	first, second := startProcess(t), startProcess(t)
	r := NewResolver("/proc")
	for _, cmd := range []uint32{uint32(first.Process.Pid), uint32(second.Process.Pid)} {
		_, err := r.Lookup(cmd)
		require.NoError(t, err)
	}
	firstFile, secondFile := r.cache[uint32(first.Process.Pid)].stat, r.cache[uint32(second.Process.Pid)].stat
	require.Equal(t, 2, r.kept)

	r.Forget(map[uint32]bool{uint32(second.Process.Pid): true})
	_, err := firstFile.ReadAt(make([]byte, 8), 0)
	require.ErrorIs(t, err, os.ErrClosed, "a PID no GPU lists any more is closed")
	require.Equal(t, 1, r.kept)

	r.Close()
	_, err = secondFile.ReadAt(make([]byte, 8), 0)
	require.ErrorIs(t, err, os.ErrClosed)
	require.Zero(t, r.kept)

	// After Close it still answers, by path, and keeps nothing open.
	_, err = r.Lookup(uint32(second.Process.Pid))
	require.NoError(t, err)
	assert.Nil(t, r.cache[uint32(second.Process.Pid)].stat)
}

func TestResolverKeepsAtMostMaxKeptFiles(t *testing.T) {
	cmd := startProcess(t)
	pid := uint32(cmd.Process.Pid)
	r := NewResolver("/proc")
	t.Cleanup(r.Close)
	r.kept = maxKeptFiles // as if that many processes were kept already

	_, err := r.Lookup(pid)
	require.NoError(t, err)
	assert.Nil(t, r.cache[pid].stat, "over the bound, looked up by path")
	got, err := r.Lookup(pid)
	require.NoError(t, err, "and still served from the cache by its start time")
	assert.Equal(t, r.cache[pid].loc, got)
}

func TestResolverKeepsNothingOutsideProcFS(t *testing.T) {
	r := NewResolver("testdata/proc")
	_, err := r.Lookup(1001)
	require.NoError(t, err)
	assert.Nil(t, r.cache[1001].stat, "plain files do not follow a process: the start time does")
	assert.Zero(t, r.kept)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}
