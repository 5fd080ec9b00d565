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

// Scheme is how a device plugin names the devices it hands out.
type Scheme int

const (
	// SchemeUUID: NVIDIA's device plugin by default (deviceIDStrategy=uuid): the UUID NVML
	// reports, "GPU-…" or "MIG-…" (legacy drivers: "MIG-GPU-<uuid>/<gi>/<ci>").
	SchemeUUID Scheme = iota
	// SchemeIndex: NVIDIA's device plugin with deviceIDStrategy=index: the GPU's NVML
	// index "<gpu>", and for a MIG device "<gpu>:<mig>", the MIG device's index on its GPU.
	SchemeIndex
	// SchemeGKE: GKE's own device plugin: "nvidia<minor>" for a whole GPU (the
	// /dev/nvidia<minor> device node), "nvidia<minor>/gi<id>" for a MIG partition (its GPU
	// instance id), "nvidia<minor>/vgpu<n>" for a time-shared or MPS-shared slot.
	SchemeGKE
)

// replicaSep separates a device id from its time-slicing or MPS replica number, as
// NVIDIA's device plugin writes it ("GPU-<uuid>::3", "0::3").
const replicaSep = "::"

// DeviceID is a device id from the kubelet, parsed: a UUID, or the numbers that identify
// the GPU (and MIG device) on the node.
type DeviceID struct {
	Scheme Scheme
	Kind   string // KindGPU or KindMIG
	UUID   string // SchemeUUID: "GPU-…" or "MIG-…" as the kubelet gives it (NVML's, maybe in another case)
	// GPU is the GPU's NVML index (SchemeIndex) or its minor number (SchemeGKE); -1 for
	// SchemeUUID.
	GPU int
	// MIG is the MIG device's index on its GPU (SchemeIndex) or its GPU instance id
	// (SchemeGKE); -1 for a whole GPU.
	MIG int
	// Replica is the sharing replica ("::N", GKE "/vgpuN"); -1 if none.
	Replica int
}

// ParseDeviceID parses a device id as a device plugin hands it to the kubelet, in any of
// the schemes above.
func ParseDeviceID(s string) (DeviceID, error) {
	if rest, ok := strings.CutPrefix(s, "nvidia"); ok {
		return parseGKE(s, rest)
	}
	base, replica := s, -1
	if i := strings.Index(s, replicaSep); i >= 0 {
		n, ok := parseUint(s[i+len(replicaSep):])
		if !ok {
			return DeviceID{}, invalid(s, "replica is not a non-negative integer")
		}
		base, replica = s[:i], n
	}
	id := DeviceID{Scheme: SchemeUUID, GPU: -1, MIG: -1, Replica: replica}
	// NVML writes "GPU-<lower-case hex>"; some device plugins and DRA drivers write the
	// same UUID in upper case, prefix included. The UUID is kept as written; matching it to
	// NVML's ignores case.
	switch {
	case hasPrefixFold(base, "MIG-GPU-"):
		parts := strings.Split(base[len("MIG-GPU-"):], "/")
		if len(parts) != 3 || !validUUIDBody(parts[0]) {
			return DeviceID{}, invalid(s, `legacy MIG id is not "MIG-GPU-<uuid>/<gi>/<ci>"`)
		}
		if _, ok := parseUint(parts[1]); !ok {
			return DeviceID{}, invalid(s, "legacy MIG GPU instance is not a number")
		}
		if _, ok := parseUint(parts[2]); !ok {
			return DeviceID{}, invalid(s, "legacy MIG compute instance is not a number")
		}
		id.Kind, id.UUID = KindMIG, base
	case hasPrefixFold(base, "MIG-"):
		if !validUUIDBody(base[len("MIG-"):]) {
			return DeviceID{}, invalid(s, "bad MIG uuid")
		}
		id.Kind, id.UUID = KindMIG, base
	case hasPrefixFold(base, "GPU-"):
		if !validUUIDBody(base[len("GPU-"):]) {
			return DeviceID{}, invalid(s, "bad GPU uuid")
		}
		id.Kind, id.UUID = KindGPU, base
	case base != "" && base[0] >= '0' && base[0] <= '9':
		gpu, mig, hasMIG := strings.Cut(base, ":")
		g, ok := parseUint(gpu)
		if !ok {
			return DeviceID{}, invalid(s, "GPU index is not a number")
		}
		id.Scheme, id.Kind, id.GPU = SchemeIndex, KindGPU, g
		if hasMIG {
			m, ok := parseUint(mig)
			if !ok {
				return DeviceID{}, invalid(s, `MIG index is not a number ("<gpu>:<mig>")`)
			}
			id.Kind, id.MIG = KindMIG, m
		}
	default:
		return DeviceID{}, invalid(s, `want a UUID ("GPU-…", "MIG-…"), an index ("0", "0:1") or GKE's "nvidia<minor>"`)
	}
	return id, nil
}

// parseGKE parses GKE's names: "nvidia<minor>", then optionally "/gi<id>" and
// "/vgpu<n>".
func parseGKE(s, rest string) (DeviceID, error) {
	id := DeviceID{Scheme: SchemeGKE, Kind: KindGPU, MIG: -1, Replica: -1}
	parts := strings.Split(rest, "/")
	minor, ok := parseUint(parts[0])
	if !ok {
		return DeviceID{}, invalid(s, `GKE device is not "nvidia<minor>"`)
	}
	id.GPU = minor
	for _, p := range parts[1:] {
		switch {
		case strings.HasPrefix(p, "gi") && id.MIG < 0 && id.Replica < 0:
			n, ok := parseUint(strings.TrimPrefix(p, "gi"))
			if !ok {
				return DeviceID{}, invalid(s, "GKE GPU instance is not a number")
			}
			id.Kind, id.MIG = KindMIG, n
		case strings.HasPrefix(p, "vgpu") && id.Replica < 0:
			n, ok := parseUint(strings.TrimPrefix(p, "vgpu"))
			if !ok {
				return DeviceID{}, invalid(s, "GKE shared slot is not a number")
			}
			id.Replica = n
		default:
			return DeviceID{}, invalid(s, `GKE device is not "nvidia<minor>[/gi<id>][/vgpu<n>]"`)
		}
	}
	return id, nil
}

// namesGPU reports whether a device ID names an NVIDIA GPU or MIG device by itself: a
// UUID, or GKE's "nvidia<minor>" names. Bare indexes ("0") are left out: other device
// plugins number their devices too.
func namesGPU(s string) bool {
	id, err := ParseDeviceID(s)
	return err == nil && (id.Scheme == SchemeUUID || id.Scheme == SchemeGKE)
}

// hasPrefixFold is strings.HasPrefix ignoring ASCII case.
func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
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
