// Package proc starts the external programs the testbed drives (Prometheus, the collector)
// and stops them when the test ends.
package proc // import "github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("no free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Process is a started program whose output is kept for failure messages.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

// syncBuffer is a bytes.Buffer safe for the writer goroutines of exec.Cmd.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Start runs a program; it is killed when the test ends, and its output is printed if the
// test failed.
func Start(t testing.TB, name string, env []string, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s (%s): %v", name, bin, err)
	}
	p := &Process{Name: name, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Stop(10 * time.Second)
		if t.Failed() {
			t.Logf("----- output of %s -----\n%s", name, tail(out.String(), 8000))
		}
	})
	return p
}

// Stop sends SIGTERM and waits, then SIGKILL.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// CPUSeconds is the user+system CPU time the program has used (from /proc/<pid>/stat).
func (p *Process) CPUSeconds() (float64, error) { return CPUSecondsOf(p.cmd.Process.Pid) }

// PID is the program's process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// RSS is the program's resident memory now, in bytes (from /proc/<pid>/status).
func (p *Process) RSS() (int64, error) { return RSSOf(p.cmd.Process.Pid) }

// PeakRSS is the most resident memory the program has had so far, in bytes (VmHWM).
func (p *Process) PeakRSS() (int64, error) {
	return procKiB(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid), "VmHWM:")
}

// Memory is the program's resident memory now, in bytes: the whole (VmRSS), its anonymous
// part (RssAnon: heap, stacks) and its file-backed part (RssFile: the binary's pages).
type Memory struct{ RSS, Anon, File int64 }

// Memory reads the program's resident memory from /proc/<pid>/status.
func (p *Process) Memory() (Memory, error) {
	path := fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)
	var m Memory
	for _, f := range []struct {
		key  string
		into *int64
	}{{"VmRSS:", &m.RSS}, {"RssAnon:", &m.Anon}, {"RssFile:", &m.File}} {
		v, err := procKiB(path, f.key)
		if err != nil {
			return Memory{}, err
		}
		*f.into = v
	}
	return m, nil
}

// CPUSecondsOf is a process's user+system CPU time (from /proc/<pid>/stat).
func CPUSecondsOf(pid int) (float64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses and may contain spaces.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100, nil // USER_HZ
}

// RSSOf is a process's resident memory now, in bytes (from /proc/<pid>/status).
func RSSOf(pid int) (int64, error) { return procKiB(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:") }

// MemAvailable is the machine's available memory in bytes (from /proc/meminfo).
func MemAvailable() (int64, error) { return procKiB("/proc/meminfo", "MemAvailable:") }

// procKiB reads a "Key:   123 kB" line of a /proc file, in bytes.
func procKiB(path, key string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if kb, ok := strings.CutPrefix(line, key); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			return n * 1024, err
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}

// Pause stops the program with SIGSTOP: it keeps its sockets open and answers nothing (a
// hung server). Resume undoes it.
func (p *Process) Pause() { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused program (SIGCONT).
func (p *Process) Resume() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// Signal sends sig to the program (e.g. SIGTERM without waiting, as a supervisor does).
func (p *Process) Signal(sig os.Signal) { _ = p.cmd.Process.Signal(sig) }

// Done is closed when the program has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// Kill ends the program with SIGKILL (a crash: nothing is flushed).
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Exited reports whether the program has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Output is what the program printed so far.
func (p *Process) Output() string { return p.out.String() }

// WaitHTTP200 polls url until it answers 200, the program exits, or the timeout passes.
func (p *Process) WaitHTTP200(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if exited, err := p.Exited(); exited {
			t.Fatalf("%s exited before %s answered: %v\n%s", p.Name, url, err, tail(p.Output(), 4000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %s did not answer 200 within %s", p.Name, url, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// RepoRoot is the repository root (the testbed lives one level below it).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// BuiltTool is a program `make deps` builds into the repository's bin/ (Prometheus 3,
// promtool, Alertmanager, kube-apiserver, etcd, victoria-metrics). Missing, it fails the test.
func BuiltTool(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(RepoRoot(), "bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s not found (%v): run `make deps` at the repository root, which builds it at the version of versions.mk", bin, err)
	}
	return bin
}

// CollectorBinary is the otelcol-gpu binary to test: $OTELCOL_GPU_BINARY, or the one
// `make build` writes.
func CollectorBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("OTELCOL_GPU_BINARY")
	if bin == "" {
		bin = filepath.Join(RepoRoot(), "distribution", "otelcol-gpu")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("collector binary %s not found (%v): run `make build` first, or `make e2e`", bin, err)
	}
	return bin
}

// AgentBinary is the node agent's lean build, otelcol-gpu-agent (builder-config-agent.yaml):
// $OTELCOL_GPU_AGENT_BINARY, or the one `make build` writes. It runs configs/agent.yaml,
// configs/agent-to-gateway.yaml, the dcgm-exporter compatibility overlays
// (configs/dcgm-compat*.yaml) and the overlays in deploy/config-overlays/; the gateway and
// the demo need the full build.
func AgentBinary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv("OTELCOL_GPU_AGENT_BINARY")
	if bin == "" {
		bin = filepath.Join(RepoRoot(), "distribution", "agent", "otelcol-gpu-agent")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("agent binary %s not found (%v): run `make build` first, or `make e2e`", bin, err)
	}
	return bin
}

// Collector starts the full otelcol-gpu build on config files (merged in order) with --set
// overrides and waits for its health endpoint (which must be healthAddr).
func Collector(t testing.TB, name string, env []string, configs []string, healthAddr string, sets ...string) *Process {
	t.Helper()
	return StartCollector(t, CollectorBinary(t), name, env, nil, configs, healthAddr, sets...)
}

// Agent is Collector on the node agent's build (AgentBinary).
func Agent(t testing.TB, name string, env []string, configs []string, healthAddr string, sets ...string) *Process {
	t.Helper()
	return StartCollector(t, AgentBinary(t), name, env, nil, configs, healthAddr, sets...)
}

// StartCollector starts a collector binary (CollectorBinary or AgentBinary) with extra
// command-line flags first (e.g. --feature-gates), then the config files and --set
// overrides, and waits for its health endpoint.
func StartCollector(t testing.TB, binary, name string, env, flags, configs []string, healthAddr string, sets ...string) *Process {
	t.Helper()
	args := append([]string(nil), flags...)
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	p := Start(t, name, env, binary, args...)
	p.WaitHTTP200(t, fmt.Sprintf("http://%s/", healthAddr), 60*time.Second)
	return p
}
