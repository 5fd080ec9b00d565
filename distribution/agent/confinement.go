//go:build linux

// Not generated: ocb writes main.go and its siblings and leaves this file alone.

package main

import (
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/internal/confinement"
)

// init confines the agent before the collector starts (internal/confinement): in the
// host's PID namespace it may signal, trace or reschedule no process but itself.
// OTELCOL_GPU_CONFINEMENT=off leaves it out; a filter that cannot be installed stops the
// agent rather than let it run unconfined unnoticed.
func init() {
	on, err := confinement.Enabled(os.Getenv(confinement.EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "otelcol-gpu-agent: %v\n", err)
		os.Exit(1)
	}
	if !on {
		return
	}
	if err := confinement.Apply(os.Getpid()); err != nil {
		fmt.Fprintf(os.Stderr, "otelcol-gpu-agent: %v; set %s=off to run without the confinement\n", err, confinement.EnvVar)
		os.Exit(1)
	}
}
