package proc

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// EvictFromPageCache drops a file's clean pages from the page cache (as after a node's
// boot, or memory pressure), so that a program started from it faults its pages in from
// disk. Pages a running program has mapped stay.
func EvictFromPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evicting %s from the page cache: %w", path, err)
	}
	return nil
}

// LoadIntoPageCache reads a whole file, so that all its pages are in the page cache as
// reads leave them (after a checksum or a copy from it). A file just written sits there
// differently (FreshCopy): TestAgentMemory measures both.
func LoadIntoPageCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}

// FreshCopy writes a copy of an executable into a temporary directory and returns its path:
// a file whose pages are all in the page cache as its writer left them, as right after an
// image pull or a package install wrote the binary.
func FreshCopy(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(cp, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return cp
}
