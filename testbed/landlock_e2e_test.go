//go:build e2e

package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// TestAgentCannotWriteThroughProcRoot: the agent runs as the DaemonSet runs it — the pod's
// credentials (UID 0, no capability, no_new_privs), a read-only root file system, the host's
// PID namespace — and is asked to write a file through /proc/<pid>/root of another
// process outside its mounts, past its read-only root: a root process without
// capabilities (the kernel lets a capability-less root reach those; one with capabilities
// the agent lacks is out of its reach already). Here the file is its log file
// (service::telemetry::logs::output_paths), the simplest write a configuration can ask for.
// Confined (the default: internal/confinement/landlock), the write is refused and the agent
// says so; with OTELCOL_GPU_CONFINEMENT=off the same write lands (the control: the
// escape is real), while the same directory written directly is read-only.
func TestAgentCannotWriteThroughProcRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent pod runs as UID 0 without capabilities, which only root can start (CI runs as root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux): %v", err)
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux): %v", err)
	}
	// A directory of the host's root file system that UID 0 may write, outside every
	// directory the agent may write beneath.
	dir, err := os.MkdirTemp("/var/tmp", "otelcol-gpu-landlock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	victim := exec.Command(setpriv, append(append([]string(nil), podCredentials...), "sleep", "600")...)
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
	config := filepath.Join(t.TempDir(), "agent.yaml")
	agent := proc.AgentBinary(t)

	// run starts the agent with its log file at logPath and returns its output once it
	// exits or once the file exists (it is then stopped).
	run := func(logPath string, env ...string) (string, bool) {
		t.Helper()
		yaml := fmt.Sprintf(`receivers:
  gpu:
    backend: simulated
exporters:
  otlp_http:
    endpoint: http://127.0.0.1:%d
service:
  telemetry:
    logs:
      output_paths: [stderr, %q]
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [gpu]
      exporters: [otlp_http]
`, proc.FreePort(t), logPath)
		if err := os.WriteFile(config, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		// A mount namespace of its own with the root read-only (readOnlyRootFilesystem),
		// then the pod's credentials.
		args := append([]string{"--mount", "--propagation", "private", "sh", "-c",
			`mount -o remount,bind,ro / && exec "$@"`, "sh", setpriv}, podCredentials...)
		args = append(args, agent, "--config", config)
		cmd := exec.Command(unshare, args...)
		cmd.Env = append(os.Environ(), env...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		written := strings.Replace(logPath, fmt.Sprintf("/proc/%d/root", victim.Process.Pid), "", 1)
		deadline := time.After(30 * time.Second)
		for {
			select {
			case <-done:
				_, err := os.Stat(written)
				return out.String(), err == nil
			case <-deadline:
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("the agent neither wrote %s nor exited in 30 s:\n%s", written, out.String())
			case <-time.After(100 * time.Millisecond):
				if _, err := os.Stat(written); err == nil {
					_ = cmd.Process.Kill()
					<-done
					return out.String(), true
				}
			}
		}
	}
	throughProc := func(name string) string {
		return fmt.Sprintf("/proc/%d/root%s/%s", victim.Process.Pid, dir, name)
	}

	out, wrote := run(throughProc("confined.log"))
	if wrote || !strings.Contains(out, "confined.log: permission denied") {
		t.Errorf("confined agent: wrote=%v, want the write refused with \"permission denied\":\n%s", wrote, out)
	}
	if strings.Contains(out, "writes are not confined") {
		t.Errorf("the agent says it is not confined (this kernel has Landlock):\n%s", out)
	}

	out, wrote = run(filepath.Join(dir, "direct.log"), "OTELCOL_GPU_CONFINEMENT=off")
	if wrote || !strings.Contains(out, "read-only file system") {
		t.Errorf("unconfined agent writing %s directly: wrote=%v, want \"read-only file system\" (else the root is not read-only and the escape below proves nothing):\n%s", dir, wrote, out)
	}
	out, wrote = run(throughProc("unconfined.log"), "OTELCOL_GPU_CONFINEMENT=off")
	if !wrote {
		t.Errorf("unconfined agent: the write through /proc/<pid>/root did not land (the control: without Landlock it must):\n%s", out)
	}
}
