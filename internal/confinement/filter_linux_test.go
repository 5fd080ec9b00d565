//go:build linux && (amd64 || arm64)

package confinement

import (
	"encoding/binary"
	"fmt"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// call is a system call as the filter sees it.
type call struct {
	arch uint32
	nr   uint32
	args []uint64
}

// seccompData lays out struct seccomp_data for golang.org/x/net/bpf's VM, which loads
// 32-bit words big-endian: each word is written big-endian at the offset where the kernel
// (little-endian) keeps it, so that every load reads the value the kernel would.
func (c call) seccompData() []byte {
	b := make([]byte, offArgs+6*8)
	binary.BigEndian.PutUint32(b[offNr:], c.nr)
	binary.BigEndian.PutUint32(b[offArch:], c.arch)
	for i, a := range c.args {
		binary.BigEndian.PutUint32(b[offArgs+8*i:], uint32(a))
		binary.BigEndian.PutUint32(b[offArgs+8*i+4:], uint32(a>>32))
	}
	return b
}

func neg(v int64) uint64 { return uint64(v) } // a negative int as the kernel's register holds it

// TestFilterDecisions runs the assembled filter on the calls the agent and an attacker in
// it would make: another process is never reached, the agent itself always is.
func TestFilterDecisions(t *testing.T) {
	const self, other = 4242, 77
	insts, err := program(native, self)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(insts)
	if err != nil {
		t.Fatal(err)
	}
	a := native.auditArch
	sys := func(nr uint32, args ...uint64) call { return call{arch: a, nr: nr, args: args} }
	const high = 1 << 32 // garbage in the upper half of a 32-bit argument
	cases := []struct {
		name string
		call call
		want uint32
	}{
		{"kill(self, SIGURG)", sys(unix.SYS_KILL, self, uint64(unix.SIGURG)), retAllow},
		{"kill(self, 0)", sys(unix.SYS_KILL, self, 0), retAllow},
		{"kill(other, SIGTERM)", sys(unix.SYS_KILL, other, uint64(unix.SIGTERM)), retEPERM},
		{"kill(other, 0)", sys(unix.SYS_KILL, other, 0), retEPERM},
		{"kill(0, SIGTERM): own process group", sys(unix.SYS_KILL, 0, uint64(unix.SIGTERM)), retEPERM},
		{"kill(-1, SIGTERM): every process", sys(unix.SYS_KILL, neg(-1), uint64(unix.SIGTERM)), retEPERM},
		{"kill(-pgid, SIGTERM)", sys(unix.SYS_KILL, neg(-other), uint64(unix.SIGTERM)), retEPERM},
		{"kill(-self, SIGTERM): the agent's group", sys(unix.SYS_KILL, neg(-self), uint64(unix.SIGTERM)), retEPERM},
		{"kill(other with upper bits, ...)", sys(unix.SYS_KILL, high|other, 9), retEPERM},
		{"kill(self with upper bits, ...)", sys(unix.SYS_KILL, high|self, 9), retEPERM},
		{"kill(self in both halves, ...)", sys(unix.SYS_KILL, self<<32|self, 9), retEPERM},
		{"tgkill(self, tid, SIGURG)", sys(unix.SYS_TGKILL, self, 4300, uint64(unix.SIGURG)), retAllow},
		{"tgkill(other, other, SIGKILL)", sys(unix.SYS_TGKILL, other, other, 9), retEPERM},
		{"tkill(self, ...)", sys(unix.SYS_TKILL, self, 9), retEPERM},
		{"tkill(other, ...)", sys(unix.SYS_TKILL, other, 9), retEPERM},
		{"rt_sigqueueinfo(self)", sys(unix.SYS_RT_SIGQUEUEINFO, self, 10, 0x1000), retAllow},
		{"rt_sigqueueinfo(other)", sys(unix.SYS_RT_SIGQUEUEINFO, other, 10, 0x1000), retEPERM},
		{"rt_tgsigqueueinfo(self)", sys(unix.SYS_RT_TGSIGQUEUEINFO, self, self, 10, 0x1000), retAllow},
		{"rt_tgsigqueueinfo(other)", sys(unix.SYS_RT_TGSIGQUEUEINFO, other, other, 10, 0x1000), retEPERM},
		{"pidfd_open(other)", sys(unix.SYS_PIDFD_OPEN, other, 0), retAllow},
		{"pidfd_send_signal", sys(unix.SYS_PIDFD_SEND_SIGNAL, 5, 9, 0, 0), retEPERM},
		{"fcntl(F_SETOWN, other)", sys(unix.SYS_FCNTL, 3, unix.F_SETOWN, other), retEPERM},
		{"fcntl(F_SETOWN with upper bits, other)", sys(unix.SYS_FCNTL, 3, high|unix.F_SETOWN, other), retEPERM},
		{"fcntl(F_SETOWN, -pgid)", sys(unix.SYS_FCNTL, 3, unix.F_SETOWN, neg(-other)), retEPERM},
		{"fcntl(F_SETOWN, self)", sys(unix.SYS_FCNTL, 3, unix.F_SETOWN, self), retAllow},
		{"fcntl(F_SETOWN, 0)", sys(unix.SYS_FCNTL, 3, unix.F_SETOWN, 0), retAllow},
		{"fcntl(F_SETOWN_EX)", sys(unix.SYS_FCNTL, 3, unix.F_SETOWN_EX, 0xc000001000), retEPERM},
		{"fcntl(F_SETOWN_EX with upper bits)", sys(unix.SYS_FCNTL, 3, high|unix.F_SETOWN_EX, 0xc000001000), retEPERM},
		{"fcntl(F_GETFL)", sys(unix.SYS_FCNTL, 3, unix.F_GETFL, 0), retAllow},
		{"fcntl(F_SETFL, O_NONBLOCK)", sys(unix.SYS_FCNTL, 3, unix.F_SETFL, unix.O_NONBLOCK), retAllow},
		{"fcntl(F_SETFD, other): an argument equal to a PID", sys(unix.SYS_FCNTL, 3, unix.F_SETFD, other), retAllow},
		{"ioctl(FIOSETOWN)", sys(unix.SYS_IOCTL, 3, fioSetOwn, 0xc000001000), retEPERM},
		{"ioctl(SIOCSPGRP with upper bits)", sys(unix.SYS_IOCTL, 3, high|unix.SIOCSPGRP, 0xc000001000), retEPERM},
		{"ioctl(TCGETS)", sys(unix.SYS_IOCTL, 1, unix.TCGETS, 0xc000001000), retAllow},
		{"ioctl on /dev/nvidiactl", sys(unix.SYS_IOCTL, 7, 0xc020462a, 0xc000001000), retAllow},
		{"ptrace(PTRACE_ATTACH, other)", sys(unix.SYS_PTRACE, unix.PTRACE_ATTACH, other), retEPERM},
		{"ptrace(PTRACE_TRACEME)", sys(unix.SYS_PTRACE, unix.PTRACE_TRACEME), retEPERM},
		{"process_vm_readv", sys(unix.SYS_PROCESS_VM_READV, other), retEPERM},
		{"process_vm_writev", sys(unix.SYS_PROCESS_VM_WRITEV, other), retEPERM},
		{"pidfd_getfd", sys(unix.SYS_PIDFD_GETFD, 5, 0, 0), retEPERM},
		{"kcmp", sys(unix.SYS_KCMP, self, other, 0), retEPERM},
		{"process_madvise", sys(unix.SYS_PROCESS_MADVISE, 5), retEPERM},
		{"process_mrelease", sys(unix.SYS_PROCESS_MRELEASE, 5), retEPERM},
		{"perf_event_open(pid 0)", sys(unix.SYS_PERF_EVENT_OPEN, 0xc000001000, 0, neg(-1)), retEPERM},
		{"get_robust_list(0)", sys(unix.SYS_GET_ROBUST_LIST, 0), retAllow},
		{"get_robust_list(other)", sys(unix.SYS_GET_ROBUST_LIST, other), retEPERM},
		{"setpriority(PRIO_PROCESS, 0)", sys(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, 0, 10), retAllow},
		{"setpriority(PRIO_PROCESS, self)", sys(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, self, 10), retAllow},
		{"setpriority(PRIO_PROCESS, other)", sys(unix.SYS_SETPRIORITY, unix.PRIO_PROCESS, other, 19), retEPERM},
		{"setpriority(PRIO_PGRP, 0)", sys(unix.SYS_SETPRIORITY, unix.PRIO_PGRP, 0, 19), retEPERM},
		{"setpriority(PRIO_USER, 0): every root process", sys(unix.SYS_SETPRIORITY, unix.PRIO_USER, 0, 19), retEPERM},
		{"ioprio_set(WHO_PROCESS, 0)", sys(unix.SYS_IOPRIO_SET, ioprioWhoProcess, 0, 0x6000), retAllow},
		{"ioprio_set(WHO_PROCESS, other)", sys(unix.SYS_IOPRIO_SET, ioprioWhoProcess, other, 0x6000), retEPERM},
		{"ioprio_set(WHO_USER, 0)", sys(unix.SYS_IOPRIO_SET, 3, 0, 0x6000), retEPERM},
		{"sched_setaffinity(0)", sys(unix.SYS_SCHED_SETAFFINITY, 0, 128, 0xc000001000), retAllow},
		{"sched_setaffinity(other)", sys(unix.SYS_SCHED_SETAFFINITY, other, 128, 0xc000001000), retEPERM},
		{"sched_setscheduler(other)", sys(unix.SYS_SCHED_SETSCHEDULER, other, 5, 0xc000001000), retEPERM},
		{"sched_setparam(other)", sys(unix.SYS_SCHED_SETPARAM, other, 0xc000001000), retEPERM},
		{"sched_setattr(self)", sys(unix.SYS_SCHED_SETATTR, self, 0xc000001000, 0), retAllow},
		{"sched_setattr(other)", sys(unix.SYS_SCHED_SETATTR, other, 0xc000001000, 0), retEPERM},
		{"prlimit64(0, RLIMIT_NOFILE)", sys(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_NOFILE, 0xc000001000, 0), retAllow},
		{"prlimit64(self, RLIMIT_NOFILE)", sys(unix.SYS_PRLIMIT64, self, unix.RLIMIT_NOFILE, 0xc000001000, 0), retAllow},
		{"prlimit64(other, RLIMIT_NOFILE)", sys(unix.SYS_PRLIMIT64, other, unix.RLIMIT_NOFILE, 0xc000001000, 0), retEPERM},
		{"migrate_pages(other)", sys(unix.SYS_MIGRATE_PAGES, other, 64, 0xc000001000, 0xc000002000), retEPERM},
		{"move_pages(0)", sys(unix.SYS_MOVE_PAGES, 0, 1, 0xc000001000), retAllow},
		{"move_pages(other)", sys(unix.SYS_MOVE_PAGES, other, 1, 0xc000001000), retEPERM},
		// What the agent does all day: nothing else is touched.
		{"read", sys(unix.SYS_READ, 3, 0xc000001000, 4096), retAllow},
		{"openat /proc/<pid>/cgroup", sys(unix.SYS_OPENAT, neg(-100), 0xc000001000, unix.O_RDONLY), retAllow},
		{"futex", sys(unix.SYS_FUTEX, 0xc000001000, 0, 1), retAllow},
		{"getpid", sys(unix.SYS_GETPID), retAllow},
		{"execve", sys(unix.SYS_EXECVE, 0xc000001000, 0xc000002000, 0xc000003000), retAllow},
	}
	// The same calls under another ABI's number space would slip past the list.
	for _, foreign := range []uint32{unix.AUDIT_ARCH_I386, unix.AUDIT_ARCH_ARM, unix.AUDIT_ARCH_X86_64, unix.AUDIT_ARCH_AARCH64} {
		if foreign == a {
			continue
		}
		for _, nr := range []uint32{37, 62, 129} { // kill on i386, x86-64, arm64
			c := call{arch: foreign, nr: nr, args: []uint64{other, 9}}
			cases = append(cases, struct {
				name string
				call call
				want uint32
			}{fmt.Sprintf("arch %#x nr %d", foreign, nr), c, retENOSYS})
		}
	}
	if native.x32 {
		cases = append(cases, struct {
			name string
			call call
			want uint32
		}{"x32 kill(other)", sys(x32Bit|62, other, 9), retENOSYS})
	}

	for _, c := range cases {
		got, err := vm.Run(c.call.seccompData())
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if uint32(got) != c.want {
			t.Errorf("%s: filter returns %s, want %s", c.name, result(uint32(got)), result(c.want))
		}
	}
}

func result(r uint32) string {
	switch r {
	case retAllow:
		return "ALLOW"
	case retEPERM:
		return "EPERM"
	case retENOSYS:
		return "ENOSYS"
	}
	return fmt.Sprintf("%#x", r)
}

// TestFilterAssembles: the kernel takes at most 4096 instructions, and x/net/bpf checks
// every jump lands inside the program.
func TestFilterAssembles(t *testing.T) {
	insts, err := program(native, 1<<22)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 4096 {
		t.Fatalf("%d instructions", len(raw))
	}
	t.Logf("%d instructions", len(raw))
	if _, err := program(abi{}, 1); err == nil {
		t.Error("an architecture without a filter must be refused")
	}
}
