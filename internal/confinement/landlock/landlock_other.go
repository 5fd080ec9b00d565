//go:build !linux || !cgo

package landlock

import "errors"

// Status: Landlock exists only on Linux, and the constructor only in cgo builds (the agent
// is always one: go-nvml needs cgo).
func Status() Result {
	return Result{Step: "unsupported platform", Err: errors.ErrUnsupported}
}
