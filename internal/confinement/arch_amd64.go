//go:build linux

package confinement

import "golang.org/x/sys/unix"

// The x86-64 ABI. The same CPU also runs the i386 ABI (int 0x80, AUDIT_ARCH_I386) and the
// x32 ABI (AUDIT_ARCH_X86_64 with bit 30 set in the system call number), whose numbers
// differ: both must be refused, or kill would pass under another number.
var native = abi{auditArch: unix.AUDIT_ARCH_X86_64, x32: true}
