package cgroup

import (
	"errors"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// startProcess starts a child that lives until the test ends: a real process for the
// kernel's /proc, whose entries plain-file fixtures cannot imitate (a kept descriptor of
// an exited process fails with ESRCH).
func startProcess(tb testing.TB) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command("sleep", "600")
	require.NoError(tb, cmd.Start())
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd
}

// BenchmarkLookupLiveProcess is what gpu_enrich pays per GPU process per collection on a
// node: the process is cached, and the lookup proves it is still the same one.
func BenchmarkLookupLiveProcess(b *testing.B) {
	pid := uint32(startProcess(b).Process.Pid)
	r := NewResolver("/proc")
	_, err := r.Lookup(pid)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Lookup(pid); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookupAbsentProcess is a PID without a /proc entry under a proc root that
// shows no PID 1 either, so the process may run unseen (no host PID namespace, hidepid),
// as in the pipelines benchmark.
func BenchmarkLookupAbsentProcess(b *testing.B) {
	r := NewResolver(b.TempDir())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Lookup(4242); !errors.Is(err, ErrProcessHidden) {
			b.Fatal(err)
		}
	}
}
