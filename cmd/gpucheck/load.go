package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// torchHold allocates 1 GiB on every GPU CUDA sees and holds it until its stdin closes:
// a compute process on each GPU for the process lists to agree on.
const torchHold = `
import sys, torch
n = torch.cuda.device_count()
held = [torch.empty(1 << 30, dtype=torch.uint8, device=f"cuda:{i}") for i in range(n)]
torch.cuda.synchronize()
print(f"ready {n}", flush=True)
sys.stdin.read()
`

// gpuLoad is the process gpucheck starts on the GPUs, if it can.
type gpuLoad struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// Note says what was started, or why nothing was.
	Note string
}

// startLoad starts the GPU process: mode "auto" uses PyTorch where python3 can import it,
// "none" starts nothing, anything else is a shell command run for the whole check (a
// CUDA sample, say). Failing to start one is no failure of the check: the report says the
// process lists were compared empty.
func startLoad(ctx context.Context, mode string, logFile string) *gpuLoad {
	switch mode {
	case "none":
		return &gpuLoad{Note: "none started (-load none): the process-list check compared whatever else runs on the GPUs"}
	case "auto":
		probe, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if out, err := exec.CommandContext(probe, "python3", "-c", "import torch; assert torch.cuda.is_available()").CombinedOutput(); err != nil {
			return &gpuLoad{Note: "none could be started (python3 cannot use torch with CUDA: " + lastLine(string(out), err) + "): the process-list check compared what else runs on the GPUs, possibly nothing"}
		}
		l, err := startHold(ctx, exec.CommandContext(ctx, "python3", "-c", torchHold), logFile, time.Minute)
		if err != nil {
			return &gpuLoad{Note: "none could be started (" + err.Error() + "): the process-list check compared what else runs on the GPUs, possibly nothing"}
		}
		return l
	default:
		cmd := exec.CommandContext(ctx, "sh", "-c", mode)
		// A group of its own: stop ends the command's children too, not only the shell.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		log, err := os.Create(logFile)
		if err != nil {
			return &gpuLoad{Note: "none started: " + err.Error()}
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return &gpuLoad{Note: "none started (" + mode + ": " + err.Error() + ")"}
		}
		// A command of the user's own says nothing when it is ready: give it a moment.
		time.Sleep(5 * time.Second)
		return &gpuLoad{cmd: cmd, Note: fmt.Sprintf("%q, pid %d", mode, cmd.Process.Pid)}
	}
}

// startHold runs the PyTorch holder and waits for its "ready" line.
func startHold(ctx context.Context, cmd *exec.Cmd, logFile string, wait time.Duration) (*gpuLoad, error) {
	log, err := os.Create(logFile)
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if strings.HasPrefix(sc.Text(), "ready") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case line := <-ready:
		n := strings.TrimSpace(strings.TrimPrefix(line, "ready"))
		return &gpuLoad{cmd: cmd, stdin: stdin, Note: fmt.Sprintf("PyTorch holding 1 GiB on each of %s GPU(s) CUDA sees, pid %d", n, cmd.Process.Pid)}, nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the PyTorch holder was not ready within %s; see %s", wait, logFile)
	}
}

// stop ends the process: the PyTorch holder when its stdin closes, a command of the
// user's by SIGTERM to its process group; whatever is left after 10 s is killed.
func (l *gpuLoad) stop() {
	if l == nil || l.cmd == nil {
		return
	}
	pid := l.cmd.Process.Pid
	if l.stdin != nil {
		_ = l.stdin.Close()
	} else {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() { _ = l.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = l.cmd.Process.Kill()
		<-done
	}
}

// lastLine is the last line of a command's output (a Python traceback ends with the error).
func lastLine(out string, err error) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return last
	}
	return err.Error()
}
