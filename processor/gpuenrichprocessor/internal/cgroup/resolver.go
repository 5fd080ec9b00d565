package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// Resolver looks PIDs up under a proc root and caches the answers per PID.
// It is safe for concurrent use.
type Resolver struct {
	procRoot string

	mu    sync.Mutex
	cache map[uint32]result
}

// result is a cached Parse outcome: a container, or ErrNotAContainer.
type result struct {
	c   Container
	err error
}

// NewResolver returns a Resolver reading <procRoot>/<pid>/cgroup, e.g. with
// procRoot "/host/proc" when the host's /proc is mounted there.
func NewResolver(procRoot string) *Resolver {
	return &Resolver{procRoot: procRoot, cache: make(map[uint32]result)}
}

// Lookup returns the container of a host PID, from the cache if the PID was
// looked up before and is still alive. A PID whose /proc entry vanishes
// (ENOENT, or ESRCH mid-read) yields ErrProcessGone and is dropped from the
// cache. Other read errors (e.g. EACCES with hidepid) are returned as is and
// not cached, so they are retried.
func (r *Resolver) Lookup(pid uint32) (Container, error) {
	dir := filepath.Join(r.procRoot, strconv.FormatUint(uint64(pid), 10))

	// Held across the reads: there are only a handful of GPU processes, and
	// it keeps two concurrent lookups of one PID from both reading.
	r.mu.Lock()
	defer r.mu.Unlock()

	if res, ok := r.cache[pid]; ok {
		// A stat is cheaper than re-reading and parsing, and still keeps an
		// exited process from being reported.
		if _, err := os.Stat(dir); err != nil {
			if isGone(err) {
				delete(r.cache, pid)
				return Container{}, ErrProcessGone
			}
			return Container{}, err
		}
		return res.c, res.err
	}

	data, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil {
		if isGone(err) {
			return Container{}, ErrProcessGone
		}
		return Container{}, err
	}
	c, err := Parse(string(data))
	// Both answers are stable for the life of the process; caching
	// ErrNotAContainer too spares re-reading host processes every scrape.
	r.cache[pid] = result{c: c, err: err}
	return c, err
}

// Forget drops every cached PID not in alive (called once per scrape with the
// PIDs seen on GPUs), so the cache cannot grow without bound and a recycled
// PID is looked up again.
func (r *Resolver) Forget(alive map[uint32]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for pid := range r.cache {
		if !alive[pid] {
			delete(r.cache, pid)
		}
	}
}

// isGone reports whether err means the process no longer exists: its /proc
// directory is gone (ENOENT), or it exited while the file was read (ESRCH).
func isGone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}
