// Landlock for the node agent, applied by a constructor: it runs before the Go runtime
// starts its first extra thread, and a Landlock domain binds only the calling thread and the
// threads it creates later. Go code cannot do this: by the time init runs the runtime has
// several threads, and the kernels the agent meets (Linux 5.13 to 6.18) cannot restrict
// the other threads of a process (LANDLOCK_RESTRICT_SELF_TSYNC came after them).
//
// What it confines: writes. The agent writes nowhere but its device nodes, a temporary
// directory and its queue directory; with the host's PID namespace, UID 0 and no
// capabilities it could otherwise write, through /proc/<pid>/root, into any root
// process's file system, past the container's read-only root and read-only mounts.
// Landlock checks the file actually reached, so the magic link leads nowhere writable.
// Reads, execution and device ioctls are not handled: the agent reads the host's /proc.

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "landlock_status.h"

// The same numbers on every architecture (the generic system call table).
#ifndef __NR_landlock_create_ruleset
#define __NR_landlock_create_ruleset 444
#endif
#ifndef __NR_landlock_add_rule
#define __NR_landlock_add_rule 445
#endif
#ifndef __NR_landlock_restrict_self
#define __NR_landlock_restrict_self 446
#endif

// From linux/landlock.h, spelled out so that old build hosts' headers do not matter.
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)    // ABI 2
#define LL_FS_TRUNCATE (1ULL << 14) // ABI 3

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
};

struct ll_path_beneath_attr {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

int otelcol_gpu_landlock_abi = 0;
int otelcol_gpu_landlock_errno = 0;
const char *otelcol_gpu_landlock_step = "not run";
char otelcol_gpu_landlock_paths[4096];

static void fail(const char *step) {
	otelcol_gpu_landlock_errno = errno;
	otelcol_gpu_landlock_step = step;
}

// allow lets the ruleset write beneath path, if it exists; "/" never: it would undo the
// confinement.
static int allow(int ruleset, const char *path, uint64_t access) {
	if (path == NULL || path[0] != '/' || strcmp(path, "/") == 0) {
		return 0;
	}
	int fd = open(path, O_PATH | O_CLOEXEC | O_DIRECTORY);
	if (fd < 0) {
		return 0;
	}
	struct ll_path_beneath_attr rule = {.allowed_access = access, .parent_fd = fd};
	long ret = syscall(__NR_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0);
	close(fd);
	if (ret != 0) {
		return -1;
	}
	size_t used = strlen(otelcol_gpu_landlock_paths);
	size_t room = sizeof(otelcol_gpu_landlock_paths) - used;
	if (strlen(path) + 2 < room) {
		if (used > 0) {
			strcat(otelcol_gpu_landlock_paths, ":");
		}
		strcat(otelcol_gpu_landlock_paths, path);
	}
	return 0;
}

// makeDirs creates path and its missing parents (mode 0700), as file_storage's
// create_directory would after start: once confined, the agent could not create a queue
// directory whose parent it may not write. Errors are left to file_storage to report.
static void makeDirs(const char *path) {
	if (path == NULL || path[0] != '/') {
		return;
	}
	char buf[4096];
	strncpy(buf, path, sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	for (char *p = buf + 1; *p != '\0'; p++) {
		if (*p == '/') {
			*p = '\0';
			mkdir(buf, 0700);
			*p = '/';
		}
	}
	mkdir(buf, 0700);
}

// allowList allows each path of a colon-separated list.
static int allowList(int ruleset, const char *list, uint64_t access) {
	if (list == NULL) {
		return 0;
	}
	char buf[4096];
	strncpy(buf, list, sizeof(buf) - 1);
	buf[sizeof(buf) - 1] = '\0';
	char *save = NULL;
	for (char *p = strtok_r(buf, ":", &save); p != NULL; p = strtok_r(NULL, ":", &save)) {
		if (allow(ruleset, p, access) != 0) {
			return -1;
		}
	}
	return 0;
}

__attribute__((constructor)) static void otelcol_gpu_landlock(void) {
	const char *mode = getenv("OTELCOL_GPU_CONFINEMENT");
	if (mode != NULL && strcmp(mode, "off") == 0) {
		otelcol_gpu_landlock_step = "off";
		return;
	}
	long abi = syscall(__NR_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
	if (abi < 1) {
		fail("landlock_create_ruleset (version)");
		return;
	}
	otelcol_gpu_landlock_abi = (int)abi;
	uint64_t handled = LL_FS_WRITE_FILE | LL_FS_REMOVE_DIR | LL_FS_REMOVE_FILE | LL_FS_MAKE_CHAR |
	                   LL_FS_MAKE_DIR | LL_FS_MAKE_REG | LL_FS_MAKE_SOCK | LL_FS_MAKE_FIFO |
	                   LL_FS_MAKE_BLOCK | LL_FS_MAKE_SYM;
	if (abi >= 2) {
		handled |= LL_FS_REFER;
	}
	if (abi >= 3) {
		handled |= LL_FS_TRUNCATE;
	}
	struct ll_ruleset_attr attr = {.handled_access_fs = handled};
	int ruleset = (int)syscall(__NR_landlock_create_ruleset, &attr, sizeof(attr), 0);
	if (ruleset < 0) {
		fail("landlock_create_ruleset");
		return;
	}
	const char *queue = getenv("OTELCOL_GPU_QUEUE_DIR");
	makeDirs(queue);
	makeDirs(getenv("OTELCOL_GPU_WAL_DIR"));
	const char *tmp = getenv("TMPDIR");
	// /dev: NVML opens /dev/nvidia* for writing. /tmp and TMPDIR. The state directory
	// (/var/lib/otelcol-gpu) and the queue and WAL directories as the shipped
	// configurations name them. OTELCOL_GPU_WRITABLE_DIRS: any other (a log file, pprof).
	if (allow(ruleset, "/dev", handled) != 0 || allow(ruleset, "/tmp", handled) != 0 ||
	    allow(ruleset, tmp, handled) != 0 ||
	    allow(ruleset, "/var/lib/otelcol-gpu", handled) != 0 || allow(ruleset, queue, handled) != 0 ||
	    allow(ruleset, getenv("OTELCOL_GPU_WAL_DIR"), handled) != 0 ||
	    allowList(ruleset, getenv("OTELCOL_GPU_WRITABLE_DIRS"), handled) != 0) {
		fail("landlock_add_rule");
		close(ruleset);
		return;
	}
	// Required without CAP_SYS_ADMIN; the seccomp filter sets it as well.
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		fail("prctl(PR_SET_NO_NEW_PRIVS)");
		close(ruleset);
		return;
	}
	if (syscall(__NR_landlock_restrict_self, ruleset, 0) != 0) {
		fail("landlock_restrict_self");
		close(ruleset);
		return;
	}
	close(ruleset);
	otelcol_gpu_landlock_step = "applied";
}
