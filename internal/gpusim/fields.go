package gpusim

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// aggregateECCBase is what each GPU's lifetime (aggregate) ECC counters held before the
// simulation started.
const aggregateECCBase = 12

// nvlinkLinks is the number of NVLink links per GPU of each system.
var nvlinkLinks = map[string]int{"dgxa100": 12, "dgxh100": 18, "dgxh200": 18, "dgxb200": 18}

// fieldValue answers one nvmlDeviceGetFieldValues entry from the scenario's reading.
func (d *Device) fieldValue(v *nvml.FieldValue, t float64, r reading) {
	ull := func(x uint64) { setUint(v, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG, x) }
	flag := func(b bool) {
		if b {
			ull(1)
		} else {
			ull(0)
		}
	}
	busy := r.utilization / 100
	switch v.FieldId {
	case nvml.FI_DEV_MEMORY_TEMP:
		setUint(v, nvml.VALUE_TYPE_UNSIGNED_INT, uint64(math.Round(r.memTempC)))
	case nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION:
		ull(d.energyMillijoules(t))
	case nvml.FI_DEV_POWER_AVERAGE:
		// A one-second average exists from Ampere on, GA100 (the A100) excepted.
		if d.sim.system == "dgxa100" {
			v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			return
		}
		setUint(v, nvml.VALUE_TYPE_UNSIGNED_INT, uint64(math.Round(r.powerW*1000)))
	case nvml.FI_DEV_POWER_INSTANT:
		setUint(v, nvml.VALUE_TYPE_UNSIGNED_INT, uint64(math.Round(r.powerW*1000)))
	case nvml.FI_DEV_POWER_CURRENT_LIMIT:
		setUint(v, nvml.VALUE_TYPE_UNSIGNED_INT, uint64(d.sim.machine.sys.powerLimitW*1000))
	case nvml.FI_DEV_PCIE_REPLAY_COUNTER:
		ull(d.pcieReplays(t))
	case nvml.FI_DEV_ECC_SBE_VOL_TOTAL:
		ull(r.eccCorrected)
	case nvml.FI_DEV_ECC_DBE_VOL_TOTAL:
		ull(r.eccUncorrected)
	case nvml.FI_DEV_ECC_SBE_AGG_TOTAL:
		ull(r.eccCorrected + aggregateECCBase)
	case nvml.FI_DEV_ECC_DBE_AGG_TOTAL:
		ull(r.eccUncorrected)
	case nvml.FI_DEV_REMAPPED_COR:
		ull(r.eccCorrected / 1000)
	case nvml.FI_DEV_REMAPPED_UNC:
		ull(r.eccUncorrected)
	case nvml.FI_DEV_REMAPPED_PENDING:
		flag(r.remapPending)
	case nvml.FI_DEV_REMAPPED_FAILURE:
		flag(r.remapFailed)
	case nvml.FI_DEV_RETIRED_SBE, nvml.FI_DEV_RETIRED_DBE, nvml.FI_DEV_RETIRED_PENDING:
		// Ampere and newer remap rows instead of retiring pages.
		v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
	case nvml.FI_DEV_PERF_POLICY_POWER, nvml.FI_DEV_PERF_POLICY_THERMAL, nvml.FI_DEV_PERF_POLICY_SYNC_BOOST,
		nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT, nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION, nvml.FI_DEV_PERF_POLICY_RELIABILITY:
		ull(uint64(r.throttleSeconds[v.FieldId-nvml.FI_DEV_PERF_POLICY_POWER] * 1e9)) // ns
	case nvml.FI_DEV_PCIE_COUNT_TX_BYTES:
		ull(uint64(t * (0.2 + busy*1.8) * 1e9))
	case nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
		ull(uint64(t * (0.3 + busy*2.7) * 1e9))
	case nvml.FI_DEV_NVLINK_LINK_COUNT:
		setUint(v, nvml.VALUE_TYPE_UNSIGNED_INT, uint64(d.links))
	case nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
		if !d.validLink(v) {
			return
		}
		ull(uint64(t * (0.05 + busy*9.5) * 1e9 / 1024)) // KiB
	case nvml.FI_DEV_NVLINK_ERROR_DL_CRC, nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY, nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY:
		if !d.validLink(v) {
			return
		}
		n := uint64(t / 3600 * float64(v.ScopeId%3))
		if v.ScopeId == 3 && v.FieldId == nvml.FI_DEV_NVLINK_ERROR_DL_CRC {
			n += uint64(t * r.nvlinkErrorsPerSecond)
		}
		ull(n)
	case nvml.FI_DEV_NVLINK_GET_STATE:
		if !d.validLink(v) {
			return
		}
		setUint(v, nvml.VALUE_TYPE_UNSIGNED_INT, nvml.NVLINK_STATE_ACTIVE)
	default:
		v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
	}
}

func (d *Device) validLink(v *nvml.FieldValue) bool {
	if int(v.ScopeId) >= d.links {
		v.NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
		return false
	}
	return true
}
