//go:build e2e

package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
)

// overlays are configs meant to be merged over others (later --config flags), with the
// configs they go over, in order.
var overlays = map[string][]string{
	"dcgm-compat.yaml":               {"agent.yaml"},
	"dcgm-compat-scrape.yaml":        {"agent.yaml", "dcgm-compat.yaml"},
	"dcgm-compat-scrape-secure.yaml": {"agent.yaml", "dcgm-compat.yaml", "dcgm-compat-scrape.yaml"},
}

// TestShippedConfigsValidate runs `otelcol-gpu validate` on every config under configs/
// (overlays merged over their base).
func TestShippedConfigsValidate(t *testing.T) {
	configs, err := filepath.Glob(filepath.Join(proc.RepoRoot(), "configs", "*.yaml"))
	if err != nil || len(configs) == 0 {
		t.Fatalf("no configs found: %v", err)
	}
	for _, cfg := range configs {
		t.Run(filepath.Base(cfg), func(t *testing.T) {
			args := []string{"validate"}
			for _, base := range overlays[filepath.Base(cfg)] {
				args = append(args, "--config", filepath.Join(filepath.Dir(cfg), base))
			}
			args = append(args, "--config", cfg)
			cmd := exec.Command(proc.CollectorBinary(t), args...)
			cmd.Env = append(os.Environ(), "PROMETHEUS_REMOTE_WRITE_URL=http://127.0.0.1:9090/api/v1/write")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s does not validate: %v\n%s", cfg, err, out)
			}
		})
	}
}
