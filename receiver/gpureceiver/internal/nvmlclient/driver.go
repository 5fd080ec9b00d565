package nvmlclient

import (
	"fmt"
	"strconv"
	"strings"
)

// DriverVersion is an NVIDIA driver version as nvmlSystemGetDriverVersion prints it:
// "535.104.05" (major.minor.patch) or "550.54" on some builds.
type DriverVersion struct {
	Major, Minor, Patch int
}

// ParseDriverVersion reads "535.104.05"; the patch may be absent. Anything else is an error,
// never a zero version that would compare as "old".
func ParseDriverVersion(s string) (DriverVersion, error) {
	parts := strings.Split(strings.TrimSpace(s), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return DriverVersion{}, fmt.Errorf("driver version %q: want major.minor[.patch]", s)
	}
	var nums [3]int
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return DriverVersion{}, fmt.Errorf("driver version %q: %q is not a number", s, p)
		}
		nums[i] = n
	}
	return DriverVersion{Major: nums[0], Minor: nums[1], Patch: nums[2]}, nil
}

// Less reports whether v is older than o.
func (v DriverVersion) Less(o DriverVersion) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

func (v DriverVersion) String() string {
	return fmt.Sprintf("%d.%d.%02d", v.Major, v.Minor, v.Patch)
}

// Driver facts that decide how the receiver reads a GPU. Each is a property of the driver
// release, found in NVIDIA's headers and sources; the simulator models the same ones
// (internal/gpusim/driver.go) so that a test fails where a real driver would.
var (
	// processInfoV3BrokenFrom..processInfoV3FixedIn: these releases' libnvidia-ml writes
	// 32-byte nvmlProcessInfo_t entries (with usedGpuCcProtectedMemory) from
	// nvmlDeviceGetComputeRunningProcesses_v3, while go-nvml's ProcessInfo is the 24-byte
	// layout every other release uses: PIDs and memory come back shuffled and the library
	// writes past the caller's buffer (go-nvml#75; nvitop works around the same range).
	processInfoV3BrokenFrom = DriverVersion{535, 43, 2}
	processInfoV3FixedIn    = DriverVersion{535, 104, 5}
	// pidNamespaceFilterFrom: from this release the kernel module translates every GPU
	// client's PID into the caller's PID namespace and drops the clients it cannot see
	// (_gpuConvertPid -> osFindNsPid, src/nvidia/src/kernel/gpu/gpu_rmapi.c of
	// open-gpu-kernel-modules): an agent outside the host's PID namespace lists none of
	// the other containers' processes.
	pidNamespaceFilterFrom = DriverVersion{535, 113, 0}
)

// ProcessListBroken reports whether nvmlDeviceGetComputeRunningProcesses_v3 of this driver
// returns entries go-nvml cannot read (and overruns its buffer): it must not be called.
func (v DriverVersion) ProcessListBroken() bool {
	return !v.Less(processInfoV3BrokenFrom) && v.Less(processInfoV3FixedIn)
}

// FiltersProcessesByPIDNamespace reports whether the driver lists only the processes of
// the caller's PID namespace.
func (v DriverVersion) FiltersProcessesByPIDNamespace() bool {
	return !v.Less(pidNamespaceFilterFrom)
}
