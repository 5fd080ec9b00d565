//go:build !linux

package timerslack // import "github.com/otelcol-gpu/otelcol-gpu/internal/timerslack"

import "time"

// Ensure does nothing where the kernel has no per-thread timer slack.
func Ensure(time.Duration) error { return nil }
