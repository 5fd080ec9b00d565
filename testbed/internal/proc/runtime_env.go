package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shippedRuntimeVars are the Go runtime's settings the shipped agent runs with: the
// systemd unit's environment file, the DaemonSets and the Helm chart set the same
// (deploy/test holds each to one scheduler thread and GOGC=200).
var shippedRuntimeVars = []string{"GOMAXPROCS", "GOMEMLIMIT", "GOGC"}

// ShippedRuntimeEnv is the Go runtime's environment of the shipped agent
// ("GOMAXPROCS=1", …), read from deploy/systemd/otelcol-gpu.env.example, so that what the
// testbed measures runs as users run it.
func ShippedRuntimeEnv(t testing.TB) []string {
	t.Helper()
	path := filepath.Join(RepoRoot(), "deploy", "systemd", "otelcol-gpu.env.example")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the shipped agent's environment: %v", err)
	}
	values := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			values[k] = v
		}
	}
	var env []string
	for _, k := range shippedRuntimeVars {
		v, ok := values[k]
		if !ok {
			t.Fatalf("%s does not set %s", path, k)
		}
		env = append(env, k+"="+v)
	}
	return env
}
