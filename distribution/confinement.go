//go:build linux

// Not generated: ocb writes main.go and its siblings and leaves this file alone.

package main

import (
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/internal/confinement"
	"github.com/otelcol-gpu/otelcol-gpu/internal/confinement/landlock"
)

// init confines the collector before it starts (internal/confinement), as the node agent's
// build does: the OpenTelemetry Operator's DaemonSet runs this build on every GPU node as
// UID 0, and the gateway and the demo never signal or trace another process either.
// OTELCOL_GPU_CONFINEMENT=off leaves it out; a filter that cannot be installed stops the
// collector rather than let it run unconfined unnoticed.
func init() {
	on, err := confinement.Enabled(os.Getenv(confinement.EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "otelcol-gpu: %v\n", err)
		os.Exit(1)
	}
	if !on {
		return
	}
	if err := confinement.Apply(os.Getpid()); err != nil {
		fmt.Fprintf(os.Stderr, "otelcol-gpu: %v; set %s=off to run without the confinement\n", err, confinement.EnvVar)
		os.Exit(1)
	}
	// Its writes were confined by Landlock before the runtime started (the package's C
	// constructor). A kernel without Landlock runs it anyway: refusing would leave the
	// node unwatched, and the seccomp filter above still holds.
	if ll := landlock.Status(); !ll.Applied {
		fmt.Fprintf(os.Stderr, "otelcol-gpu: writes are not confined (Landlock: %s: %v; it needs Linux 5.13+ with landlock in the lsm= boot list): through /proc/<pid>/root this process could write into other root processes' files\n", ll.Step, ll.Err)
	}
}
