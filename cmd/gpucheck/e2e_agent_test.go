//go:build e2e

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The built node agent (make build; AGENT_BIN to use another) in gpucheck's hands, its gpu
// receiver on the simulated DGX H100 of the `mig` scenario, against the stand-in
// nvidia-smi: the configuration gpucheck writes loads in the real binary, its otlp_http
// exporter reaches gpucheck (protobuf), and every field agrees.
func TestEndToEndBuiltAgent(t *testing.T) {
	agent := os.Getenv("AGENT_BIN")
	if agent == "" {
		agent = filepath.Join("..", "..", "distribution", "agent", "otelcol-gpu-agent")
	}
	require.FileExists(t, agent, "run make build first")
	_, smi := standIns(t, "dgxh100/mig/1")
	out := filepath.Join(t.TempDir(), "report")
	code, rep := runGPUCheck(t, agent, smi, out, "-duration", "10s")
	for _, c := range rep.Checks {
		if c.Status == statusFail {
			t.Errorf("%s %s %s: nvidia-smi %s, agent %s (%s) %s", c.GPU, c.Subject, c.Field, c.SMI, c.Agent, c.Tolerance, c.Note)
		}
	}
	if code != 0 {
		log, _ := os.ReadFile(filepath.Join(out, "agent.log"))
		t.Fatalf("gpucheck exited %d, problems %v; agent.log:\n%s", code, rep.Problems, log)
	}
	assert.True(t, rep.Pass)
	assert.GreaterOrEqual(t, rep.Passed, 250)
}
