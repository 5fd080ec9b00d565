package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// podSource gives the latest pod-resources snapshot without blocking.
type podSource interface {
	Start(ctx context.Context) error
	Snapshot() (*podresources.Snapshot, podresources.Status)
	Shutdown() error
}

// pidSource maps a host PID to its container.
type pidSource interface {
	Lookup(pid uint32) (cgroup.Container, error)
	Forget(alive map[uint32]bool)
}

// podNameSource names a pod from its UID.
type podNameSource interface {
	Lookup(uid string) (podnames.Pod, bool)
}

// sources are what the processor attributes with; each is nil when switched off.
type sources struct {
	pods  podSource
	pids  pidSource
	names podNameSource
}

func newSources(cfg *Config, logger *zap.Logger, now func() time.Time) sources {
	var s sources
	if cfg.Kubelet.Enabled {
		s.pods = podresources.New(podresources.Config{
			Endpoint:        cfg.Kubelet.Endpoint,
			RefreshInterval: cfg.Kubelet.RefreshInterval,
			Timeout:         cfg.Kubelet.Timeout,
			ResourceNames:   cfg.Kubelet.ResourceNames,
		}, logger, now)
	}
	if cfg.Processes.Enabled {
		s.pids = cgroup.NewResolver(cfg.Processes.ProcRoot)
		if cfg.Processes.PodLogsDir != "" {
			s.names = podnames.New(cfg.Processes.PodLogsDir, cfg.Kubelet.RefreshInterval, now)
		}
	}
	return s
}
