package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"encoding/binary"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// Values NVML offers as "fields" are read in one nvmlDeviceGetFieldValues call per GPU per
// scrape instead of one call each. Where a field is not supported, the subsystem falls back
// to the dedicated call.

// fieldIDs is the batch requested every scrape. Order does not matter.
var fieldIDs = []uint32{
	nvml.FI_DEV_MEMORY_TEMP,
	nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION,
	nvml.FI_DEV_PCIE_REPLAY_COUNTER,
}

// fieldValues holds the decoded values of one batch, by field id; absent ids were not
// supported or failed.
type fieldValues map[uint32]float64

func (f fieldValues) get(id uint32) (float64, bool) {
	v, ok := f[id]
	return v, ok
}

const callGetFieldValues = "nvmlDeviceGetFieldValues"

func (r *deviceRead) readFields() {
	if r.skip(callGetFieldValues) {
		return
	}
	values := make([]nvml.FieldValue, len(fieldIDs))
	for i, id := range fieldIDs {
		values[i].FieldId = id
	}
	if !r.ok(callGetFieldValues, r.dev.handle.GetFieldValues(values)) {
		return
	}
	r.fields = make(fieldValues, len(values))
	for _, v := range values {
		ret := nvml.Return(v.NvmlReturn)
		if ret != nvml.SUCCESS {
			// A lost GPU can surface per field; any other per-field code means "not
			// here" and the subsystem falls back to its dedicated call.
			if nvmlclient.IsDeviceGone(ret) {
				r.ok(callGetFieldValues, ret)
				return
			}
			continue
		}
		if x, ok := decodeFieldValue(v); ok {
			r.fields[v.FieldId] = x
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
