package podresources

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidDeviceID is wrapped by every ParseDeviceID error.
var ErrInvalidDeviceID = errors.New("invalid device id")

// Device kinds.
const (
	KindGPU = "gpu"
	KindMIG = "mig"
)

// replicaSep separates a device id from its time-slicing replica number, as
// the NVIDIA device plugin writes it ("GPU-<uuid>::3").
const replicaSep = "::"

// DeviceID is a device id from the kubelet, reduced to the UUID NVML reports.
type DeviceID struct {
	Kind    string // KindGPU or KindMIG
	UUID    string // "GPU-…" or "MIG-…", exactly as NVML reports it
	Replica int    // time-slicing replica N from "<id>::N"; -1 if none
}

// ParseDeviceID parses a device id as the NVIDIA device plugin hands it to the
// kubelet: "GPU-<uuid>", "MIG-<uuid>", the legacy "MIG-GPU-<uuid>/<gi>/<ci>"
// (kept whole: that is how old drivers' NVML names the MIG device), each
// optionally followed by "::N" for a time-slicing replica.
func ParseDeviceID(s string) (DeviceID, error) {
	base, replica := s, -1
	if i := strings.Index(s, replicaSep); i >= 0 {
		n, ok := parseUint(s[i+len(replicaSep):])
		if !ok {
			return DeviceID{}, invalid(s, "replica is not a non-negative integer")
		}
		base, replica = s[:i], n
	}
	switch {
	case strings.HasPrefix(base, "MIG-GPU-"):
		parts := strings.Split(strings.TrimPrefix(base, "MIG-GPU-"), "/")
		if len(parts) != 3 || !validUUIDBody(parts[0]) {
			return DeviceID{}, invalid(s, `legacy MIG id is not "MIG-GPU-<uuid>/<gi>/<ci>"`)
		}
		if _, ok := parseUint(parts[1]); !ok {
			return DeviceID{}, invalid(s, "legacy MIG GPU instance is not a number")
		}
		if _, ok := parseUint(parts[2]); !ok {
			return DeviceID{}, invalid(s, "legacy MIG compute instance is not a number")
		}
		return DeviceID{Kind: KindMIG, UUID: base, Replica: replica}, nil
	case strings.HasPrefix(base, "MIG-"):
		if !validUUIDBody(strings.TrimPrefix(base, "MIG-")) {
			return DeviceID{}, invalid(s, "bad MIG uuid")
		}
		return DeviceID{Kind: KindMIG, UUID: base, Replica: replica}, nil
	case strings.HasPrefix(base, "GPU-"):
		if !validUUIDBody(strings.TrimPrefix(base, "GPU-")) {
			return DeviceID{}, invalid(s, "bad GPU uuid")
		}
		return DeviceID{Kind: KindGPU, UUID: base, Replica: replica}, nil
	default:
		return DeviceID{}, invalid(s, `want "GPU-<uuid>", "MIG-<uuid>" or "MIG-GPU-<uuid>/<gi>/<ci>"`)
	}
}

func invalid(s, why string) error {
	return fmt.Errorf("%w %q: %s", ErrInvalidDeviceID, s, why)
}

// validUUIDBody accepts letters, digits and dashes rather than the strict
// 8-4-4-4-12 hex form, so simulators and future NVML formats still match.
func validUUIDBody(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-':
		default:
			return false
		}
	}
	return true
}

// parseUint accepts only plain decimal digits (no sign, no spaces).
func parseUint(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
