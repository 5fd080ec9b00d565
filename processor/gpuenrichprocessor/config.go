package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/kube"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
)

// Config is the gpu_enrich processor's configuration.
type Config struct {
	metadata.MetricsBuilderConfig `mapstructure:",squash"`

	// Kubelet attributes GPUs and MIG instances to pods through the kubelet pod-resources API.
	Kubelet KubeletConfig `mapstructure:"kubelet"`
	// Processes attributes GPU processes to pods through their cgroups.
	Processes ProcessesConfig `mapstructure:"processes"`
	// KubeAPI reads this node's pods and DRA ResourceSlices from the Kubernetes API.
	KubeAPI KubeAPIConfig `mapstructure:"kube_api"`
	// Idle configures idle-while-allocated.
	Idle IdleConfig `mapstructure:"idle"`
	// Leak configures the memory-growth trend and leak suspicion.
	Leak LeakConfig `mapstructure:"leak"`
	// Bottleneck configures the bottleneck class.
	Bottleneck BottleneckConfig `mapstructure:"bottleneck"`
	// Throttle configures the throttle flags.
	Throttle ThrottleConfig `mapstructure:"throttle"`
	// EndSeries ends every series whose subject is gone (GPU lost, process exited, pod
	// ended, MIG instance destroyed) with a no-recorded-value point, which remote-write
	// turns into a Prometheus stale marker, instead of leaving its last value in queries
	// for Prometheus's 5-minute lookback.
	EndSeries bool `mapstructure:"end_series"`
	// Descriptions keeps every metric's description. Prometheus 3 shows none that came by
	// OTLP (its metadata API holds only what it scraped) and remote-write sends none, yet
	// they are two fifths of an OTLP request's bytes: the Prometheus OTLP overlay turns
	// them off.
	Descriptions bool `mapstructure:"descriptions"`
	// SteadySeriesInterval is how often an unchanged flag (throttled, idle-while-allocated,
	// leak-suspected) is sent again when the GPU is collected more often; a changed one is
	// sent at once. At most gpuschema.SteadyResendMax (10 s), after which the end-of-series
	// tracker ends a series without a point; 0 sends every collection. The gpu receiver's
	// setting of the same name does the same for its error counters, limits and link state.
	SteadySeriesInterval time.Duration `mapstructure:"steady_series_interval"`
}

// KubeletConfig is the pod-resources client's configuration.
type KubeletConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// Endpoint is the pod-resources socket: unix:///var/lib/kubelet/pod-resources/kubelet.sock.
	Endpoint string `mapstructure:"endpoint"`
	// RefreshInterval is how often the snapshot is refreshed in the background.
	RefreshInterval time.Duration `mapstructure:"refresh_interval"`
	// Timeout bounds each call to the kubelet.
	Timeout time.Duration `mapstructure:"timeout"`
	// ResourceNames are the extended resources that carry GPUs; a trailing * matches a prefix.
	ResourceNames []string `mapstructure:"resource_names"`
	// DRADrivers are the Dynamic Resource Allocation drivers whose devices are GPUs or MIG
	// devices (pod-resources dynamic_resources).
	DRADrivers []string `mapstructure:"dra_drivers"`
}

// ProcessesConfig is the PID → pod attribution's configuration.
type ProcessesConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// ProcRoot is where the host's /proc is mounted (NVML reports host PIDs).
	ProcRoot string `mapstructure:"proc_root"`
	// PodLogsDir is the kubelet's pod log directory (/var/log/pods), read to name the pods
	// whose UIDs the cgroups give. Empty: processes get k8s.pod.uid and container.id only
	// (k8s_attributes can add the names).
	PodLogsDir string `mapstructure:"pod_logs_dir"`
	// KeepPID keeps one series per process, labelled with its PID. Off (the default),
	// processes of one GPU with the same owner, executable and type share one series,
	// so workers that come and go (Ray, dataloaders) add no new series.
	KeepPID bool `mapstructure:"keep_pid"`
	// MaxPerGPU bounds the process series per GPU (or MIG instance) and scrape: the
	// largest by memory keep theirs, the rest are summed into one "(other)" series and
	// counted in nvidia.gpu.processes.folded. 0: no bound.
	MaxPerGPU int `mapstructure:"max_per_gpu"`
	// MaxExecutableNameLength cuts process.executable.name (after replacing unprintable
	// characters) to this many characters.
	MaxExecutableNameLength int `mapstructure:"max_executable_name_length"`
	// MaxExecutableNamesPerGPU bounds the executable names with series of their own per
	// GPU (or MIG instance) within ExecutableNamesWindow; further names are written
	// "(other)", their owner kept, and counted in nvidia.gpu.processes.folded. 0: no bound.
	MaxExecutableNamesPerGPU int `mapstructure:"max_executable_names_per_gpu"`
	// ExecutableNamesWindow is how long a name holds its place after it was last seen.
	ExecutableNamesWindow time.Duration `mapstructure:"executable_names_window"`
}

// KubeAPIConfig: what the kubelet's pod-resources answer cannot say — whether a listed pod
// finished (older kubelets keep listing them), which container a container ID is, a static
// pod's mirror, and the DRA drivers' ResourceSlices (device → GPU UUID) — comes from the
// Kubernetes API, watching only this node's pods and slices.
type KubeAPIConfig struct {
	Enabled bool `mapstructure:"enabled"`
	// AuthType is serviceAccount (in a pod) or kubeConfig.
	AuthType string `mapstructure:"auth_type"`
	// KubeConfig is the kubeconfig file for auth_type kubeConfig ("" = $KUBECONFIG or
	// ~/.kube/config).
	KubeConfig string `mapstructure:"kubeconfig"`
	// NodeName is this node's name (the DaemonSet sets K8S_NODE_NAME from spec.nodeName).
	NodeName string `mapstructure:"node_name"`
}

func (c KubeAPIConfig) kube() kube.Config {
	return kube.Config{AuthType: c.AuthType, KubeConfig: c.KubeConfig, NodeName: c.NodeName}
}

// IdleConfig: a GPU allocated to a pod whose utilization stays under Threshold for Window
// is idle-while-allocated.
type IdleConfig struct {
	Threshold float64       `mapstructure:"threshold"`
	Window    time.Duration `mapstructure:"window"`
}

// LeakConfig: framebuffer use growing persistently by at least MinGrowth of the total over
// Window while utilization moves less than UtilizationTolerance is a suspected leak.
type LeakConfig struct {
	Window               time.Duration `mapstructure:"window"`
	MinGrowth            float64       `mapstructure:"min_growth"`
	UtilizationTolerance float64       `mapstructure:"utilization_tolerance"`
}

// ThrottleConfig: nvidia.gpu.throttled{cause} is derived from the receiver's eight
// clock-event reasons, which then go (three series per GPU instead of eight), unless
// KeepClockEvents (the full overlay sets it). Kept, they go on as the receiver sends them:
// below a 10 s collection interval, on change and every 10 s, as its other steady series.
type ThrottleConfig struct {
	KeepClockEvents bool `mapstructure:"keep_clock_events"`
}

// BottleneckConfig: SM or DRAM activity at or above Saturation counts as saturated.
type BottleneckConfig struct {
	Saturation float64 `mapstructure:"saturation"`
}

// Validate reports every invalid field, each error naming its field.
func (cfg *Config) Validate() error {
	var errs []error
	ratio := func(field string, v float64, allowZero bool) {
		if v < 0 || v > 1 || (!allowZero && v == 0) {
			errs = append(errs, fmt.Errorf("%s: must be a ratio in (0, 1], got %v", field, v))
		}
	}
	positive := func(field string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive, got %s", field, d))
		}
	}
	if cfg.Kubelet.Enabled {
		ep := cfg.Kubelet.Endpoint
		if path := strings.TrimPrefix(ep, "unix://"); ep == "" || !filepath.IsAbs(path) {
			errs = append(errs, fmt.Errorf("kubelet.endpoint: must be unix:///absolute/path or an absolute path, got %q", ep))
		}
		positive("kubelet.refresh_interval", cfg.Kubelet.RefreshInterval)
		positive("kubelet.timeout", cfg.Kubelet.Timeout)
		if len(cfg.Kubelet.ResourceNames) == 0 {
			errs = append(errs, errors.New("kubelet.resource_names: must list at least one resource name"))
		}
		for i, n := range cfg.Kubelet.ResourceNames {
			if n == "" || strings.Count(n, "*") > 1 || (strings.Contains(n, "*") && !strings.HasSuffix(n, "*")) {
				errs = append(errs, fmt.Errorf("kubelet.resource_names[%d]: %q is not a resource name (a single trailing * is allowed)", i, n))
			}
		}
	}
	for i, d := range cfg.Kubelet.DRADrivers {
		if d == "" || strings.ContainsAny(d, " /*") {
			errs = append(errs, fmt.Errorf("kubelet.dra_drivers[%d]: %q is not a DRA driver name (a DNS subdomain such as gpu.nvidia.com)", i, d))
		}
	}
	if cfg.Processes.Enabled && !filepath.IsAbs(cfg.Processes.ProcRoot) {
		errs = append(errs, fmt.Errorf("processes.proc_root: must be an absolute path, got %q", cfg.Processes.ProcRoot))
	}
	if cfg.KubeAPI.Enabled {
		if err := cfg.KubeAPI.kube().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("kube_api.%w", err))
		}
	}
	if cfg.Processes.MaxPerGPU < 0 {
		errs = append(errs, fmt.Errorf("processes.max_per_gpu: must be 0 (no bound) or more, got %d", cfg.Processes.MaxPerGPU))
	}
	if cfg.Processes.MaxExecutableNamesPerGPU < 0 {
		errs = append(errs, fmt.Errorf("processes.max_executable_names_per_gpu: must be 0 (no bound) or more, got %d", cfg.Processes.MaxExecutableNamesPerGPU))
	}
	if cfg.Processes.MaxExecutableNamesPerGPU > 0 && cfg.Processes.ExecutableNamesWindow <= 0 {
		errs = append(errs, fmt.Errorf("processes.executable_names_window: must be positive, got %s", cfg.Processes.ExecutableNamesWindow))
	}
	if cfg.Processes.MaxExecutableNameLength < 1 {
		errs = append(errs, fmt.Errorf("processes.max_executable_name_length: must be at least 1, got %d", cfg.Processes.MaxExecutableNameLength))
	}
	if d := cfg.Processes.PodLogsDir; d != "" && !filepath.IsAbs(d) {
		errs = append(errs, fmt.Errorf("processes.pod_logs_dir: must be an absolute path, got %q", d))
	}
	ratio("idle.threshold", cfg.Idle.Threshold, false)
	positive("idle.window", cfg.Idle.Window)
	positive("leak.window", cfg.Leak.Window)
	ratio("leak.min_growth", cfg.Leak.MinGrowth, false)
	ratio("leak.utilization_tolerance", cfg.Leak.UtilizationTolerance, true)
	ratio("bottleneck.saturation", cfg.Bottleneck.Saturation, false)
	if cfg.SteadySeriesInterval < 0 || cfg.SteadySeriesInterval > gpuschema.SteadyResendMax {
		errs = append(errs, fmt.Errorf("steady_series_interval: must be between 0s (every collection) and %s (the end-of-series tracker ends a steady series after %s without a point), got %s",
			gpuschema.SteadyResendMax, gpuschema.SteadyResendMax, cfg.SteadySeriesInterval))
	}
	return errors.Join(errs...)
}
