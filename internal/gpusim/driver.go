package gpusim

import (
	"fmt"
	"strconv"
	"strings"
)

// The simulated driver answers as the release it is told to be. Each fact below comes from
// NVIDIA's own headers (nvml.h of each release, as go-nvml and nvidia-settings carry them)
// and the open GPU kernel modules; the receiver has its own reading of the same facts, so a
// test fails where a real driver would, not where our code expects it to.

// DefaultDriver is a current R580 production release.
const DefaultDriver = "580.95.05"

// PID namespaces the simulated caller can be in.
const (
	// PIDNamespaceHost: the caller sees the host's PIDs (hostPID: true, a bare host).
	PIDNamespaceHost = "host"
	// PIDNamespaceContainer: the caller has a PID namespace of its own (hostPID: false).
	PIDNamespaceContainer = "container"
)

// driverRelease is a driver version, e.g. 535.104.05.
type driverRelease struct{ major, minor, patch int }

func parseDriverRelease(s string) (driverRelease, error) {
	parts := strings.Split(s, ".")
	if len(parts) < 2 || len(parts) > 3 {
		return driverRelease{}, fmt.Errorf("driver version %q: want major.minor[.patch]", s)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return driverRelease{}, fmt.Errorf("driver version %q: %q is not a number", s, p)
		}
		n[i] = v
	}
	return driverRelease{n[0], n[1], n[2]}, nil
}

func (d driverRelease) atLeast(major, minor, patch int) bool {
	if d.major != major {
		return d.major > major
	}
	if d.minor != minor {
		return d.minor > minor
	}
	return d.patch >= patch
}

// nvmlVersion is what nvmlSystemGetNVMLVersion prints for the release: the NVML API
// version the release ships (12 up to R575, 13 from R580) and the driver version.
func (d driverRelease) nvmlVersion(version string) string {
	api := 12
	if d.atLeast(580, 0, 0) {
		api = 13
	}
	return fmt.Sprintf("%d.%s", api, version)
}

// cudaVersion is the CUDA driver API version the release supports (nvmlSystemGetCudaDriverVersion).
func (d driverRelease) cudaVersion() int {
	switch {
	case d.atLeast(580, 0, 0):
		return 13000
	case d.atLeast(575, 0, 0):
		return 12090
	case d.atLeast(570, 0, 0):
		return 12080
	case d.atLeast(560, 0, 0):
		return 12060
	case d.atLeast(555, 0, 0):
		return 12050
	case d.atLeast(550, 0, 0):
		return 12040
	case d.atLeast(545, 0, 0):
		return 12030
	}
	return 12020
}

// hasPCIeByteCounters: NVML_FI_DEV_PCIE_COUNT_TX_BYTES/RX_BYTES (197/198) first appear in
// the 12.5 header (R555).
func (d driverRelease) hasPCIeByteCounters() bool { return d.atLeast(555, 0, 0) }

// hasNVLink5Counters: NVML_FI_DEV_NVLINK_COUNT_* (201-222) first appear in the 12.6 header (R560).
func (d driverRelease) hasNVLink5Counters() bool { return d.atLeast(560, 0, 0) }

// hasTemperatureV: nvmlDeviceGetTemperatureV first appears in the 12.8 header (R570);
// nvmlDeviceGetTemperature is deprecated from then on.
func (d driverRelease) hasTemperatureV() bool { return d.atLeast(570, 0, 0) }

// listsOnlyOwnPIDNamespace: from 535.113.01 the kernel module translates each GPU client's
// PID into the caller's PID namespace and drops those it cannot see (_gpuConvertPid ->
// osFindNsPid in gpu_rmapi.c).
func (d driverRelease) listsOnlyOwnPIDNamespace() bool { return d.atLeast(535, 113, 1) }

// writesWideProcessInfo: 535.43.02 to 535.86.x write 32-byte nvmlProcessInfo_t entries
// (with usedGpuCcProtectedMemory) from nvmlDeviceGetComputeRunningProcesses_v3; every
// other release, and go-nvml, use 24 bytes (go-nvml#75). 535.98 dropped _v3 from its
// header and is counted in (the range the receiver must avoid).
func (d driverRelease) writesWideProcessInfo() bool {
	return d.atLeast(535, 43, 2) && !d.atLeast(535, 104, 5)
}

// missingSymbol reports whether the release's libnvidia-ml lacks an entry point the
// receiver looks up.
func (d driverRelease) missingSymbol(symbol string) bool {
	switch symbol {
	case "nvmlDeviceGetTemperatureV":
		return !d.hasTemperatureV()
	case "nvmlDeviceGetGpuInstanceProfileInfoByIdV":
		return !d.atLeast(580, 65, 6)
	case "nvmlDeviceGetRunningProcessDetailList":
		return !d.atLeast(535, 104, 5)
	case "nvmlDeviceGetConfComputeMemSizeInfo":
		return !d.atLeast(535, 43, 2)
	case "nvmlDeviceGetProcessesUtilizationInfo":
		return !d.atLeast(550, 0, 0)
	}
	return false
}
