package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/allocation"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/kube"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// podSource gives the latest pod-resources snapshot without blocking.
type podSource interface {
	Start(ctx context.Context) error
	Snapshot() (*podresources.Snapshot, podresources.Status)
	Shutdown() error
}

// pidSource says where a host PID runs.
type pidSource interface {
	Lookup(pid uint32) (cgroup.Location, error)
	Forget(alive map[uint32]bool)
	Close() // releases what it keeps open (descriptors of the processes' /proc entries)
}

// podNameSource names a pod from its UID.
// and a pod's UID from its namespace and name.
type podNameSource interface {
	Lookup(uid string) (podnames.Pod, bool)
	UID(namespace, name string) (string, bool)
}

// kubeSource is what the Kubernetes API says about this node: the DRA drivers'
// ResourceSlices and which pods finished.
type kubeSource interface {
	Start(ctx context.Context) error
	Shutdown() error
	allocation.Slices
	Finished(namespace, name string) bool
}

// sources are what the processor attributes with; each is nil when switched off.
type sources struct {
	pods  podSource
	pids  pidSource
	names podNameSource
	kube  kubeSource
}

func newSources(cfg *Config, logger *zap.Logger, now func() time.Time) sources {
	var s sources
	if cfg.Kubelet.Enabled {
		s.pods = podresources.New(podresources.Config{
			Endpoint:        cfg.Kubelet.Endpoint,
			RefreshInterval: cfg.Kubelet.RefreshInterval,
			Timeout:         cfg.Kubelet.Timeout,
			ResourceNames:   cfg.Kubelet.ResourceNames,
			DRADrivers:      cfg.Kubelet.DRADrivers,
		}, logger, now)
	}
	var kubeNames podNameSource
	if cfg.KubeAPI.Enabled {
		k := kube.New(cfg.KubeAPI.kube(), logger)
		s.kube, kubeNames = k, k
	}
	if cfg.Processes.Enabled {
		s.pids = cgroup.NewResolver(cfg.Processes.ProcRoot)
		var logDirs podNameSource
		if cfg.Processes.PodLogsDir != "" {
			logDirs = podnames.New(cfg.Processes.PodLogsDir, cfg.Kubelet.RefreshInterval, now)
		}
		s.names = firstNamed(kubeNames, logDirs)
	}
	return s
}

// firstNamed asks each source in turn (the API knows container IDs; the log directory
// knows pods the API watch has not delivered yet). nil sources are skipped; nil if none.
func firstNamed(srcs ...podNameSource) podNameSource {
	var chain namesChain
	for _, s := range srcs {
		if s != nil {
			chain = append(chain, s)
		}
	}
	switch len(chain) {
	case 0:
		return nil
	case 1:
		return chain[0]
	}
	return chain
}

type namesChain []podNameSource

func (c namesChain) Lookup(uid string) (podnames.Pod, bool) {
	for _, s := range c {
		if p, ok := s.Lookup(uid); ok {
			return p, true
		}
	}
	return podnames.Pod{}, false
}

func (c namesChain) UID(namespace, name string) (string, bool) {
	for _, s := range c {
		if uid, ok := s.UID(namespace, name); ok {
			return uid, true
		}
	}
	return "", false
}
