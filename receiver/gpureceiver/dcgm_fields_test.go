package gpureceiver

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dcgmCSVFields are the fields of dcgm-exporter's shipped CSV files
// (etc/default-counters.csv and etc/dcp-metrics-included.csv, active and commented-out
// rows, 4.5.3-4.8.2, plus the PCIe throughput rows of earlier releases) and its
// exporter-derived DCGM_EXP_* series.
var dcgmCSVFields = []string{
	"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
	"DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
	"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
	"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
	"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_POWER_VIOLATION", "DCGM_FI_DEV_THERMAL_VIOLATION",
	"DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
	"DCGM_FI_DEV_RELIABILITY_VIOLATION", "DCGM_EXP_CLOCK_EVENTS_COUNT", "DCGM_EXP_XID_ERRORS_COUNT",
	"DCGM_EXP_GPU_HEALTH_STATUS", "DCGM_EXP_P2P_STATUS",
	"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
	"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
	"DCGM_FI_DEV_RETIRED_SBE", "DCGM_FI_DEV_RETIRED_DBE", "DCGM_FI_DEV_RETIRED_PENDING",
	"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
	"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
	"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
	"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
	"DCGM_FI_DRIVER_VERSION", "DCGM_FI_NVML_VERSION", "DCGM_FI_DEV_BRAND", "DCGM_FI_DEV_SERIAL",
	"DCGM_FI_DEV_OEM_INFOROM_VER", "DCGM_FI_DEV_ECC_INFOROM_VER", "DCGM_FI_DEV_POWER_INFOROM_VER",
	"DCGM_FI_DEV_INFOROM_IMAGE_VER", "DCGM_FI_DEV_VBIOS_VERSION",
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_SM_OCCUPANCY",
	"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE", "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
	"DCGM_FI_PROF_PIPE_FP32_ACTIVE", "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
	"DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
}

// TestEveryDCGMCSVFieldIsAccountedFor: the receiver's README and the migration guide each
// say, for every field of dcgm-exporter's CSV files, what it maps to or why it is not
// provided; configs/dcgm-compat.yaml writes every field the guide marks as mapped.
func TestEveryDCGMCSVFieldIsAccountedFor(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	guide, err := os.ReadFile("../../docs/migrating-from-dcgm-exporter.md")
	require.NoError(t, err)
	overlay, err := os.ReadFile("../../configs/dcgm-compat.yaml")
	require.NoError(t, err)
	rowOf := func(doc []byte, field string) string {
		for _, line := range strings.Split(string(doc), "\n") {
			if strings.HasPrefix(line, "|") && strings.Contains(line, "`"+field+"`") {
				return line
			}
		}
		return ""
	}
	for _, f := range dcgmCSVFields {
		assert.NotEmpty(t, rowOf(readme, f), "README.md has no row for %s", f)
		row := rowOf(guide, f)
		if !assert.NotEmpty(t, row, "the migration guide has no row for %s", f) {
			continue
		}
		notProvided := strings.Contains(row, "not provided")
		written := strings.Contains(string(overlay), `"`+f+`"`) || f == "DCGM_FI_DRIVER_VERSION"
		assert.True(t, notProvided != written, "%s: the guide says %q, the overlay writes it: %v", f, row, written)
	}
}
