package main

import (
	"path/filepath"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gentest"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor/internal/contractnames"
)

// The committed file is byte for byte what this generator writes from today's contract.
func TestCommittedFileIsGenerated(t *testing.T) {
	root := filepath.Join("..", "..", "..", "..", "..")
	gentest.Committed(t, "..", contractnames.FileName, func() (map[string][]byte, error) {
		return render(root)
	}, "make generate")
}
