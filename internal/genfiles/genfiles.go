// Package genfiles is the command side of this repository's file generators (dashboards,
// rule files): render, then write into the directory given by -out. internal/gentest is
// the test side.
package genfiles // import "github.com/otelcol-gpu/otelcol-gpu/internal/genfiles"

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

// Main runs a generator command: it writes what render returns (file name to content)
// into -out, dir by default, and exits 1 with the error if that fails.
func Main(dir string, render func() (map[string][]byte, error)) {
	out := flag.String("out", dir, "directory to write the generated files into")
	flag.Parse()
	files, err := render()
	if err == nil {
		err = Write(*out, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// Write writes files (name to content) into dir.
func Write(dir string, files map[string][]byte) error {
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
