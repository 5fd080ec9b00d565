// Package confinement keeps the node agent from signalling or tracing any process but
// itself. The agent must run in the host's PID namespace (since driver 535.113 NVML lists
// only the processes of the caller's namespace), as UID 0 without capabilities; there the
// kernel would still let it kill(2) every other UID-0 process of the host (its check is a
// UID match), and ptrace or read the memory of those that hold no capabilities. Apply
// installs a seccomp filter on every thread of the process that answers EPERM to those
// calls when they aim at another process, and leaves everything else to the container's
// own profile.
package confinement // import "github.com/otelcol-gpu/otelcol-gpu/internal/confinement"

import (
	"fmt"
	"strings"
)

// EnvVar turns the confinement off ("off") or on ("on", the default when unset).
const EnvVar = "OTELCOL_GPU_CONFINEMENT"

// Enabled reads EnvVar's value: empty or "on" is true, "off" is false, anything else an
// error that names the variable.
func Enabled(value string) (bool, error) {
	switch strings.TrimSpace(value) {
	case "", "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("%s=%q: must be \"on\" (the default) or \"off\"", EnvVar, value)
}
