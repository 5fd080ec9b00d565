package gpusim

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// aggregateECCBase is what each GPU's lifetime (aggregate) ECC counters held before the
// simulation started.
const aggregateECCBase = 12

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
	sys := d.sim.machine.sys
	if sys.vgpuGuest && hypervisorOnlyField(v.FieldId) {
		v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		return
	}
	switch v.FieldId {
	case nvml.FI_DEV_MEMORY_TEMP:
		if !sys.hbm {
			v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED) // GDDR: no sensor on the memory
			return
		}
		setUint(v, nvml.VALUE_TYPE_UNSIGNED_INT, uint64(math.Round(r.memTempC)))
	case nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION:
		ull(d.energyMillijoules(t))
	case nvml.FI_DEV_POWER_AVERAGE:
		// A one-second average exists from Ampere on, GA100 (the A100) excepted.
		if !sys.powerAverage {
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
	case nvml.FI_DEV_PCIE_COUNT_TX_BYTES, nvml.FI_DEV_PCIE_COUNT_RX_BYTES:
		if !d.sim.driver.hasPCIeByteCounters() {
			v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED) // field ids from R555 on
			return
		}
		ull(d.pcieBytes(v.FieldId == nvml.FI_DEV_PCIE_COUNT_TX_BYTES, t))
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
		if sys.nvlinkGen >= 5 {
			// nvml.h: "This is unsupported for Blackwell+. Please use
			// NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_*".
			v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			return
		}
		ull(d.nvlinkErrors(v, t, r, v.FieldId == nvml.FI_DEV_NVLINK_ERROR_DL_CRC))
	case nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS,
		nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS:
		// NVLink5's counters (Blackwell, from R560): per link by scope id.
		if sys.nvlinkGen < 5 || !d.sim.driver.hasNVLink5Counters() {
			v.NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
			return
		}
		if !d.validLink(v) {
			return
		}
		symbol := v.FieldId == nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS || v.FieldId == nvml.FI_DEV_NVLINK_COUNT_EFFECTIVE_ERRORS
		n := d.nvlinkErrors(v, t, r, symbol)
		if v.FieldId == nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_FAILED_EVENTS {
			n /= 4
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

// nvlinkErrors is a link's error count: a few an hour on some links, and, for the
// symbol-level counters, the flaky link 3 of a scenario.
func (d *Device) nvlinkErrors(v *nvml.FieldValue, t float64, r reading, symbolLevel bool) uint64 {
	n := uint64(t / 3600 * float64(v.ScopeId%3))
	if v.ScopeId == 3 && symbolLevel {
		n += uint64(t * r.nvlinkErrorsPerSecond)
	}
	return n
}

// pcieRate is the PCIe traffic each way in bytes/s during the whole second of t, as GPM's
// PCIe rates report it.
func (d *Device) pcieRate(transmit bool, t float64) float64 {
	busy := d.sim.scenario(d.sim.machine, d.index, math.Floor(t)).utilization / 100
	if transmit {
		return (0.2 + busy*1.8) * 1e9
	}
	return (0.3 + busy*2.7) * 1e9
}

// pcieBytes is the PCIe byte counter each way: pcieRate integrated since the start.
func (d *Device) pcieBytes(transmit bool, t float64) uint64 {
	i := 0
	if !transmit {
		i = 1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return uint64(d.pcie[i].at(t, func(k float64) float64 { return d.pcieRate(transmit, k) }))
}

// hypervisorOnlyField: what a vGPU guest cannot read (temperatures, power, energy, PCIe
// and row-remapping counters are the hypervisor's).
func hypervisorOnlyField(id uint32) bool {
	switch id {
	case nvml.FI_DEV_MEMORY_TEMP, nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION, nvml.FI_DEV_POWER_AVERAGE, nvml.FI_DEV_POWER_INSTANT,
		nvml.FI_DEV_POWER_CURRENT_LIMIT, nvml.FI_DEV_PCIE_REPLAY_COUNTER, nvml.FI_DEV_PCIE_COUNT_TX_BYTES, nvml.FI_DEV_PCIE_COUNT_RX_BYTES,
		nvml.FI_DEV_REMAPPED_COR, nvml.FI_DEV_REMAPPED_UNC, nvml.FI_DEV_REMAPPED_PENDING, nvml.FI_DEV_REMAPPED_FAILURE:
		return true
	}
	return false
}

func (d *Device) validLink(v *nvml.FieldValue) bool {
	if int(v.ScopeId) >= d.links {
		v.NvmlReturn = uint32(nvml.ERROR_INVALID_ARGUMENT)
		return false
	}
	return true
}
