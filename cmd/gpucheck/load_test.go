package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A command of the user's own runs for the whole check and is ended with its children.
func TestLoadCommandRunsAndStops(t *testing.T) {
	dir := t.TempDir()
	child := filepath.Join(dir, "child.pid")
	l := startLoad(context.Background(), "sleep 60 & echo $! > "+child+"; wait", filepath.Join(dir, "load.log"))
	require.NotNil(t, l.cmd, l.Note)
	assert.Contains(t, l.Note, "pid "+strconv.Itoa(l.cmd.Process.Pid))
	raw, err := os.ReadFile(child)
	require.NoError(t, err)
	pid, err := strconv.Atoi(string(raw[:len(raw)-1]))
	require.NoError(t, err)
	require.NoError(t, syscall.Kill(pid, 0), "the command's child runs")

	start := time.Now()
	l.stop()
	assert.Less(t, time.Since(start), 5*time.Second)
	// Gone once reaped: it was reparented when the shell ended.
	assert.Eventually(t, func() bool { return syscall.Kill(pid, 0) != nil || isZombie(pid) }, 3*time.Second, 50*time.Millisecond, "the command's child is gone too")
}

func TestLoadNone(t *testing.T) {
	l := startLoad(context.Background(), "none", filepath.Join(t.TempDir(), "load.log"))
	assert.Nil(t, l.cmd)
	assert.Contains(t, l.Note, "none started")
	l.stop()
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// pid (comm) state …
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}
