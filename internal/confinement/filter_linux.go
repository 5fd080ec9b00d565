//go:build linux

package confinement

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Values from the kernel's uapi headers that golang.org/x/sys/unix does not define.
const (
	fioSetOwn        = 0x8901 // asm-generic/sockios.h: FIOSETOWN, a socket's owner (f_setown)
	ioprioWhoProcess = 1      // linux/ioprio.h: IOPRIO_WHO_PROCESS
)

// abi is the system call convention the filter admits: every other one is refused.
type abi struct {
	auditArch uint32 // AUDIT_ARCH_* of seccomp_data.arch; 0: not supported
	x32       bool   // x86-64 only: refuse the x32 ABI's numbers (bit 30 set)
}

// x32Bit marks the x32 ABI's system call numbers (__X32_SYSCALL_BIT).
const x32Bit = 0x40000000

// Offsets in struct seccomp_data { int nr; __u32 arch; __u64 instruction_pointer;
// __u64 args[6]; }. Both supported architectures are little-endian: an argument's low 32
// bits come first.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// A rule refuses one system call with EPERM when any of its matches holds, or always when
// it has none.
type rule struct {
	name string
	nr   uint32
	when []match
}

// A match holds when all of its tests hold.
type match []test

// A test looks at one argument of the call.
type test struct {
	arg   uint32
	low32 bool // true: the argument's low 32 bits equal value; false: all 64 bits differ from value
	value uint64
}

// otherThan holds when the argument is none of values, compared on all 64 bits. Arguments
// the kernel truncates to 32 bits (pid_t) cannot hide a value this way: garbage in the
// upper half makes them differ, and the call is refused.
func otherThan(arg uint32, values ...uint64) match {
	m := make(match, len(values))
	for i, v := range values {
		m[i] = test{arg: arg, value: v}
	}
	return m
}

// is holds when the argument's low 32 bits are value: the kernel reads commands (an
// unsigned int) from the low half alone, so the upper half must not be able to hide one.
func is(arg uint32, value uint32) test { return test{arg: arg, low32: true, value: uint64(value)} }

// rules are the calls through which a process reaches another one. self is the agent's
// PID: signals to itself (the Go runtime preempts its threads with tgkill(getpid(), tid)
// and raises with kill(getpid())) and calls on itself (0 is "the caller" for most) stay
// allowed. Everything not listed is left to the container's own seccomp profile.
func rules(self uint64) []rule {
	onlySelf := []match{otherThan(0, self)}       // pid or tgid: the agent only
	selfOrZero := []match{otherThan(0, 0, self)}  // pid, 0 meaning the caller
	whoSelf := func(processKind uint64) []match { // setpriority, ioprio_set: (which, who)
		return []match{otherThan(0, processKind), otherThan(1, 0, self)}
	}
	return []rule{
		// Signals. kill(0)/kill(-pgid)/kill(-1) reach process groups or everyone: refused.
		{"kill", unix.SYS_KILL, onlySelf},
		{"tgkill", unix.SYS_TGKILL, onlySelf},
		{"rt_sigqueueinfo", unix.SYS_RT_SIGQUEUEINFO, onlySelf},
		{"rt_tgsigqueueinfo", unix.SYS_RT_TGSIGQUEUEINFO, onlySelf},
		// tkill names a thread of any process, and neither the Go runtime nor glibc uses it.
		{"tkill", unix.SYS_TKILL, nil},
		// The Go runtime only uses pidfds for children, which the agent does not start.
		{"pidfd_send_signal", unix.SYS_PIDFD_SEND_SIGNAL, nil},
		// A file's owner gets SIGIO (or any signal, F_SETSIG) when I/O is ready, and the
		// kernel lets UID 0 make any process the owner: a kill(2) by other means.
		{"fcntl", unix.SYS_FCNTL, []match{
			append(match{is(1, unix.F_SETOWN)}, otherThan(2, 0, self)...),
			{is(1, unix.F_SETOWN_EX)}, // takes a pointer the filter cannot read
		}},
		{"ioctl", unix.SYS_IOCTL, []match{{is(1, fioSetOwn)}, {is(1, unix.SIOCSPGRP)}}},
		// Tracing, another process's memory and file descriptors.
		{"ptrace", unix.SYS_PTRACE, nil},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV, nil},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, nil},
		{"pidfd_getfd", unix.SYS_PIDFD_GETFD, nil},
		{"kcmp", unix.SYS_KCMP, nil},
		{"process_madvise", unix.SYS_PROCESS_MADVISE, nil},
		{"process_mrelease", unix.SYS_PROCESS_MRELEASE, nil},
		{"get_robust_list", unix.SYS_GET_ROBUST_LIST, selfOrZero},
		// Observing other processes (pid > 0) or every process on a CPU (pid -1); the agent
		// profiles itself with timers, not perf events.
		{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, nil},
		// Lowering another root process's resource limits needs no capability when the UIDs
		// match; its priority, CPUs or memory placement, when it holds no capability the
		// agent lacks (commoncap's cap_safe_nice).
		{"setpriority", unix.SYS_SETPRIORITY, whoSelf(unix.PRIO_PROCESS)},
		{"ioprio_set", unix.SYS_IOPRIO_SET, whoSelf(ioprioWhoProcess)},
		{"sched_setaffinity", unix.SYS_SCHED_SETAFFINITY, selfOrZero},
		{"sched_setscheduler", unix.SYS_SCHED_SETSCHEDULER, selfOrZero},
		{"sched_setparam", unix.SYS_SCHED_SETPARAM, selfOrZero},
		{"sched_setattr", unix.SYS_SCHED_SETATTR, selfOrZero},
		{"prlimit64", unix.SYS_PRLIMIT64, selfOrZero},
		{"migrate_pages", unix.SYS_MIGRATE_PAGES, selfOrZero},
		{"move_pages", unix.SYS_MOVE_PAGES, selfOrZero},
	}
}

// Filter results.
const (
	retAllow  = unix.SECCOMP_RET_ALLOW
	retEPERM  = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
	retENOSYS = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS) // as on a kernel without that ABI
)

// program assembles the filter: calls of another ABI get ENOSYS, the calls rules match get
// EPERM, every other call is allowed. Each rule loads the call's number again, so no test
// ever compares an argument with a system call number.
func program(a abi, self uint64) ([]bpf.Instruction, error) {
	if a.auditArch == 0 {
		return nil, fmt.Errorf("no seccomp filter for %s: %w", runtime.GOARCH, errors.ErrUnsupported)
	}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: a.auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: retENOSYS},
	}
	if a.x32 {
		prog = append(prog,
			bpf.LoadAbsolute{Off: offNr, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpLessThan, Val: x32Bit, SkipTrue: 1},
			bpf.RetConstant{Val: retENOSYS},
		)
	}
	for _, r := range rules(self) {
		var body []bpf.Instruction
		if len(r.when) == 0 {
			body = []bpf.Instruction{bpf.RetConstant{Val: retEPERM}}
		}
		for _, m := range r.when {
			body = append(body, m.instructions()...)
		}
		if len(body) > 255 {
			return nil, fmt.Errorf("seccomp rule %s: %d instructions, more than a jump spans", r.name, len(body))
		}
		prog = append(prog,
			bpf.LoadAbsolute{Off: offNr, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: uint8(len(body))},
		)
		prog = append(prog, body...)
	}
	return append(prog, bpf.RetConstant{Val: retAllow}), nil
}

// instructions return EPERM when every test holds; a test that fails jumps past the return,
// to the rule's next match or the next rule.
func (m match) instructions() []bpf.Instruction {
	n := 1 // the return
	for _, t := range m {
		if t.low32 {
			n += 2
		} else {
			n += 4
		}
	}
	var out []bpf.Instruction
	// fail is the skip from the jump about to be appended to just past the return.
	fail := func() uint8 { return uint8(n - len(out) - 1) }
	for _, t := range m {
		lo, hi := uint32(t.value), uint32(t.value>>32)
		loadLo := bpf.LoadAbsolute{Off: offArgs + 8*t.arg, Size: 4}
		loadHi := bpf.LoadAbsolute{Off: offArgs + 8*t.arg + 4, Size: 4}
		if t.low32 {
			out = append(out, loadLo)
			out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: lo, SkipFalse: fail()})
			continue
		}
		out = append(out, loadHi)
		// Upper halves differ: the values differ, skip the lower half's test.
		out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: hi, SkipFalse: 2})
		out = append(out, loadLo)
		out = append(out, bpf.JumpIf{Cond: bpf.JumpEqual, Val: lo, SkipTrue: fail()})
	}
	return append(out, bpf.RetConstant{Val: retEPERM})
}

// Apply installs the filter on every thread of this process (SECCOMP_FILTER_FLAG_TSYNC:
// the threads the Go runtime and cgo started before it too) and sets no_new_privs, which
// an unprivileged process needs to install one. selfPID is this process's PID as the
// kernel sees it from here (os.Getpid()): the only target of signals left. Nothing undoes
// it; programs the process executes inherit it, and with it a PID that is not theirs, so
// they cannot signal themselves: the agent starts none. It returns an error, and leaves the
// process as it was apart from no_new_privs, when the kernel refuses.
func Apply(selfPID int) error {
	if selfPID <= 0 {
		return fmt.Errorf("confinement: invalid PID %d", selfPID)
	}
	insts, err := program(native, uint64(selfPID))
	if err != nil {
		return err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return fmt.Errorf("assembling the seccomp filter: %w", err)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}

	// no_new_privs belongs to the thread that installs the filter (TSYNC then gives it to
	// the others): both calls on one thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	tid, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return fmt.Errorf("installing the seccomp filter: %w", errno)
	}
	if tid != 0 {
		// TSYNC failed: the kernel names a thread it could not move, and installed nothing.
		return fmt.Errorf("installing the seccomp filter: thread %d could not take it", tid)
	}
	return nil
}
