// Package landlock confines the node agent's writes with Linux's Landlock LSM: it may
// write beneath its device nodes (/dev), the temporary directories (/tmp, TMPDIR), its state
// directory (/var/lib/otelcol-gpu), OTELCOL_GPU_QUEUE_DIR, OTELCOL_GPU_WAL_DIR and the
// directories listed in OTELCOL_GPU_WRITABLE_DIRS (colon-separated), and nowhere else.
//
// Why: the agent runs in the host's PID namespace as UID 0 without capabilities. The
// kernel lets such a process follow /proc/<pid>/root of any other UID-0 process into
// that process's file system, past the container's read-only root and its read-only
// mounts, and write there. Landlock judges the file actually reached, so that path leads
// nowhere writable. The seccomp filter of the parent package cannot: it does not see
// paths.
//
// Importing the package is what applies it: a C constructor (landlock_linux.c) runs before
// the Go runtime starts threads, because a Landlock domain binds only the thread that
// asks and the threads it creates later. OTELCOL_GPU_CONFINEMENT=off leaves it out. A
// kernel without Landlock (before 5.13, or booted without it in lsm=) runs the agent
// unconfined; the caller reports it (Status).
package landlock // import "github.com/otelcol-gpu/otelcol-gpu/internal/confinement/landlock"

// Result is what the constructor did.
type Result struct {
	// ABI is the kernel's Landlock ABI version (0: none).
	ABI int
	// Applied: the agent's writes are confined.
	Applied bool
	// Off: OTELCOL_GPU_CONFINEMENT=off.
	Off bool
	// Step names the call that failed when neither Applied nor Off.
	Step string
	// Err is that call's error.
	Err error
	// WritableDirs are the directories the agent may write beneath, as they existed.
	WritableDirs []string
}
