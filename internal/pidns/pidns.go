// Package pidns tells whether this process runs in the host's (initial) PID namespace.
//
// NVIDIA drivers from 535.113 on list only the GPU processes of the caller's PID namespace,
// so where the agent runs decides whether it can see other containers' processes at all.
package pidns

import (
	"fmt"
	"os"
)

// initialNamespace is how /proc/<pid>/ns/pid reads for the initial PID namespace: the
// kernel gives it a fixed inode number (PROC_PID_INIT_INO, include/linux/proc_ns.h).
const initialNamespace = "pid:[4026531836]"

// Reader reads the PID namespace link of a process; tests inject their own.
type Reader func(path string) (string, error)

// InHost reports whether the process whose /proc is procRoot ("/proc" for this one)
// runs in the initial PID namespace.
func InHost(read Reader, procRoot string) (bool, error) {
	if read == nil {
		read = os.Readlink
	}
	link, err := read(procRoot + "/self/ns/pid")
	if err != nil {
		return false, fmt.Errorf("cannot tell the PID namespace: %w", err)
	}
	return link == initialNamespace, nil
}
