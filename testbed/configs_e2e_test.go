//go:build e2e

package testbed

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// agentConfigs are what the node agent's lean build (otelcol-gpu-agent) runs, the
// dcgm-exporter compatibility overlays included; every config validates on the full build
// too.
var agentConfigs = map[string]bool{
	"agent.yaml": true, "agent-to-gateway.yaml": true,
	"dcgm-compat.yaml": true, "dcgm-compat-scrape.yaml": true, "dcgm-compat-scrape-secure.yaml": true,
}

// TestShippedConfigsValidate runs `validate` on every config under configs/ (overlays
// merged over their base), on the full build and, for the agent's configs, on the agent's.
func TestShippedConfigsValidate(t *testing.T) {
	configs, err := filepath.Glob(filepath.Join(proc.RepoRoot(), "configs", "*.yaml"))
	if err != nil || len(configs) == 0 {
		t.Fatalf("no configs found: %v", err)
	}
	for _, cfg := range configs {
		t.Run(filepath.Base(cfg), func(t *testing.T) {
			binaries := []string{proc.CollectorBinary(t)}
			if agentConfigs[filepath.Base(cfg)] {
				binaries = append(binaries, proc.AgentBinary(t))
			}
			for _, bin := range binaries {
				if out, err := validate(bin, cfg); err != nil {
					t.Fatalf("%s does not validate on %s: %v\n%s", cfg, bin, err, out)
				}
			}
		})
	}
}

// TestDCGMGenerationIsChecked: every generation OTELCOL_GPU_DCGM_GENERATION documents
// loads on the agent's build, with the scrape overlays too; any other value is refused at
// start, naming the generation's processor that no file defines.
func TestDCGMGenerationIsChecked(t *testing.T) {
	for _, gen := range []string{"4.8", "4.8.3", "4.8.4", "4.9", "4.10"} {
		for _, cfg := range []string{"dcgm-compat.yaml", "dcgm-compat-scrape-secure.yaml"} {
			if out, err := validate(proc.AgentBinary(t), filepath.Join(proc.RepoRoot(), "configs", cfg), "OTELCOL_GPU_DCGM_GENERATION="+gen); err != nil {
				t.Errorf("generation %s, %s: %v\n%s", gen, cfg, err, out)
			}
		}
	}
	for _, gen := range []string{"4.11", "latest", "4.7"} {
		out, err := validate(proc.AgentBinary(t), filepath.Join(proc.RepoRoot(), "configs", "dcgm-compat.yaml"), "OTELCOL_GPU_DCGM_GENERATION="+gen)
		if err == nil {
			t.Errorf("generation %q accepted", gen)
			continue
		}
		if want := `"transform/dcgm_generation_` + gen + `" which is not configured`; !strings.Contains(string(out), want) {
			t.Errorf("generation %q: the error does not say %s:\n%s", gen, want, out)
		}
	}
}

// validate runs a build's `validate` on a config under configs/, merged over its base,
// with extra environment.
func validate(binary, cfg string, env ...string) ([]byte, error) {
	args := []string{"validate"}
	for _, base := range overlays[filepath.Base(cfg)] {
		args = append(args, "--config", filepath.Join(filepath.Dir(cfg), base))
	}
	args = append(args, "--config", cfg)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), "PROMETHEUS_REMOTE_WRITE_URL=http://127.0.0.1:9090/api/v1/write"), env...)
	return cmd.CombinedOutput()
}
