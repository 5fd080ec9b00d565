package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Resolver looks PIDs up under a proc root and caches the answers per process.
// It is safe for concurrent use.
type Resolver struct {
	procRoot string

	mu    sync.Mutex
	cache map[uint32]cached
}

// cached is a Parse outcome for one process, identified by its PID and its
// start time: a PID reused by another process must not inherit the answer.
type cached struct {
	startTime uint64
	loc       Location
}

// NewResolver returns a Resolver reading <procRoot>/<pid>/{stat,cgroup}, e.g.
// with procRoot "/host/proc" when the host's /proc is mounted there.
func NewResolver(procRoot string) *Resolver {
	return &Resolver{procRoot: procRoot, cache: make(map[uint32]cached)}
}

// Lookup says where a host PID runs. The process is identified by its PID and
// its start time (/proc/<pid>/stat field 22): when the PID was reused since
// the last lookup, the cgroup is read again. A PID whose /proc entry is gone
// yields ErrProcessGone. Other read errors (EACCES with hidepid, a proc root
// that is not the host's) are returned as is and not cached.
func (r *Resolver) Lookup(pid uint32) (Location, error) {
	dir := filepath.Join(r.procRoot, strconv.FormatUint(uint64(pid), 10))

	// Held across the reads: there are only a handful of GPU processes, and
	// it keeps two concurrent lookups of one PID from both reading.
	r.mu.Lock()
	defer r.mu.Unlock()

	start, err := readStartTime(dir)
	if err != nil {
		delete(r.cache, pid)
		return Location{}, err
	}
	if c, ok := r.cache[pid]; ok && c.startTime == start {
		return c.loc, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		delete(r.cache, pid)
		return Location{}, goneOr(err)
	}
	loc, err := Parse(string(data))
	if err != nil {
		return Location{}, fmt.Errorf("%s: %w", filepath.Join(dir, "cgroup"), err)
	}
	// A process never leaves its pod, container or job; caching host
	// processes too spares re-reading them every scrape.
	r.cache[pid] = cached{startTime: start, loc: loc}
	return loc, nil
}

// Forget drops every cached PID not in alive (called once per scrape with the
// PIDs seen on GPUs), so the cache cannot grow without bound.
func (r *Resolver) Forget(alive map[uint32]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.cache {
		if !alive[pid] {
			delete(r.cache, pid)
		}
	}
}

// readStartTime reads field 22 of <dir>/stat: the process's start time in
// clock ticks since boot. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func readStartTime(dir string) (uint64, error) {
	data, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, goneOr(err)
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s/stat: no command name", dir)
	}
	fields := strings.Fields(s[i+1:])
	const startTimeField = 22 - 3 // fields after the name start at field 3
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("%s/stat: %d fields, want at least 22", dir, len(fields)+2)
	}
	start, err := strconv.ParseUint(fields[startTimeField], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s/stat: start time: %w", dir, err)
	}
	return start, nil
}

// goneOr maps "the process no longer exists" — its /proc directory is gone
// (ENOENT), or it exited while the file was read (ESRCH) — to ErrProcessGone.
func goneOr(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return ErrProcessGone
	}
	return err
}
