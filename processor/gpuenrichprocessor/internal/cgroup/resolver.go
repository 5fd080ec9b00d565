package cgroup

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxKeptFiles bounds the /proc/<pid>/stat descriptors a Resolver keeps open (one per
// cached GPU process on the kernel's proc filesystem). A node has a few GPU processes
// per GPU, a few hundred with MPS; beyond the bound, processes are looked up by path.
const maxKeptFiles = 1024

// Resolver looks PIDs up under a proc root and caches the answers per process.
// It is safe for concurrent use.
type Resolver struct {
	procRoot string

	mu     sync.Mutex
	cache  map[uint32]cached
	kept   int      // cached entries holding a descriptor
	probe  [64]byte // the liveness read's buffer (under mu)
	closed bool
	// showsInit caches whether <procRoot>/1 exists (goneOr) until the next Forget, once
	// per collection: 0 not yet asked, 1 yes, -1 no.
	showsInit int8
}

// cached is a Parse outcome for one process, identified by its PID and its
// start time: a PID reused by another process must not inherit the answer.
type cached struct {
	startTime uint64
	loc       Location
	// stat is the process's /proc/<pid>/stat, kept open where the proc root is the
	// kernel's proc filesystem. The descriptor belongs to that process, not to its
	// PID: once it has exited, reads fail with ESRCH, even after the PID went to
	// another process. One pread then proves the cached answer is still the
	// process's, where otherwise each collection opens, reads, splits and closes
	// the file (docs/benchmarks.md: 23 µs per process by path, 4 µs kept). nil elsewhere
	// (plain files in tests), where the start time identifies the process.
	stat *os.File
}

// NewResolver returns a Resolver reading <procRoot>/<pid>/{stat,cgroup}, e.g.
// with procRoot "/host/proc" when the host's /proc is mounted there. Close
// releases the descriptors it keeps.
func NewResolver(procRoot string) *Resolver {
	return &Resolver{procRoot: procRoot, cache: make(map[uint32]cached)}
}

// Lookup says where a host PID runs. The process is identified by its PID and
// its start time (/proc/<pid>/stat field 22), or on the kernel's proc
// filesystem by a descriptor of its stat file: when the PID was reused since
// the last lookup, the cgroup is read again. A process that exited yields
// ErrProcessGone; a PID the proc root does not show at all (hidepid=invisible, no
// host /proc) yields ErrProcessHidden. Other read errors (EACCES or EPERM with
// hidepid=noaccess) are returned as is. Errors are not cached.
func (r *Resolver) Lookup(pid uint32) (Location, error) {
	// Held across the reads: there are only a handful of GPU processes, and
	// it keeps two concurrent lookups of one PID from both reading.
	r.mu.Lock()
	defer r.mu.Unlock()

	if c, ok := r.cache[pid]; ok && c.stat != nil {
		if r.stillRunning(c.stat) {
			return c.loc, nil
		}
		// Exited: the PID is free, or another process's now; read it afresh.
		r.drop(pid)
	}

	dir := filepath.Join(r.procRoot, strconv.FormatUint(uint64(pid), 10))
	stat, err := os.Open(filepath.Join(dir, "stat"))
	if err != nil {
		r.drop(pid)
		return Location{}, r.goneOr(err)
	}
	keep := false
	defer func() {
		if !keep {
			stat.Close()
		}
	}()
	start, err := readStartTime(stat)
	if err != nil {
		r.drop(pid)
		return Location{}, r.goneOr(err)
	}
	if c, ok := r.cache[pid]; ok && c.startTime == start {
		return c.loc, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		r.drop(pid)
		return Location{}, r.goneOr(err)
	}
	loc, err := Parse(string(data))
	if err != nil {
		return Location{}, fmt.Errorf("%s: %w", filepath.Join(dir, "cgroup"), err)
	}
	// A process never leaves its pod, container or job; caching host
	// processes too spares re-reading them every scrape.
	r.drop(pid)
	c := cached{startTime: start, loc: loc}
	if !r.closed && r.kept < maxKeptFiles && onProcFS(stat) {
		c.stat, keep = stat, true
		r.kept++
	}
	r.cache[pid] = c
	return loc, nil
}

// stillRunning reads the first bytes of a kept stat file: they are there for as
// long as the process has not exited (a zombie still answers, as by path).
func (r *Resolver) stillRunning(stat *os.File) bool {
	n, err := stat.ReadAt(r.probe[:], 0)
	return n > 0 && (err == nil || errors.Is(err, io.EOF))
}

// drop forgets a PID, closing its descriptor. Called with mu held.
func (r *Resolver) drop(pid uint32) {
	c, ok := r.cache[pid]
	if !ok {
		return
	}
	if c.stat != nil {
		c.stat.Close()
		r.kept--
	}
	delete(r.cache, pid)
}

// Forget drops every cached PID not in alive (called once per scrape with the
// PIDs seen on GPUs), so the cache cannot grow without bound.
func (r *Resolver) Forget(alive map[uint32]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.showsInit = 0
	for pid := range r.cache {
		if !alive[pid] {
			r.drop(pid)
		}
	}
}

// Close releases every kept descriptor; later lookups read by path and keep none.
func (r *Resolver) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.cache {
		r.drop(pid)
	}
	r.closed = true
}

// onProcFS says whether f is on the kernel's proc filesystem, whose stat files
// fail with ESRCH once their process has exited.
func onProcFS(f *os.File) bool {
	conn, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var st unix.Statfs_t
	var statErr error
	if err := conn.Control(func(fd uintptr) { statErr = unix.Fstatfs(int(fd), &st) }); err != nil || statErr != nil {
		return false
	}
	return st.Type == unix.PROC_SUPER_MAGIC
}

// readStartTime reads field 22 of an open stat file: the process's start time
// in clock ticks since boot. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func readStartTime(stat *os.File) (uint64, error) {
	data, err := io.ReadAll(stat)
	if err != nil {
		return 0, err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name", stat.Name())
	}
	fields := strings.Fields(s[i+1:])
	const startTimeField = 22 - 3 // fields after the name start at field 3
	if len(fields) <= startTimeField {
		return 0, fmt.Errorf("%s: %d fields, want at least 22", stat.Name(), len(fields)+2)
	}
	start, err := strconv.ParseUint(fields[startTimeField], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: start time: %w", stat.Name(), err)
	}
	return start, nil
}

// goneOr tells "the process exited" from "its cgroup cannot be read". ESRCH: it exited
// while its files were read. ENOENT: its /proc entry is gone — it exited — if the proc
// root shows PID 1; a proc root that does not (hidepid=invisible for this user, a
// missing or foreign mount) hides every other process too, and ENOENT says nothing.
// Other errors (EACCES, EPERM) are returned as they are. Called with mu held.
func (r *Resolver) goneOr(err error) error {
	switch {
	case errors.Is(err, syscall.ESRCH):
		return ErrProcessGone
	case errors.Is(err, fs.ErrNotExist):
		if r.showsInit == 0 {
			r.showsInit = -1
			if _, statErr := os.Stat(filepath.Join(r.procRoot, "1")); statErr == nil {
				r.showsInit = 1
			}
		}
		if r.showsInit < 0 {
			return ErrProcessHidden
		}
		return ErrProcessGone
	}
	return err
}
