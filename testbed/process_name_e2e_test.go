//go:build e2e

package testbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestAgentRunsUnderItsBinarysName: the agent is the process its binary started, named
// after it - what pgrep -x, pidof, top, systemctl status, the OOM killer's log and
// journald's _COMM show - not a second execution of itself (which the kernel names after
// /proc/self/exe: "exe").
func TestAgentRunsUnderItsBinarysName(t *testing.T) {
	p := prom.Start(t, "")
	agent := startAgentOn(t, p, "e2e-name", "dgxh100", "steady-training", agentNode{})
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", agent.PID()))
	if err != nil {
		t.Fatal(err)
	}
	// The kernel keeps the first 15 bytes of the name.
	if got, want := strings.TrimSpace(string(comm)), "otelcol-gpu-agent"[:15]; got != want {
		t.Errorf("the agent's process is named %q, want %q", got, want)
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", agent.PID()))
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(exe) != "otelcol-gpu-agent" {
		t.Errorf("the agent's process runs %s", exe)
	}
}
