package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// Backends the receiver can read GPUs from.
const (
	// BackendNVML reads real GPUs through the driver's libnvidia-ml.so.1.
	BackendNVML = "nvml"
	// BackendSimulated reads deterministic simulated GPUs; no driver needed.
	BackendSimulated = "simulated"
)

// Config is the `gpu` receiver's configuration.
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`
	metadata.MetricsBuilderConfig  `mapstructure:",squash"`

	// Backend is where GPU data comes from: "nvml" (default) or "simulated".
	Backend string `mapstructure:"backend"`
	// NVML configures the nvml backend.
	NVML NVMLConfig `mapstructure:"nvml"`
	// Simulated configures the simulated backend.
	Simulated SimulatedConfig `mapstructure:"simulated"`
	// IncludeDevices limits the receiver to these GPUs, each given by NVML index ("0") or
	// UUID ("GPU-…"). Empty means every GPU.
	IncludeDevices []string `mapstructure:"include_devices"`
	// HostName is the host.name resource attribute. Defaults to the OS host name; in a
	// Kubernetes DaemonSet set it to the node name (the pod's host name is the pod's name).
	HostName string `mapstructure:"host_name"`
	// Profiling selects what nvidia.gpu.profiling.activity reports.
	Profiling ProfilingConfig `mapstructure:"profiling"`
	// Processes selects what nvidia.gpu.process.utilization reports.
	Processes ProcessesConfig `mapstructure:"processes"`
	// SteadySeriesInterval is how often a steady series (error counters, limits, link
	// state: gpuschema.IsSteady) whose value did not change is sent again; a changed
	// value is sent at once. At collection intervals of this or longer every collection
	// sends them; 0s sends them every collection whatever the interval. At most
	// gpuschema.SteadyResendMax (10s): gpu_enrich ends a steady series that long without a
	// point.
	SteadySeriesInterval time.Duration `mapstructure:"steady_series_interval"`
}

// ProfilingConfig selects the GPM activities reported, each one series per GPU (and per
// MIG instance).
type ProfilingConfig struct {
	// Activities are values of nvidia.gpu.profiling.metric: graphics_active, sm_active,
	// sm_occupancy, tensor_active, dram_active, fp64_active, fp32_active, fp16_active.
	Activities []string `mapstructure:"activities"`
}

// defaultActivities answer "is the GPU computing, on tensor cores, or waiting on memory"
// (dcgm-exporter's default profiling set minus graphics_active, which hw.gpu.utilization
// carries); the full overlay adds the rest.
var defaultActivities = []string{"sm_active", "tensor_active", "dram_active"}

// ProcessesConfig selects the engines whose per-process busy share is reported, each one
// series per process.
type ProcessesConfig struct {
	// Engines are values of nvidia.gpu.engine: sm, memory, encoder, decoder. An encoder or
	// decoder is reported only where the GPU's own hw.gpu.utilization has that engine.
	Engines []string `mapstructure:"engines"`
}

// defaultProcessEngines: the SM share is what tells a shared GPU's users apart, and what
// gpu_enrich splits a GPU's energy and utilization by; the full overlay adds the rest.
var defaultProcessEngines = []string{"sm"}

// NVMLConfig configures how the NVML library is loaded.
type NVMLConfig struct {
	// LibraryPath is an absolute path to libnvidia-ml.so.1. Empty means the dynamic
	// linker's search path (what the NVIDIA container toolkit sets up).
	LibraryPath string `mapstructure:"library_path"`
	// InitRetry is the back-off between failed NVML initialisations.
	InitRetry InitRetryConfig `mapstructure:"init_retry"`
}

// InitRetryConfig is an exponential back-off: InitialInterval, doubling up to MaxInterval.
type InitRetryConfig struct {
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	MaxInterval     time.Duration `mapstructure:"max_interval"`
}

// PID namespaces a simulated agent can be told it runs in.
const (
	pidNamespaceAuto      = "auto"
	pidNamespaceHost      = gpusim.PIDNamespaceHost
	pidNamespaceContainer = gpusim.PIDNamespaceContainer
)

// SimulatedConfig selects the simulated machine.
type SimulatedConfig struct {
	// System is one of dgxa100, dgxh100, dgxh200, dgxb200 (eight GPUs each), l4 (four L4s)
	// or vgpu-h100 (one H100 vGPU in a virtual machine).
	System string `mapstructure:"system"`
	// DriverVersion is the NVIDIA driver release the simulated GPUs answer as, e.g.
	// "535.104.05": which calls and fields exist and how processes are listed follow it.
	// Empty: the system's default (580.95.05 on the DGX systems, 550.127.05 on the others).
	DriverVersion string `mapstructure:"driver_version"`
	// PIDNamespace is where the simulated driver sees the agent: "host" (hostPID, a bare
	// host), "container" (a PID namespace of its own: from 535.113 on the driver lists no
	// other container's process), or "auto" (default): as this process really runs.
	PIDNamespace string `mapstructure:"pid_namespace"`
	// MIGMonitor is whether the agent holds NVIDIA's MIG monitor capability (what
	// NVIDIA_MIG_MONITOR_DEVICES=all gives a container); without it the MIG calls nvml.h
	// says "require privileged user" answer NO_PERMISSION. Default true.
	MIGMonitor bool `mapstructure:"mig_monitor"`
	// Scenario is what the GPUs do, e.g. steady-training, idle, memory-leak.
	Scenario string `mapstructure:"scenario"`
	// Seed makes runs reproducible: same seed, same values.
	Seed int64 `mapstructure:"seed"`
	// NVMLMissingFor makes the simulated library fail to initialise for this long after
	// start (a driver installed after the collector), to try the receiver's recovery.
	NVMLMissingFor time.Duration `mapstructure:"nvml_missing_for"`
}

// Validate reports every invalid field, each error naming its field. The embedded
// collection settings are validated by the collector itself.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.Timeout > 0 && cfg.CollectionInterval > 0 && cfg.Timeout > cfg.CollectionInterval {
		errs = append(errs, fmt.Errorf("timeout: %s must not exceed collection_interval (%s)", cfg.Timeout, cfg.CollectionInterval))
	}
	switch cfg.Backend {
	case BackendNVML:
		errs = append(errs, cfg.NVML.validate()...)
	case BackendSimulated:
		errs = append(errs, cfg.Simulated.validate()...)
	default:
		errs = append(errs, fmt.Errorf("backend: must be %q or %q, got %q", BackendNVML, BackendSimulated, cfg.Backend))
	}
	errs = append(errs, validateDeviceFilter(cfg.IncludeDevices)...)
	errs = append(errs, cfg.Profiling.validate()...)
	errs = append(errs, cfg.Processes.validate()...)
	if cfg.SteadySeriesInterval < 0 || cfg.SteadySeriesInterval > gpuschema.SteadyResendMax {
		errs = append(errs, fmt.Errorf("steady_series_interval: must be between 0s (every collection) and %s (gpu_enrich ends a steady series after %s without a point), got %s",
			gpuschema.SteadyResendMax, gpuschema.SteadyResendMax, cfg.SteadySeriesInterval))
	}
	return errors.Join(errs...)
}

func (c NVMLConfig) validate() []error {
	var errs []error
	if c.LibraryPath != "" && !filepath.IsAbs(c.LibraryPath) {
		errs = append(errs, fmt.Errorf("nvml.library_path: must be an absolute path, got %q", c.LibraryPath))
	}
	if c.InitRetry.InitialInterval <= 0 {
		errs = append(errs, fmt.Errorf("nvml.init_retry.initial_interval: must be positive, got %s", c.InitRetry.InitialInterval))
	}
	if c.InitRetry.MaxInterval < c.InitRetry.InitialInterval {
		errs = append(errs, fmt.Errorf("nvml.init_retry.max_interval: must be at least initial_interval (%s), got %s", c.InitRetry.InitialInterval, c.InitRetry.MaxInterval))
	}
	return errs
}

func (c SimulatedConfig) validate() []error {
	var errs []error
	if !slices.Contains(gpusim.Systems(), c.System) {
		errs = append(errs, fmt.Errorf("simulated.system: must be one of %s, got %q", strings.Join(gpusim.Systems(), ", "), c.System))
	}
	if c.NVMLMissingFor < 0 {
		errs = append(errs, fmt.Errorf("simulated.nvml_missing_for: must not be negative, got %s", c.NVMLMissingFor))
	}
	if !slices.Contains(gpusim.Scenarios(), c.Scenario) {
		errs = append(errs, fmt.Errorf("simulated.scenario: must be one of %s, got %q", strings.Join(gpusim.Scenarios(), ", "), c.Scenario))
	}
	if c.DriverVersion != "" {
		if _, err := nvmlclient.ParseDriverVersion(c.DriverVersion); err != nil {
			errs = append(errs, fmt.Errorf("simulated.driver_version: %w", err))
		}
	}
	switch c.PIDNamespace {
	case pidNamespaceAuto, pidNamespaceHost, pidNamespaceContainer:
	default:
		errs = append(errs, fmt.Errorf("simulated.pid_namespace: must be %q, %q or %q, got %q", pidNamespaceAuto, pidNamespaceHost, pidNamespaceContainer, c.PIDNamespace))
	}
	return errs
}

func (c ProfilingConfig) validate() []error {
	var errs []error
	seen := map[string]bool{}
	for i, a := range c.Activities {
		field := fmt.Sprintf("profiling.activities[%d]", i)
		if _, ok := metadata.MapAttributeNvidiaGpuProfilingMetric[a]; !ok {
			errs = append(errs, fmt.Errorf("%s: must be one of %s, got %q", field, strings.Join(profilingMetricNames(), ", "), a))
			continue
		}
		if seen[a] {
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", field, a))
		}
		seen[a] = true
	}
	return errs
}

func (c ProcessesConfig) validate() []error {
	var errs []error
	if len(c.Engines) == 0 {
		errs = append(errs, errors.New("processes.engines: must list at least one engine (turn nvidia.gpu.process.utilization off instead)"))
	}
	seen := map[string]bool{}
	for i, e := range c.Engines {
		field := fmt.Sprintf("processes.engines[%d]", i)
		if _, ok := metadata.MapAttributeNvidiaGpuEngine[e]; !ok {
			names := slices.Sorted(maps.Keys(metadata.MapAttributeNvidiaGpuEngine))
			errs = append(errs, fmt.Errorf("%s: must be one of %s, got %q", field, strings.Join(names, ", "), e))
			continue
		}
		if seen[e] {
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", field, e))
		}
		seen[e] = true
	}
	return errs
}

func profilingMetricNames() []string {
	names := make([]string, 0, len(metadata.MapAttributeNvidiaGpuProfilingMetric))
	for name := range metadata.MapAttributeNvidiaGpuProfilingMetric {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

func validateDeviceFilter(entries []string) []error {
	var errs []error
	seen := map[string]bool{}
	for i, e := range entries {
		field := fmt.Sprintf("include_devices[%d]", i)
		switch {
		case strings.HasPrefix(e, "GPU-") && len(e) > len("GPU-"):
		case isIndex(e):
		default:
			errs = append(errs, fmt.Errorf("%s: must be a GPU index (\"0\") or UUID (\"GPU-…\"), got %q", field, e))
			continue
		}
		if seen[e] {
			errs = append(errs, fmt.Errorf("%s: %q is listed twice", field, e))
		}
		seen[e] = true
	}
	return errs
}

func isIndex(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n >= 0 && strconv.Itoa(n) == s
}
