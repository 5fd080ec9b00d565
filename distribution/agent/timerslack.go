// Not generated: ocb writes main.go and its siblings and leaves this file alone.

package main

import (
	"fmt"
	"os"

	"github.com/otelcol-gpu/otelcol-gpu/internal/timerslack"
)

// init gives the agent's threads their timer slack before the collector starts
// (internal/timerslack): on Linux it executes the binary once more, with the same arguments
// and environment, so it runs before main, ahead of anything main would start twice.
func init() {
	slack, err := timerslack.Parse(os.Getenv(timerslack.EnvVar))
	if err != nil {
		fmt.Fprintf(os.Stderr, "otelcol-gpu-agent: %v\n", err)
		os.Exit(1)
	}
	if err := timerslack.Ensure(slack); err != nil {
		fmt.Fprintf(os.Stderr, "otelcol-gpu-agent: running with the kernel's timer slack: %v\n", err)
	}
}
