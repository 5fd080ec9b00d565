package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scripts/test-gpu.sh passes its settings through the environment; flags win over it.
func TestOptionsFromEnvironmentAndFlags(t *testing.T) {
	env := map[string]string{"AGENT_BIN": "/opt/agent", "NVIDIA_SMI": "/usr/bin/nvidia-smi", "DURATION": "90s", "GPUCHECK_OUT": "/tmp/r", "GPUCHECK_LOAD": "none"}
	o, err := parseOptions(nil, func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, "/opt/agent", o.Agent)
	assert.Equal(t, "/usr/bin/nvidia-smi", o.NvidiaSMI)
	assert.Equal(t, 90*time.Second, o.Duration)
	assert.Equal(t, "/tmp/r", o.Out)
	assert.Equal(t, "none", o.Load)
	assert.Equal(t, "nvml", o.Receiver.Backend)

	o, err = parseOptions([]string{"-duration", "30s", "-agent", "./a"}, func(k string) string { return env[k] })
	require.NoError(t, err)
	assert.Equal(t, 30*time.Second, o.Duration)
	assert.Equal(t, "./a", o.Agent)

	o, err = parseOptions(nil, func(string) string { return "" })
	require.NoError(t, err)
	assert.Equal(t, "distribution/agent/otelcol-gpu-agent", o.Agent)
	assert.Equal(t, 2*time.Minute, o.Duration)
	assert.Equal(t, "auto", o.Load)
}

func TestOptionsRejected(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "soon"},
		{"-duration", "0s"},
		{"-duration", "5s", "-smi-interval", "10s"},
		{"-interval", "0s"},
	} {
		_, err := parseOptions(args, func(string) string { return "" })
		assert.Error(t, err, "%v", args)
	}
}
