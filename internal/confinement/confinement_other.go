//go:build !linux

package confinement

import (
	"errors"
	"fmt"
	"runtime"
)

// Apply is not available outside Linux: there is no host PID namespace to confine the
// agent from, and no seccomp.
func Apply(selfPID int) error {
	return fmt.Errorf("confining the process on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}
