// Package timerslack runs the node agent's threads with a larger timer slack than the
// kernel's 50 µs, so that the Go runtime's monitor thread (sysmon), which wakes every 20 µs
// for as long as a goroutine runs after a system call, wakes a few times per collection
// instead of dozens. Each of its wake-ups costs a context switch, and on a node agent that
// is busy for a few milliseconds a second they were a sixth of its CPU
// (docs/benchmarks.md). Timers then fire up to the slack late, which nothing in a metrics
// agent notices.
//
// Linux gives a new thread its creator's slack and keeps it across execve, but the Go
// runtime starts its threads before any of the program's code runs, so Ensure sets the
// slack and executes the binary again, once, at start-up.
package timerslack // import "github.com/otelcol-gpu/otelcol-gpu/internal/timerslack"

import (
	"fmt"
	"strings"
	"time"
)

const (
	// EnvVar sets the slack: a duration ("5ms", "500us"), or "off" (or 0) to leave the
	// kernel's default.
	EnvVar = "OTELCOL_GPU_TIMER_SLACK"
	// Default is the agent's slack when EnvVar is not set: sysmon then wakes every few
	// milliseconds at most, and the agent's timers (collection, batch, memory_limiter) fire
	// at most this late.
	Default = 5 * time.Millisecond
	// Max bounds what EnvVar may ask for: beyond it, timers would fire late enough to
	// matter (the shortest collection interval is 1 s).
	Max = 100 * time.Millisecond
	// reexecMarker is set in the environment of the re-executed binary, so that it never
	// executes itself a second time, whatever the kernel kept.
	reexecMarker = "OTELCOL_GPU_TIMER_SLACK_REEXECUTED"
)

// Parse reads EnvVar's value: empty is Default, "off" or a zero duration is 0 (leave the
// kernel's slack), anything else a duration up to Max.
func Parse(value string) (time.Duration, error) {
	value = strings.TrimSpace(value)
	switch value {
	case "":
		return Default, nil
	case "off", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: not a duration (e.g. 5ms) or \"off\"", EnvVar, value)
	}
	if d < 0 || d > Max {
		return 0, fmt.Errorf("%s=%q: must be between 0 (off) and %s", EnvVar, value, Max)
	}
	return d, nil
}
