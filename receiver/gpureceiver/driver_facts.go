package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pidns"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// driverFacts is what the driver release, and where the agent runs, mean for reading the
// GPUs (the facts themselves: nvmlclient/driver.go).
type driverFacts struct {
	version string
	// processListUnsafe: go-nvml cannot read this release's process list, and the
	// library would write past its buffer, so the list is never asked for.
	processListUnsafe bool
	// hiddenProcessesCause names the likely reason if NVML lists no process on a GPU
	// whose memory is in use.
	hiddenProcessesCause string
}

// learnDriver works out the driver facts once per driver version, logging what the
// operator must know.
func (s *gpuScraper) learnDriver(version string) {
	if version == s.driverFacts.version && version != "" {
		return
	}
	facts := driverFacts{version: version}
	v, err := nvmlclient.ParseDriverVersion(version)
	if err != nil {
		s.logger.Warn("Cannot read the NVIDIA driver version; per-process metrics are read as on a current driver", zap.Error(err))
	}
	if err == nil && v.ProcessListBroken() {
		facts.processListUnsafe = true
		s.logger.Warn("Per-process metrics are off: NVIDIA drivers 535.43.02 to 535.98 return a process list that go-nvml reads wrongly "+
			"(shuffled PIDs and memory, and a write past its buffer; go-nvml#75). Upgrade the driver to 535.104.05 or later",
			zap.String("driver_version", version))
	}
	facts.hiddenProcessesCause = s.hiddenProcessesCause(v, err == nil)
	s.driverFacts = facts
}

// hiddenProcessesCause says why a driver may list no process while a GPU is busy.
func (s *gpuScraper) hiddenProcessesCause(v nvmlclient.DriverVersion, known bool) string {
	inHost, err := s.inHostPIDNamespace()
	switch {
	case err != nil:
		return "the driver lists only the processes of the agent's PID namespace (535.113 and later), and the agent's namespace cannot be read: " + err.Error()
	case !inHost && (!known || v.FiltersProcessesByPIDNamespace()):
		return "the agent runs in a PID namespace of its own, and this driver lists only the processes of the caller's PID namespace (535.113 and later): run the agent with hostPID: true, as the shipped DaemonSet does"
	}
	return "the processes run where the agent cannot see them (another host PID namespace or a virtual machine), or they ended a moment ago"
}

// pidNamespaceOf tells where the agent runs: for a simulated GPU told to be in a namespace
// of its own or the host's, that; otherwise as this process really runs.
func pidNamespaceOf(cfg *Config) func() (bool, error) {
	if cfg.Backend == BackendSimulated {
		switch cfg.Simulated.PIDNamespace {
		case pidNamespaceHost:
			return func() (bool, error) { return true, nil }
		case pidNamespaceContainer:
			return func() (bool, error) { return false, nil }
		}
	}
	return func() (bool, error) { return pidns.InHost(nil, "/proc") }
}
