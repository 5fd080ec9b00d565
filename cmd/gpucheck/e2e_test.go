package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// standIns writes the scripts gpucheck runs as the agent and as nvidia-smi: this test
// binary in the role of each (fakes_test.go).
func standIns(t *testing.T, sim string, env ...string) (agent, smi string) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	agent, smi = filepath.Join(dir, "agent"), filepath.Join(dir, "nvidia-smi")
	extra := strings.Join(env, " ")
	start := filepath.Join(dir, "agent-started")
	require.NoError(t, os.WriteFile(agent, fmt.Appendf(nil, "#!/bin/sh\n%s=agent %s=%s exec %q \"$@\"\n", fakeRoleEnv, fakeStartFileEnv, start, exe), 0o755))
	require.NoError(t, os.WriteFile(smi, fmt.Appendf(nil, "#!/bin/sh\n%s=nvidia-smi %s=%s %s=%s %s exec %q \"$@\"\n", fakeRoleEnv, fakeSimEnv, sim, fakeStartFileEnv, start, extra, exe), 0o755))
	return agent, smi
}

type reportJSON struct {
	Pass     bool     `json:"pass"`
	Passed   int      `json:"passed"`
	Failed   int      `json:"failed"`
	Problems []string `json:"problems"`
	Samples  int      `json:"samples"`
	Exports  int      `json:"exports"`
	Checks   []*Check `json:"checks"`
}

func runGPUCheck(t *testing.T, agent, smi, out string, extra ...string) (int, reportJSON) {
	t.Helper()
	args := append([]string{"-agent", agent, "-nvidia-smi", smi, "-out", out, "-load", "none",
		"-interval", "1s", "-smi-interval", "2s",
		"-backend", "simulated", "-sim-system", "dgxh100", "-sim-scenario", "mig", "-sim-seed", "1"}, extra...)
	code := runMain(args, func(string) string { return "" })
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	var rep reportJSON
	require.NoError(t, json.Unmarshal(raw, &rep))
	return code, rep
}

// The whole flow without a GPU: the production gpu receiver on the simulated DGX H100 of
// the `mig` scenario (two GPUs split into MIG instances, a process on every GPU and
// instance) against nvidia-smi output printed from the same simulation. Every field
// agrees; the report lists each, with the MIG profiles and the processes compared.
func TestEndToEndAgainstSimulator(t *testing.T) {
	agent, smi := standIns(t, "dgxh100/mig/1")
	out := filepath.Join(t.TempDir(), "report")
	code, rep := runGPUCheck(t, agent, smi, out, "-duration", "9s")
	for _, c := range rep.Checks {
		if c.Status == statusFail {
			t.Errorf("%s %s %s: nvidia-smi %s, agent %s (%s) %s", c.GPU, c.Subject, c.Field, c.SMI, c.Agent, c.Tolerance, c.Note)
		}
	}
	require.Equal(t, 0, code, "problems: %v", rep.Problems)
	assert.True(t, rep.Pass)
	assert.GreaterOrEqual(t, rep.Samples, 3)
	assert.GreaterOrEqual(t, rep.Exports, 5)

	seen := map[string]int{}
	for _, c := range rep.Checks {
		if c.Status == statusPass {
			// By kind of subject: GPU, MIG (instance), process, host.
			seen[strings.Fields(c.Subject)[0]+"/"+c.Field]++
		}
	}
	// Eight GPUs, each field on each; the MIG instances of GPUs 0 (4) and 1 (7).
	for _, f := range []string{"GPU/present (UUID)", "GPU/model (product_name / hw.model)", "GPU/memory used + reserved", "GPU/power draw (power_draw)",
		"GPU/temperature (gpu_temp)", "GPU/SM clock (clocks/sm_clock)", "GPU/max SM clock (max_clocks/sm_clock)", "GPU/MIG mode (current_mig / nvidia.gpu.mig.enabled)",
		"GPU/process list (processes / process.pid)"} {
		assert.Equal(t, 8, seen[f], f)
	}
	assert.Equal(t, 2, seen["GPU/MIG instances (mig_devices)"])
	assert.Equal(t, 11, seen["MIG/profile (nvidia-smi mig -lgi / nvidia.mig.profile)"])
	assert.Equal(t, 11, seen["MIG/memory used + reserved"])
	assert.Equal(t, 17, seen["process/used memory"], "a process on each of the 6 whole GPUs and 11 instances")

	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	require.NoError(t, err)
	assert.Contains(t, string(md), "— PASS")
	xmls, _ := filepath.Glob(filepath.Join(out, "nvidia-smi", "*.xml"))
	assert.GreaterOrEqual(t, len(xmls), rep.Samples, "every nvidia-smi output is kept")
	assert.FileExists(t, filepath.Join(out, "agent-config.yaml"))
	assert.FileExists(t, filepath.Join(out, "nvidia-smi-mig-lgi.txt"))
}

// A disagreement found end to end: nvidia-smi showing every draw 200 W higher fails the
// power rows of all GPUs, and nothing else, and gpucheck exits 1.
func TestEndToEndReportsAMismatch(t *testing.T) {
	agent, smi := standIns(t, "dgxh100/mig/1", fakeSkewEnv+"=200")
	code, rep := runGPUCheck(t, agent, smi, filepath.Join(t.TempDir(), "report"), "-duration", "5s")
	assert.Equal(t, 1, code)
	assert.False(t, rep.Pass)
	failed := map[string]int{}
	for _, c := range rep.Checks {
		if c.Status == statusFail {
			failed[c.Field]++
		}
	}
	assert.Equal(t, map[string]int{"power draw (power_draw)": 8}, failed)
}

// A run that cannot start says so and exits 2: here the agent binary is missing.
func TestEndToEndMissingAgent(t *testing.T) {
	_, smi := standIns(t, "dgxh100/mig/1")
	code, rep := runGPUCheck(t, filepath.Join(t.TempDir(), "no-agent"), smi, filepath.Join(t.TempDir(), "report"), "-duration", "2s")
	assert.Equal(t, 2, code)
	require.NotEmpty(t, rep.Problems)
	assert.Contains(t, rep.Problems[0], "agent binary")
	assert.Contains(t, rep.Problems[0], "AGENT_BIN")
}
