//go:build linux && (amd64 || arm64)

package confinement

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The test binary runs itself as the helper (TestMain), under setpriv with the agent pod's
// credentials. helperEnv says whether it applies the filter ("filtered") or not
// ("unfiltered": the control, which shows every probe would reach the victims).
const (
	helperEnv      = "CONFINEMENT_TEST_HELPER"
	victimEnv      = "CONFINEMENT_TEST_VICTIM"       // a root process with every capability
	sigioVictimEnv = "CONFINEMENT_TEST_SIGIO_VICTIM" // another one, for the SIGIO route
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(helper(mode == "filtered"))
	}
	os.Exit(m.Run())
}

// podCredentials is the agent container's security context as setpriv reproduces it: UID
// and GID 0, no supplementary groups, no capability in any set (the bounding set included,
// so that exec does not give root its capabilities back), no_new_privs.
var podCredentials = []string{"--reuid=0", "--regid=0", "--clear-groups", "--inh-caps=-all",
	"--ambient-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"}

// Probes aimed at processes other than the helper: the filter answers EPERM to each, and
// without it each succeeds.
var otherProbes = []string{
	"kill(victim, 0)", "kill(0, 0)", "kill(-victim's pgid, 0)", "kill(-1, 0)",
	"kill(victim with upper bits set, 0)", "tgkill(victim, victim, 0)", "tkill(victim, 0)",
	"rt_sigqueueinfo(victim, 0)", "rt_tgsigqueueinfo(victim, victim, 0)",
	"pidfd_send_signal(victim, 0)", "prlimit64(victim)", "setpriority(child)",
	"sched_setaffinity(child)",
	"fcntl(F_SETOWN, sigio victim)", "fcntl(F_SETOWN with upper bits set, sigio victim)",
	"fcntl(F_SETOWN_EX, sigio victim)", "ioctl(FIOSETOWN, sigio victim)",
	"ioctl(SIOCSPGRP, sigio victim)",
	"ptrace(PTRACE_ATTACH, child)", "ptrace(PTRACE_SEIZE, child)",
	"process_vm_readv(child)", "process_vm_writev(child)", "pidfd_getfd(child, 0)",
	"kcmp(self, child, KCMP_VM)",
	"kill(victim, 0) from a thread started before the filter",
	"kill(victim, SIGTERM)",
}

// Probes that succeed either way: what the agent does to itself, what gpu_enrich reads,
// and the Go runtime's own use of signals and threads.
var okProbes = []string{
	"kill(self, 0)", "tgkill(self, tid, 0)", "prlimit64(0)", "prlimit64(self)",
	"setpriority(self)", "sched_setaffinity(0)", "fcntl(F_SETOWN, self)",
	"pidfd_open(victim)", "read /proc/<victim>/cgroup", "read /proc/<victim>/comm",
	"fcntl(F_SETFL, O_ASYNC)", "write into the pipe",
	"preemption of a goroutine in a tight loop", "garbage collection", "timer",
	"SIGUSR1 sent with kill(self)", "SIGUSR1 sent with tgkill(self)",
}

// TestFilterUnderThePodsCredentials runs the helper as the agent pod runs (UID 0, no
// capabilities, no_new_privs) against root processes that are not its own, with and
// without the filter: with it nothing reaches them and the victims live on, without it
// each probe succeeds and the victims are killed (by kill and by SIGIO).
func TestFilterUnderThePodsCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the agent pod runs as UID 0, and only root can start a process as UID 0 without capabilities (CI runs as root)")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux, essential on Debian): %v", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, filtered := range []bool{true, false} {
		name := map[bool]string{true: "filtered", false: "unfiltered control"}[filtered]
		t.Run(name, func(t *testing.T) {
			victim, sigioVictim := startVictim(t), startVictim(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, setpriv, append(podCredentials, self)...)
			cmd.Env = append(os.Environ(),
				helperEnv+"="+map[bool]string{true: "filtered", false: "unfiltered"}[filtered],
				victimEnv+"="+strconv.Itoa(victim.pid), sigioVictimEnv+"="+strconv.Itoa(sigioVictim.pid))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("helper: %v\n%s%s", err, stdout.String(), stderr.String())
			}
			var got map[string]string
			if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
				t.Fatalf("helper's output: %v\n%s%s", err, stdout.String(), stderr.String())
			}

			for key, want := range map[string]string{
				"Uid": "0 0 0 0", "Gid": "0 0 0 0", "Groups": "", "NoNewPrivs": "1",
				"CapInh": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
				"CapBnd": "0000000000000000", "CapAmb": "0000000000000000",
			} {
				if got[key] != want {
					t.Errorf("helper's %s: %q, want %q (the pod's credentials)", key, got[key], want)
				}
			}
			wantOther := "ok"
			if filtered {
				wantOther = "EPERM"
				if got["Seccomp"] != "2" || got["every thread filtered"] != "ok" {
					t.Errorf("Seccomp %q, every thread filtered: %q; want 2 and ok", got["Seccomp"], got["every thread filtered"])
				}
			}
			for _, p := range otherProbes {
				if got[p] != wantOther {
					t.Errorf("%s: %q, want %q", p, got[p], wantOther)
				}
			}
			for _, p := range okProbes {
				if got[p] != "ok" {
					t.Errorf("%s: %q, want ok", p, got[p])
				}
			}

			if filtered {
				for _, v := range []*process{victim, sigioVictim} {
					if v.exited(time.Second) {
						t.Errorf("victim %d ended (%v) although every probe was refused", v.pid, v.state)
					}
				}
				return
			}
			for _, c := range []struct {
				v   *process
				sig syscall.Signal
			}{{victim, syscall.SIGTERM}, {sigioVictim, syscall.SIGIO}} {
				if !c.v.exited(5 * time.Second) {
					t.Errorf("victim %d still runs: the control could not kill it with %v, the test proves nothing", c.v.pid, c.sig)
					continue
				}
				if ws := c.v.state.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != c.sig {
					t.Errorf("victim %d ended with %v, want %v", c.v.pid, c.v.state, c.sig)
				}
			}
		})
	}
}

// process is a victim the test started as root (every capability), in a process group of
// its own.
type process struct {
	pid   int
	done  chan struct{}
	state *os.ProcessState
}

func startVictim(t *testing.T) *process {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	return p
}

func (p *process) exited(within time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(within):
		return false
	}
}

// helper probes, prints what each call answered as JSON on stdout, and returns its exit
// code. Progress goes to stderr, so that a hang shows where.
func helper(filtered bool) int {
	// ptrace's tracer is a thread, and Pdeathsig follows the thread that started a child:
	// keep both on this one.
	runtime.LockOSThread()
	results := map[string]string{}
	record := func(name string, err error) { results[name] = errString(err) }
	victim, _ := strconv.Atoi(os.Getenv(victimEnv))
	sigioVictim, _ := strconv.Atoi(os.Getenv(sigioVictimEnv))
	self := os.Getpid()

	// Children without capabilities (they inherit the helper's credentials): processes
	// ptrace may reach. Being ours keeps Yama's ptrace_scope=1 out of the result.
	attachChild, seizeChild, err := startChild(), startChild(), error(nil)
	if attachChild == 0 || seizeChild == 0 {
		fmt.Fprintln(os.Stderr, "could not start the children")
		return 2
	}
	// A thread that exists before the filter: TSYNC must reach it.
	early := startThread()

	if filtered {
		if err = Apply(self); err != nil {
			fmt.Fprintln(os.Stderr, "Apply:", err)
			return 2
		}
	}
	status := readStatus("/proc/self/status")
	for _, k := range []string{"Uid", "Gid", "Groups", "NoNewPrivs", "Seccomp", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		results[k] = status[k]
	}
	results["every thread filtered"] = everyThreadFiltered()

	fmt.Fprintln(os.Stderr, "signals")
	record("kill(victim, 0)", unix.Kill(victim, 0))
	record("kill(0, 0)", unix.Kill(0, 0))
	record("kill(-victim's pgid, 0)", unix.Kill(-victim, 0))
	record("kill(-1, 0)", unix.Kill(-1, 0))
	record("kill(victim with upper bits set, 0)", rawErr(unix.Syscall(unix.SYS_KILL, 1<<32|uintptr(victim), 0, 0)))
	record("tgkill(victim, victim, 0)", unix.Tgkill(victim, victim, 0))
	record("tkill(victim, 0)", rawErr(unix.Syscall(unix.SYS_TKILL, uintptr(victim), 0, 0)))
	var info [128]byte // siginfo_t with si_code SI_QUEUE (-1), as sigqueue(3) sends
	*(*int32)(unsafe.Pointer(&info[8])) = -1
	record("rt_sigqueueinfo(victim, 0)", rawErr(unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(victim), 0, uintptr(unsafe.Pointer(&info)))))
	record("rt_tgsigqueueinfo(victim, victim, 0)", rawErr(unix.Syscall6(unix.SYS_RT_TGSIGQUEUEINFO, uintptr(victim), uintptr(victim), 0, uintptr(unsafe.Pointer(&info)), 0, 0)))
	pidfd, err := unix.PidfdOpen(victim, 0)
	record("pidfd_open(victim)", err)
	record("pidfd_send_signal(victim, 0)", unix.PidfdSendSignal(pidfd, 0, nil, 0))
	record("kill(victim, 0) from a thread started before the filter", early(func() error { return unix.Kill(victim, 0) }))
	record("kill(self, 0)", unix.Kill(self, 0))
	record("tgkill(self, tid, 0)", unix.Tgkill(self, unix.Gettid(), 0))

	fmt.Fprintln(os.Stderr, "priorities and limits")
	var limit unix.Rlimit
	record("prlimit64(victim)", unix.Prlimit(victim, unix.RLIMIT_NOFILE, nil, &limit))
	record("prlimit64(0)", unix.Prlimit(0, unix.RLIMIT_NOFILE, nil, &limit))
	record("prlimit64(self)", unix.Prlimit(self, unix.RLIMIT_NOFILE, nil, &limit))
	// Each process gets the nice value and CPUs it has: nothing changes, only the permission
	// shows. The kernel keeps a process from rescheduling one with capabilities it lacks
	// (commoncap's cap_safe_nice): a child without capabilities shows the UID match.
	record("setpriority(child)", setSameNice(seizeChild))
	record("setpriority(self)", setSameNice(0))
	record("sched_setaffinity(child)", setSameAffinity(seizeChild))
	record("sched_setaffinity(0)", setSameAffinity(0))

	fmt.Fprintln(os.Stderr, "file owners")
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		fmt.Fprintln(os.Stderr, "pipe:", err)
		return 2
	}
	record("fcntl(F_SETOWN, self)", setOwner(pipe[1], self))
	_ = setOwner(pipe[1], 0)
	record("fcntl(F_SETOWN, sigio victim)", setOwner(pipe[0], sigioVictim))
	record("fcntl(F_SETOWN with upper bits set, sigio victim)", rawErr(unix.Syscall(unix.SYS_FCNTL, uintptr(pipe[0]), 1<<32|unix.F_SETOWN, uintptr(sigioVictim))))
	owner := struct{ kind, pid int32 }{1, int32(sigioVictim)} // struct f_owner_ex, F_OWNER_PID
	record("fcntl(F_SETOWN_EX, sigio victim)", rawErr(unix.Syscall(unix.SYS_FCNTL, uintptr(pipe[0]), unix.F_SETOWN_EX, uintptr(unsafe.Pointer(&owner)))))
	sock, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "socket:", err)
		return 2
	}
	pid32 := int32(sigioVictim)
	record("ioctl(FIOSETOWN, sigio victim)", rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(sock), fioSetOwn, uintptr(unsafe.Pointer(&pid32)))))
	record("ioctl(SIOCSPGRP, sigio victim)", rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(sock), unix.SIOCSPGRP, uintptr(unsafe.Pointer(&pid32)))))
	// The SIGIO route: readable data on a file with O_ASYNC signals its owner, which the
	// control made the victim (SIGIO's default action ends a process).
	record("fcntl(F_SETFL, O_ASYNC)", func() error {
		_, err := unix.FcntlInt(uintptr(pipe[0]), unix.F_SETFL, unix.O_ASYNC|unix.O_NONBLOCK)
		return err
	}())
	record("write into the pipe", func() error { _, err := unix.Write(pipe[1], []byte("x")); return err }())

	fmt.Fprintln(os.Stderr, "tracing")
	record("ptrace(PTRACE_ATTACH, child)", unix.PtraceAttach(attachChild))
	record("ptrace(PTRACE_SEIZE, child)", unix.PtraceSeize(seizeChild))
	record("process_vm_readv(child)", nil)
	record("process_vm_writev(child)", nil)
	if addr, err := writableAddress(seizeChild); err != nil {
		record("process_vm_readv(child)", err)
	} else {
		buf := make([]byte, 8)
		local := []unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}}
		remote := []unix.RemoteIovec{{Base: addr, Len: len(buf)}}
		_, err := unix.ProcessVMReadv(seizeChild, local, remote, 0)
		record("process_vm_readv(child)", err)
		_, err = unix.ProcessVMWritev(seizeChild, local, remote, 0) // the bytes it had
		record("process_vm_writev(child)", err)
	}
	childfd, err := unix.PidfdOpen(seizeChild, 0)
	if err == nil {
		_, err = unix.PidfdGetfd(childfd, 0, 0)
	}
	record("pidfd_getfd(child, 0)", err)
	record("kcmp(self, child, KCMP_VM)", rawErr(unix.Syscall6(unix.SYS_KCMP, uintptr(self), uintptr(seizeChild), 1, 0, 0, 0)))

	fmt.Fprintln(os.Stderr, "what gpu_enrich reads")
	for _, f := range []string{"cgroup", "comm"} {
		_, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", victim, f))
		record("read /proc/<victim>/"+f, err)
	}

	fmt.Fprintln(os.Stderr, "the Go runtime")
	record("preemption of a goroutine in a tight loop", preemption())
	record("garbage collection", collect())
	record("timer", func() error {
		select {
		case <-time.After(10 * time.Millisecond):
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("a 10 ms timer did not fire")
		}
	}())
	record("SIGUSR1 sent with kill(self)", ownSignal(func() error { return unix.Kill(self, unix.SIGUSR1) }))
	record("SIGUSR1 sent with tgkill(self)", ownSignal(func() error { return unix.Tgkill(self, unix.Gettid(), unix.SIGUSR1) }))

	// Last: the control ends the victim here.
	record("kill(victim, SIGTERM)", unix.Kill(victim, unix.SIGTERM))

	out, _ := json.Marshal(results)
	fmt.Println(string(out))
	return 0
}

func errString(err error) string {
	var errno syscall.Errno
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &errno):
		return unix.ErrnoName(errno)
	}
	return err.Error()
}

func rawErr(_, _ uintptr, errno syscall.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

// startChild starts a sleep of the helper's own, killed when the helper's thread ends.
func startChild() int {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0
	}
	return cmd.Process.Pid
}

// startThread runs a goroutine locked to a thread of its own now, and returns a function
// that runs f on that thread.
func startThread() func(f func() error) error {
	calls := make(chan func() error)
	results := make(chan error)
	started := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread stays this goroutine's
		close(started)
		for f := range calls {
			results <- f()
		}
	}()
	<-started
	return func(f func() error) error {
		calls <- f
		return <-results
	}
}

// readStatus reads a /proc/…/status file's fields, whitespace collapsed.
func readStatus(path string) map[string]string {
	data, _ := os.ReadFile(path)
	fields := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			fields[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return fields
}

// everyThreadFiltered is "ok" when every thread of the process runs under a filter.
func everyThreadFiltered() string {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err.Error()
	}
	var without []string
	for _, task := range tasks {
		if s := readStatus("/proc/self/task/" + task.Name() + "/status")["Seccomp"]; s != "2" {
			without = append(without, task.Name()+": Seccomp "+s)
		}
	}
	if len(without) > 0 {
		return fmt.Sprintf("%d of %d threads without: %s", len(without), len(tasks), strings.Join(without, ", "))
	}
	return "ok"
}

func setSameNice(pid int) error {
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, pid) // the kernel's 20 - nice
	if err != nil {
		return err
	}
	return unix.Setpriority(unix.PRIO_PROCESS, pid, 20-prio)
}

func setSameAffinity(pid int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return err
	}
	return unix.SchedSetaffinity(pid, &set)
}

func setOwner(fd, pid int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_SETOWN, pid)
	return err
}

// writableAddress is the start of a writable private mapping of pid (its /proc maps,
// which the filter does not guard).
func writableAddress(pid int) (uintptr, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[1] == "rw-p" {
			start, _, _ := strings.Cut(f[0], "-")
			addr, err := strconv.ParseUint(start, 16, 64)
			return uintptr(addr), err
		}
	}
	return 0, fmt.Errorf("no writable mapping in /proc/%d/maps", pid)
}

// preemption runs a goroutine that never yields on the only P while this one sleeps: it
// wakes only if the runtime preempts the other with a signal to its thread (tgkill).
func preemption() error {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var stop atomic.Bool
	spinning := make(chan struct{})
	go func() {
		close(spinning)
		for !stop.Load() {
		}
	}()
	<-spinning
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	return nil
}

func collect() error {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 64 {
		_ = make([]byte, 1<<20)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if after.NumGC <= before.NumGC {
		return errors.New("no collection ran")
	}
	return nil
}

func ownSignal(send func() error) error {
	c := make(chan os.Signal, 1)
	signal.Notify(c, unix.SIGUSR1)
	defer signal.Stop(c)
	if err := send(); err != nil {
		return err
	}
	select {
	case <-c:
		return nil
	case <-time.After(10 * time.Second):
		return errors.New("SIGUSR1 not received")
	}
}
