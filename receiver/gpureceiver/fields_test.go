package gpureceiver

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
)

// The answers are found by (field, scope) whatever order the request is in, and only for
// what was asked and answered in this scrape.
func TestFieldValuesFindEachAnswerByFieldAndLink(t *testing.T) {
	req := []nvml.FieldValue{
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: 1},
		{FieldId: nvml.FI_DEV_MEMORY_TEMP},
		{FieldId: nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ScopeId: 0},
		{FieldId: nvml.FI_DEV_NVLINK_GET_STATE, ScopeId: 1},
		{FieldId: nvml.FI_DEV_POWER_INSTANT},
	}
	f := newFieldValues(req, 2)
	for i, v := range []float64{11, 45, 10, 1, 700} {
		f.value[i], f.answered[i] = v, true
	}
	f.answered[4] = false // the power field was not supported

	get := func(v float64, ok bool) []any { return []any{v, ok} }
	assert.Equal(t, get(45, true), get(f.get(nvml.FI_DEV_MEMORY_TEMP)))
	assert.Equal(t, get(0, false), get(f.get(nvml.FI_DEV_POWER_INSTANT)), "not answered")
	assert.Equal(t, get(0, false), get(f.get(nvml.FI_DEV_TOTAL_ENERGY_CONSUMPTION)), "not asked")
	assert.Equal(t, get(10, true), get(f.link(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 0)))
	assert.Equal(t, get(11, true), get(f.link(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 1)))
	assert.Equal(t, get(1, true), get(f.link(nvml.FI_DEV_NVLINK_GET_STATE, 1)))
	assert.Equal(t, get(0, false), get(f.link(nvml.FI_DEV_NVLINK_GET_STATE, 0)), "not asked for link 0")
	assert.Equal(t, get(0, false), get(f.link(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 2)), "no link 2")
	assert.Equal(t, get(0, false), get(f.get(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX)), "a link field is not a device field")

	f.clear()
	assert.Equal(t, get(0, false), get(f.get(nvml.FI_DEV_MEMORY_TEMP)), "the next scrape starts empty")
}
