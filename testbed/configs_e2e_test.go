//go:build e2e

package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// TestShippedConfigsValidate runs `otelcol-gpu validate` on every config under configs/.
func TestShippedConfigsValidate(t *testing.T) {
	configs, err := filepath.Glob(filepath.Join(proc.RepoRoot(), "configs", "*.yaml"))
	if err != nil || len(configs) == 0 {
		t.Fatalf("no configs found: %v", err)
	}
	for _, cfg := range configs {
		t.Run(filepath.Base(cfg), func(t *testing.T) {
			cmd := exec.Command(proc.CollectorBinary(t), "validate", "--config", cfg)
			cmd.Env = append(os.Environ(), "PROMETHEUS_REMOTE_WRITE_URL=http://127.0.0.1:9090/api/v1/write")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s does not validate: %v\n%s", cfg, err, out)
			}
		})
	}
}
