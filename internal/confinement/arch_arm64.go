//go:build linux

package confinement

import "golang.org/x/sys/unix"

// The AArch64 ABI. An AArch32 program (AUDIT_ARCH_ARM) the agent executed would inherit the
// filter with other numbers: it is refused.
var native = abi{auditArch: unix.AUDIT_ARCH_AARCH64}
