//go:build e2e

package testbed

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// podCredentials is the agent container's security context (deploy/kubernetes/base) as
// setpriv reproduces it: UID and GID 0, no capability in any set, the bounding set
// included, no_new_privs.
var podCredentials = []string{"--reuid=0", "--regid=0", "--clear-groups", "--inh-caps=-all",
	"--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}

// TestAgentConfinesItself runs the agent build as the DaemonSet runs it (configs/agent.yaml
// under the pod's credentials) on simulated GPUs into Prometheus: it installs its seccomp
// filter (internal/confinement) and its GPUs land in Prometheus as usual;
// OTELCOL_GPU_CONFINEMENT=off leaves the filter out, and a value it does not know stops
// either build, naming the variable.
func TestAgentConfinesItself(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent pod runs as UID 0 without capabilities, which only root can start (CI runs as root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux, essential on Debian): %v", err)
	}
	parent := procStatus(t, os.Getpid())
	p := prom.Start(t, "")

	t.Run("as shipped", func(t *testing.T) {
		pid := startAgentWithPodCredentials(t, p, setpriv, "e2e-confined")
		got := procStatus(t, pid)
		for key, want := range map[string]string{
			"Uid": "0 0 0 0", "Seccomp": "2", "NoNewPrivs": "1",
			"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000",
		} {
			if got[key] != want {
				t.Errorf("agent's %s: %q, want %q", key, got[key], want)
			}
		}
		// Seccomp is 2 already where the tests run under a container's profile: the number
		// of filters (Linux 5.9+) tells the agent's own apart.
		if before, ok := parent["Seccomp_filters"]; ok {
			b, _ := strconv.Atoi(before)
			a, _ := strconv.Atoi(got["Seccomp_filters"])
			if a <= b {
				t.Errorf("agent runs under %d seccomp filters, the test under %d: it installed none", a, b)
			}
			t.Logf("seccomp filters: the agent's %d, the test's %d", a, b)
		}
		prom.Eventually(t, 60*time.Second, "the confined agent's GPUs", func() error {
			return eightGPUsWithIdentity(p, `hw_gpu_utilization_ratio{hw_gpu_task="general"}`, "e2e-confined")
		})
	})

	t.Run("OTELCOL_GPU_CONFINEMENT=off", func(t *testing.T) {
		pid := startAgentWithPodCredentials(t, p, setpriv, "e2e-unconfined", "OTELCOL_GPU_CONFINEMENT=off")
		got := procStatus(t, pid)
		for _, key := range []string{"Seccomp", "Seccomp_filters"} {
			if got[key] != parent[key] {
				t.Errorf("%s: %q, want the parent's %q", key, got[key], parent[key])
			}
		}
	})

	t.Run("a bad value", func(t *testing.T) {
		for _, binary := range []string{proc.AgentBinary(t), proc.CollectorBinary(t)} {
			cmd := exec.Command(binary, "--version")
			cmd.Env = append(os.Environ(), "OTELCOL_GPU_CONFINEMENT=maybe")
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), `OTELCOL_GPU_CONFINEMENT="maybe"`) {
				t.Errorf("%s with OTELCOL_GPU_CONFINEMENT=maybe: %v, %q; want exit status 1 naming the variable", filepath.Base(binary), err, out)
			}
		}
	})
}

// startAgentWithPodCredentials runs the shipped agent configuration (startAgentOn) through
// setpriv, and returns the agent's PID (setpriv executes it in its own process).
func startAgentWithPodCredentials(t *testing.T, p *prom.Server, setpriv, host string, env ...string) int {
	t.Helper()
	agent := proc.AgentBinary(t)
	node := agentNode{binary: setpriv, flags: append(append([]string(nil), podCredentials...), agent), env: env}
	startAgentOn(t, p, host, "dgxh100", "steady-training", node) // stopped when t ends
	return childRunning(t, agent)
}

// childRunning is the PID of this test's child process that runs binary.
func childRunning(t *testing.T, binary string) int {
	t.Helper()
	want, err := filepath.EvalSymlinks(binary)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if procStatus(t, pid)["PPid"] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); exe == want {
			return pid
		}
	}
	t.Fatalf("no child process of the test runs %s", want)
	return 0
}

// procStatus reads /proc/<pid>/status, whitespace in values collapsed (nil if the process
// is gone).
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return fields
}
