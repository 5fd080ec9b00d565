//go:build e2e

package testbed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// TestAgentRunsWithItsTimerSlack starts the agent build as shipped and with
// OTELCOL_GPU_TIMER_SLACK set: it runs with 5 ms of timer slack unless told otherwise
// (internal/timerslack), and refuses a value it cannot use, naming the variable.
func TestAgentRunsWithItsTimerSlack(t *testing.T) {
	own, err := os.ReadFile("/proc/self/timerslack_ns")
	if err != nil {
		t.Fatal(err)
	}
	inherited := strings.TrimSpace(string(own))
	for _, c := range []struct {
		env, want string
	}{
		{"", "5000000"},
		{"OTELCOL_GPU_TIMER_SLACK=1ms", "1000000"},
		{"OTELCOL_GPU_TIMER_SLACK=off", inherited},
	} {
		name := c.env
		if name == "" {
			name = "as shipped"
		}
		t.Run(name, func(t *testing.T) {
			agent := startMinimalAgent(t, c.env)
			got, err := agent.TimerSlack()
			if errors.Is(err, fs.ErrPermission) {
				t.Skip("reading another process's timer slack needs CAP_SYS_NICE (CI runs as root)")
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != c.want {
				t.Errorf("timer slack %d ns, want %s", got, c.want)
			}
		})
	}

	cmd := exec.Command(proc.AgentBinary(t), "--version")
	cmd.Env = append(os.Environ(), "OTELCOL_GPU_TIMER_SLACK=fast")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `OTELCOL_GPU_TIMER_SLACK="fast"`) {
		t.Errorf("a bad OTELCOL_GPU_TIMER_SLACK: %v, %q; want a non-zero exit naming it", err, out)
	}
}

// startMinimalAgent runs the agent on one simulated node, sending nowhere, until its
// health endpoint answers.
func startMinimalAgent(t *testing.T, env string) *proc.Process {
	t.Helper()
	health := fmt.Sprintf("127.0.0.1:%d", proc.FreePort(t))
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`receivers:
  gpu: {backend: simulated, collection_interval: 1s}
exporters:
  otlp_http: {endpoint: "http://127.0.0.1:%d"}
extensions:
  health_check: {endpoint: %q}
service:
  extensions: [health_check]
  telemetry: {metrics: {level: none}}
  pipelines:
    metrics: {receivers: [gpu], exporters: [otlp_http]}
`, proc.FreePort(t), health)), 0o600); err != nil {
		t.Fatal(err)
	}
	var extra []string
	if env != "" {
		extra = append(extra, env)
	}
	agent := proc.Agent(t, "agent", extra, []string{cfg}, health)
	t.Cleanup(func() { agent.Stop(5 * time.Second) })
	return agent
}
