package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"encoding/binary"
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// Values NVML offers as "fields" are read in one nvmlDeviceGetFieldValues call per GPU per
// scrape instead of one call each; only the fields of enabled metrics (and those hw.status
// is derived from) are asked for. Where a field is not supported, the subsystem falls back
// to the dedicated call (if there is one) or leaves the metric out.

// deviceFields are the device-wide fields (scope 0), each with whether the configuration
// needs it.
var deviceFields = []struct {
	id     uint32
	needed func(m *metadata.MetricsConfig) bool
}{
	{nvml.FI_DEV_MEMORY_TEMP, func(m *metadata.MetricsConfig) bool { return m.HwTemperature.Enabled }},
	{nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION, func(m *metadata.MetricsConfig) bool { return m.HwEnergy.Enabled }},
	{nvml.FI_DEV_POWER_AVERAGE, func(m *metadata.MetricsConfig) bool { return m.HwPower.Enabled }},
	{nvml.FI_DEV_POWER_INSTANT, func(m *metadata.MetricsConfig) bool { return m.HwPower.Enabled }},
	{nvml.FI_DEV_POWER_CURRENT_LIMIT, func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPowerLimit.Enabled }},
	{nvml.FI_DEV_PCIE_REPLAY_COUNTER, func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuPcieReplays.Enabled }},
	{nvml.FI_DEV_PCIE_COUNT_TX_BYTES, func(m *metadata.MetricsConfig) bool { return m.HwGpuIo.Enabled }},
	{nvml.FI_DEV_PCIE_COUNT_RX_BYTES, func(m *metadata.MetricsConfig) bool { return m.HwGpuIo.Enabled }},
	{nvml.FI_DEV_ECC_SBE_VOL_TOTAL, func(m *metadata.MetricsConfig) bool { return m.HwErrors.Enabled }},
	{nvml.FI_DEV_ECC_DBE_VOL_TOTAL, always}, // hw.status
	{nvml.FI_DEV_ECC_SBE_AGG_TOTAL, func(m *metadata.MetricsConfig) bool { return m.HwErrors.Enabled }},
	{nvml.FI_DEV_ECC_DBE_AGG_TOTAL, func(m *metadata.MetricsConfig) bool { return m.HwErrors.Enabled }},
	{nvml.FI_DEV_RETIRED_SBE, func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryRetiredPages.Enabled }},
	{nvml.FI_DEV_RETIRED_DBE, func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryRetiredPages.Enabled }},
	{nvml.FI_DEV_RETIRED_PENDING, always}, // hw.status
	{nvml.FI_DEV_REMAPPED_COR, func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryRemappedRows.Enabled }},
	{nvml.FI_DEV_REMAPPED_UNC, func(m *metadata.MetricsConfig) bool { return m.NvidiaGpuMemoryRemappedRows.Enabled }},
	{nvml.FI_DEV_REMAPPED_PENDING, always}, // hw.status
	{nvml.FI_DEV_REMAPPED_FAILURE, always}, // hw.status
	{nvml.FI_DEV_PERF_POLICY_POWER, clockEventDurationOn},
	{nvml.FI_DEV_PERF_POLICY_THERMAL, clockEventDurationOn},
	{nvml.FI_DEV_PERF_POLICY_SYNC_BOOST, clockEventDurationOn},
	{nvml.FI_DEV_PERF_POLICY_BOARD_LIMIT, clockEventDurationOn},
	{nvml.FI_DEV_PERF_POLICY_LOW_UTILIZATION, clockEventDurationOn},
	{nvml.FI_DEV_PERF_POLICY_RELIABILITY, clockEventDurationOn},
}

func always(*metadata.MetricsConfig) bool { return true }

func clockEventDurationOn(m *metadata.MetricsConfig) bool {
	return m.NvidiaGpuClockEventDuration.Enabled
}

// linkFields are read once per NVLink link (scope = link number); summing them per GPU,
// where the link attribute is off, is left to the metrics builder. The error counters
// differ by NVLink generation: nvml.h says the data-link ones are "unsupported for
// Blackwell+", whose NVLink5 counters (from R560) replace them.
var linkFields = []struct {
	id     uint32
	needed func(m *metadata.MetricsConfig, nvlink5 bool) bool
}{
	{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, func(m *metadata.MetricsConfig, _ bool) bool { return m.NvidiaGpuNvlinkIo.Enabled }},
	{nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, func(m *metadata.MetricsConfig, _ bool) bool { return m.NvidiaGpuNvlinkIo.Enabled }},
	{nvml.FI_DEV_NVLINK_ERROR_DL_CRC, dataLinkErrorsOn},
	{nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY, dataLinkErrorsOn},
	{nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY, dataLinkErrorsOn},
	{nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, nvlink5ErrorsOn},
	{nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, nvlink5ErrorsOn},
	{nvml.FI_DEV_NVLINK_GET_STATE, func(m *metadata.MetricsConfig, _ bool) bool { return m.NvidiaGpuNvlinkState.Enabled }},
}

func dataLinkErrorsOn(m *metadata.MetricsConfig, nvlink5 bool) bool {
	return m.NvidiaGpuNvlinkErrors.Enabled && !nvlink5
}

func nvlink5ErrorsOn(m *metadata.MetricsConfig, nvlink5 bool) bool {
	return m.NvidiaGpuNvlinkErrors.Enabled && nvlink5
}

// fieldValues holds the decoded answers to one GPU's field request, each at its position
// in the request. The request is fixed at discovery, so where each (field, scope) sits is
// worked out once: a scrape writes and reads slices, where a map keyed by (field, scope)
// hashed about 90 keys per H100 twice (filled, then read back link by link), a sixth of
// its scrape. Absent answers were not asked for, not supported, or failed.
type fieldValues struct {
	deviceAt []int16 // by field ID: the device-wide field's request position; -1: not asked
	linkAt   []int16 // linkAt[k*links+l]: linkFields[k] of link l's request position; -1: not asked
	links    int
	value    []float64
	answered []bool
}

// newFieldValues lays out the answers to req, a GPU's request of its device fields and of
// the linkFields of each of its links (scope = link number).
func newFieldValues(req []nvml.FieldValue, links int) *fieldValues {
	f := &fieldValues{
		linkAt:   make([]int16, len(linkFields)*links),
		links:    links,
		value:    make([]float64, len(req)),
		answered: make([]bool, len(req)),
	}
	for i := range f.linkAt {
		f.linkAt[i] = -1
	}
	for i, v := range req {
		if k := linkFieldIndex(v.FieldId); k >= 0 {
			if int(v.ScopeId) < links {
				f.linkAt[k*links+int(v.ScopeId)] = int16(i)
			}
			continue
		}
		for int(v.FieldId) >= len(f.deviceAt) {
			f.deviceAt = append(f.deviceAt, -1)
		}
		f.deviceAt[v.FieldId] = int16(i)
	}
	return f
}

// linkFieldIndex is id's index in linkFields, or -1 for a device-wide field.
func linkFieldIndex(id uint32) int {
	for k, f := range linkFields {
		if f.id == id {
			return k
		}
	}
	return -1
}

func (f *fieldValues) get(id uint32) (float64, bool) {
	if int(id) >= len(f.deviceAt) {
		return 0, false
	}
	return f.at(f.deviceAt[id])
}

func (f *fieldValues) link(id uint32, link int) (float64, bool) {
	k := linkFieldIndex(id)
	if k < 0 || link < 0 || link >= f.links {
		return 0, false
	}
	return f.at(f.linkAt[k*f.links+link])
}

func (f *fieldValues) at(i int16) (float64, bool) {
	if i < 0 || !f.answered[i] {
		return 0, false
	}
	return f.value[i], true
}

// clear forgets the last scrape's answers.
func (f *fieldValues) clear() { clear(f.answered) }

const callGetFieldValues = "nvmlDeviceGetFieldValues"

// newFieldRequest builds a GPU's batch: the device fields plus the per-link ones of its
// NVLink generation, for the metrics that are on.
func newFieldRequest(m *metadata.MetricsConfig, links int, nvlink5 bool) []nvml.FieldValue {
	var req []nvml.FieldValue
	for _, f := range deviceFields {
		if f.needed(m) {
			req = append(req, nvml.FieldValue{FieldId: f.id})
		}
	}
	for l := 0; l < links; l++ {
		for _, f := range linkFields {
			if f.needed(m, nvlink5) {
				req = append(req, nvml.FieldValue{FieldId: f.id, ScopeId: uint32(l)})
			}
		}
	}
	return req
}

func (r *deviceRead) readFields() {
	// The answers are the GPU's, emptied and refilled every scrape (no allocation).
	r.dev.fieldValues.clear()
	r.fields = r.dev.fieldValues
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
	for i, v := range r.dev.fieldRequest {
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
			r.fields.value[i], r.fields.answered[i] = x, true
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
