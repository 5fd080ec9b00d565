// Package gentest checks files that a generator in this repository writes (dashboards,
// rule files) against the committed ones: a stale or hand-edited file fails the test that
// calls it. Test helper; never linked into the collector.
package gentest // import "github.com/otelcol-gpu/otelcol-gpu/internal/gentest"

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Committed fails t when the files matching pattern in dir are not exactly what render
// writes (no more, no fewer, byte for byte), or when render is not deterministic. fix is
// the command that regenerates them, for the failure message.
func Committed(t *testing.T, dir, pattern string, render func() (map[string][]byte, error), fix string) {
	t.Helper()
	want, err := render()
	if err != nil {
		t.Fatal(err)
	}
	paths, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	var have []string
	for _, p := range paths {
		have = append(have, filepath.Base(p))
	}
	slices.Sort(have)
	if names := slices.Sorted(maps.Keys(want)); !slices.Equal(names, have) {
		t.Errorf("%s: committed %v, the generator writes %v; run %s", dir, have, names, fix)
	}
	for name, data := range want {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err == nil && !bytes.Equal(got, data) {
			t.Errorf("%s differs from what the generator writes (stale, or edited by hand); run %s", filepath.Join(dir, name), fix)
		}
	}
	again, err := render()
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range want {
		if !bytes.Equal(again[name], data) {
			t.Errorf("%s: rendering is not deterministic", name)
		}
	}
}
