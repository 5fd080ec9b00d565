package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"encoding/binary"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// Values NVML offers as "fields" are read in one nvmlDeviceGetFieldValues call per GPU per
// scrape instead of one call each. Where a field is not supported, the subsystem falls back
// to the dedicated call (if there is one) or leaves the metric out.

// deviceFieldIDs is the device-wide part of the batch (scope 0).
var deviceFieldIDs = []uint32{
	nvml.FI_DEV_MEMORY_TEMP,
	nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION,
	nvml.FI_DEV_PCIE_REPLAY_COUNTER,
	nvml.FI_DEV_PCIE_COUNT_TX_BYTES,
	nvml.FI_DEV_PCIE_COUNT_RX_BYTES,
	nvml.FI_DEV_ECC_SBE_VOL_TOTAL,
	nvml.FI_DEV_ECC_DBE_VOL_TOTAL,
	nvml.FI_DEV_ECC_SBE_AGG_TOTAL,
	nvml.FI_DEV_ECC_DBE_AGG_TOTAL,
	nvml.FI_DEV_RETIRED_SBE,
	nvml.FI_DEV_RETIRED_DBE,
	nvml.FI_DEV_RETIRED_PENDING,
	nvml.FI_DEV_REMAPPED_COR,
	nvml.FI_DEV_REMAPPED_UNC,
	nvml.FI_DEV_REMAPPED_PENDING,
	nvml.FI_DEV_REMAPPED_FAILURE,
	nvml.FI_DEV_PERF_POLICY_POWER,
	nvml.FI_DEV_PERF_POLICY_THERMAL,
	nvml.FI_DEV_PERF_POLICY_SYNC_BOOST,
	nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT,
	nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION,
	nvml.FI_DEV_PERF_POLICY_RELIABILITY,
}

// linkFieldIDs are read once per NVLink link (scope = link number).
var linkFieldIDs = []uint32{
	nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX,
	nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX,
	nvml.FI_DEV_NVLINK_ERROR_DL_CRC,
	nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY,
	nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY,
	nvml.FI_DEV_NVLINK_GET_STATE,
}

// fieldKey identifies one value of a batch.
type fieldKey struct {
	id    uint32
	scope uint32
}

// fieldValues holds the decoded values of one batch; absent keys were not supported or
// failed.
type fieldValues map[fieldKey]float64

func (f fieldValues) get(id uint32) (float64, bool) {
	v, ok := f[fieldKey{id: id}]
	return v, ok
}

func (f fieldValues) link(id uint32, link int) (float64, bool) {
	v, ok := f[fieldKey{id: id, scope: uint32(link)}]
	return v, ok
}

const callGetFieldValues = "nvmlDeviceGetFieldValues"

// newFieldRequest builds a GPU's batch: the device fields plus the per-link ones.
func newFieldRequest(links int) []nvml.FieldValue {
	req := make([]nvml.FieldValue, 0, len(deviceFieldIDs)+links*len(linkFieldIDs))
	for _, id := range deviceFieldIDs {
		req = append(req, nvml.FieldValue{FieldId: id})
	}
	for l := 0; l < links; l++ {
		for _, id := range linkFieldIDs {
			req = append(req, nvml.FieldValue{FieldId: id, ScopeId: uint32(l)})
		}
	}
	return req
}

func (r *deviceRead) readFields() {
	r.fields = fieldValues{}
	if r.skip(callGetFieldValues) || len(r.dev.fieldRequest) == 0 {
		return
	}
	// NVML writes results into the request; reset them so a value from the last scrape
	// can never be mistaken for this one's.
	for i := range r.dev.fieldRequest {
		v := &r.dev.fieldRequest[i]
		*v = nvml.FieldValue{FieldId: v.FieldId, ScopeId: v.ScopeId}
	}
	if !r.ok(callGetFieldValues, r.dev.handle.GetFieldValues(r.dev.fieldRequest)) {
		return
	}
	for _, v := range r.dev.fieldRequest {
		ret := nvml.Return(v.NvmlReturn)
		if ret != nvml.SUCCESS {
			// A lost GPU can surface per field; any other per-field code means "not
			// here" and the subsystem falls back or leaves the metric out.
			if nvmlclient.IsDeviceGone(ret) {
				r.ok(callGetFieldValues, ret)
				return
			}
			continue
		}
		if x, ok := decodeFieldValue(v); ok {
			r.fields[fieldKey{id: v.FieldId, scope: v.ScopeId}] = x
		}
	}
}

// decodeFieldValue reads the little-endian union NVML fills according to ValueType.
func decodeFieldValue(v nvml.FieldValue) (float64, bool) {
	b := v.Value[:]
	switch nvml.ValueType(v.ValueType) {
	case nvml.VALUE_TYPE_DOUBLE:
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_INT:
		return float64(binary.LittleEndian.Uint32(b)), true
	case nvml.VALUE_TYPE_UNSIGNED_LONG, nvml.VALUE_TYPE_UNSIGNED_LONG_LONG:
		return float64(binary.LittleEndian.Uint64(b)), true
	case nvml.VALUE_TYPE_SIGNED_LONG_LONG:
		return float64(int64(binary.LittleEndian.Uint64(b))), true
	case nvml.VALUE_TYPE_SIGNED_INT:
		return float64(int32(binary.LittleEndian.Uint32(b))), true
	case nvml.VALUE_TYPE_UNSIGNED_SHORT:
		return float64(binary.LittleEndian.Uint16(b)), true
	}
	return 0, false
}
