//go:build linux

package timerslack // import "github.com/otelcol-gpu/otelcol-gpu/internal/timerslack"

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Ensure makes every thread of this process run with the given slack (0: leave it). When
// the calling thread already has it (the process was re-executed, or its parent set it,
// e.g. systemd's TimerSlackNSec=), it returns nil. Otherwise it sets the slack and executes
// the binary again with the same arguments and environment, and so returns only on error;
// the process then goes on with the kernel's slack on its other threads.
func Ensure(slack time.Duration) error {
	reexecuted := os.Getenv(reexecMarker) != ""
	if reexecuted {
		_ = os.Unsetenv(reexecMarker) // not passed on to what the agent starts
	}
	if slack <= 0 {
		return nil
	}
	want := uint64(slack.Nanoseconds())
	current, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("reading the timer slack: %w", err)
	}
	if uint64(current) == want {
		return nil
	}
	if reexecuted {
		return fmt.Errorf("the timer slack was %d ns after re-executing, not %d ns", current, want)
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(want), 0, 0, 0); err != nil {
		return fmt.Errorf("setting the timer slack: %w", err)
	}
	// /proc/self/exe is this very binary, even if its file was replaced since.
	err = syscall.Exec("/proc/self/exe", os.Args, append(os.Environ(), reexecMarker+"=1"))
	return fmt.Errorf("executing the agent again with the timer slack set: %w", err)
}
