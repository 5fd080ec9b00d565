package podresources

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Defaults used for zero Config fields.
const (
	DefaultEndpoint        = "unix:///var/lib/kubelet/pod-resources/kubelet.sock"
	DefaultRefreshInterval = 10 * time.Second
	DefaultTimeout         = 5 * time.Second
	// The kubelet answers List with every pod on the node; big nodes overflow
	// gRPC's 4 MiB default.
	DefaultMaxMessageBytes = 16 << 20
)

// DefaultResourceNames are the resource names the NVIDIA device plugin
// advertises GPUs under (whole, time-sliced with renaming, MIG mixed strategy).
func DefaultResourceNames() []string {
	return []string{"nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-*"}
}

// DefaultDRADrivers are the DRA drivers whose devices are GPUs: NVIDIA's.
func DefaultDRADrivers() []string { return []string{"gpu.nvidia.com"} }

// Config configures a Client. Zero fields take the defaults above.
type Config struct {
	Endpoint        string        // "unix:///var/lib/kubelet/pod-resources/kubelet.sock" or a plain path
	RefreshInterval time.Duration // how often the snapshot is re-read
	Timeout         time.Duration // per List/GetAllocatableResources call
	ResourceNames   []string      // resource names that carry GPUs; a trailing "*" is a prefix wildcard
	DRADrivers      []string      // DRA drivers whose devices are GPUs or MIG devices
	MaxMessageBytes int           // gRPC receive limit
}

func (c Config) withDefaults() Config {
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	if c.RefreshInterval == 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if len(c.ResourceNames) == 0 {
		c.ResourceNames = DefaultResourceNames()
	}
	if len(c.DRADrivers) == 0 {
		c.DRADrivers = DefaultDRADrivers()
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	return c
}

// validate checks a Config that already has its defaults applied.
func (c Config) validate() error {
	var errs []error
	if _, err := grpcTarget(c.Endpoint); err != nil {
		errs = append(errs, err)
	}
	if c.RefreshInterval < 0 {
		errs = append(errs, fmt.Errorf("refresh interval %v is negative", c.RefreshInterval))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v is negative", c.Timeout))
	}
	if c.MaxMessageBytes < 0 {
		errs = append(errs, fmt.Errorf("max message bytes %d is negative", c.MaxMessageBytes))
	}
	for _, n := range c.ResourceNames {
		if n == "" || strings.Contains(strings.TrimSuffix(n, "*"), "*") {
			errs = append(errs, fmt.Errorf(`resource name %q: want a name, optionally ending in "*"`, n))
		}
	}
	return errors.Join(errs...)
}

// endpointPath is the filesystem path of a unix-socket endpoint.
func endpointPath(endpoint string) string {
	if path, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		return path
	}
	if strings.Contains(endpoint, "://") {
		return ""
	}
	return endpoint
}

// grpcTarget turns an endpoint into a target for grpc's unix resolver.
func grpcTarget(endpoint string) (string, error) {
	if path, ok := strings.CutPrefix(endpoint, "unix://"); ok {
		if !filepath.IsAbs(path) {
			return "", fmt.Errorf("endpoint %q: unix:// needs an absolute path", endpoint)
		}
		return endpoint, nil
	}
	if strings.Contains(endpoint, "://") {
		return "", fmt.Errorf("endpoint %q: only unix sockets are supported", endpoint)
	}
	if filepath.IsAbs(endpoint) {
		return "unix://" + endpoint, nil
	}
	return "unix:" + endpoint, nil // grpc's form for a relative path
}

// matchResource reports whether name is one of patterns (exact, or prefix
// when the pattern ends in "*").
func matchResource(patterns []string, name string) bool {
	for _, p := range patterns {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(name, prefix) {
				return true
			}
		} else if p == name {
			return true
		}
	}
	return false
}
