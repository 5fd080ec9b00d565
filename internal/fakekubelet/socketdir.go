package fakekubelet

import (
	"os"
	"testing"
)

// SocketDir is a temporary directory for a unix socket, removed when the test ends. It
// sits directly under the system's temporary directory because a socket's path is limited
// to about 108 bytes, which t.TempDir's long names soon exceed.
func SocketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
