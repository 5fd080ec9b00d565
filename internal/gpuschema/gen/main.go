// Command gen writes internal/gpuschema's constants from the gpu receiver's metadata.yaml.
package main

import (
	"os"
	"path/filepath"

	"github.com/otelcol-gpu/otelcol-gpu/internal/genfiles"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
)

func main() {
	genfiles.Main("internal/gpuschema", func() (map[string][]byte, error) {
		raw, err := os.ReadFile(filepath.FromSlash(gpuschema.Source))
		if err != nil {
			return nil, err
		}
		src, err := gpuschema.Render(raw)
		return map[string][]byte{gpuschema.FileName: src}, err
	})
}
