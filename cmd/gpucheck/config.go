package main

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// receiverSettings is what gpucheck asks of the gpu receiver.
type receiverSettings struct {
	// Backend is nvml on a node; simulated (with System, Scenario, Seed) lets the tests run
	// the whole flow without a GPU.
	Backend  string
	System   string
	Scenario string
	Seed     int64
	Interval time.Duration
}

// comparedMetrics are the receiver's metrics the comparison reads, all switched on
// whatever the defaults are (reserved memory and the maximum clocks are opt-in).
var comparedMetrics = []string{
	"hw.gpu.memory.usage",
	"hw.gpu.memory.limit",
	"nvidia.gpu.memory.reserved",
	"hw.power",
	"nvidia.gpu.power.limit",
	"hw.temperature",
	"nvidia.gpu.clock.frequency",
	"nvidia.gpu.clock.frequency.max",
	"nvidia.gpu.process.memory.usage",
	"nvidia.gpu.count",
}

// comparedResourceAttributes identify GPUs, MIG instances and processes;
// nvidia.gpu.mig.enabled is opt-in.
var comparedResourceAttributes = []string{
	"hw.id", "hw.model", "hw.parent", "hw.driver_version",
	"nvidia.gpu.index", "nvidia.gpu.minor_number", "nvidia.gpu.pci_bus_id", "nvidia.gpu.mig.enabled",
	"nvidia.mig.uuid", "nvidia.mig.gpu_instance_id", "nvidia.mig.compute_instance_id", "nvidia.mig.profile",
	"process.pid", "process.executable.name", "nvidia.gpu.process.type",
}

// agentConfig is the collector configuration gpucheck runs the agent with: the gpu
// receiver straight into an otlp_http exporter pointed at gpucheck (no processors: the
// comparison is of what the receiver read), and no self-telemetry endpoint, which could
// collide with an agent already running on the node.
func agentConfig(rs receiverSettings, endpoint string) ([]byte, error) {
	metrics := map[string]any{}
	for _, m := range comparedMetrics {
		metrics[m] = map[string]any{"enabled": true}
	}
	attrs := map[string]any{}
	for _, a := range comparedResourceAttributes {
		attrs[a] = map[string]any{"enabled": true}
	}
	gpu := map[string]any{
		"backend":             rs.Backend,
		"collection_interval": rs.Interval.String(),
		"initial_delay":       "0s",
		// Every collection sends every series, so that each nvidia-smi sample has a
		// collection of every value near it.
		"steady_series_interval": "0s",
		"metrics":                metrics,
		"resource_attributes":    attrs,
	}
	if rs.Backend == "simulated" {
		gpu["simulated"] = map[string]any{"system": rs.System, "scenario": rs.Scenario, "seed": rs.Seed}
	}
	cfg := map[string]any{
		"receivers": map[string]any{"gpu": gpu},
		"exporters": map[string]any{
			"otlp_http": map[string]any{
				"endpoint":    endpoint,
				"encoding":    "proto",
				"compression": "none",
			},
		},
		"service": map[string]any{
			"telemetry": map[string]any{"metrics": map[string]any{"level": "none"}},
			"pipelines": map[string]any{
				"metrics": map[string]any{"receivers": []string{"gpu"}, "exporters": []string{"otlp_http"}},
			},
		},
	}
	return yaml.Marshal(cfg)
}
