package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// recordMemoryErrors reports ECC error counts, row remapping (Ampere and newer) and page
// retirement (older GPUs), all from the field batch. Absent fields mean the GPU does not
// have that mechanism (or ECC is off), so the metric is left out.
func (r *deviceRead) recordMemoryErrors() {
	if r.gone {
		return
	}
	m := r.metrics
	if m.HwErrors.Enabled {
		for i, e := range []struct {
			id   uint32
			kind metadata.AttributeErrorType
			ctr  metadata.AttributeNvidiaGpuEccCounterType
		}{
			{nvml.FI_DEV_ECC_SBE_VOL_TOTAL, metadata.AttributeErrorTypeCorrected, metadata.AttributeNvidiaGpuEccCounterTypeVolatile},
			{nvml.FI_DEV_ECC_DBE_VOL_TOTAL, metadata.AttributeErrorTypeUncorrected, metadata.AttributeNvidiaGpuEccCounterTypeVolatile},
			{nvml.FI_DEV_ECC_SBE_AGG_TOTAL, metadata.AttributeErrorTypeCorrected, metadata.AttributeNvidiaGpuEccCounterTypeAggregate},
			{nvml.FI_DEV_ECC_DBE_AGG_TOTAL, metadata.AttributeErrorTypeUncorrected, metadata.AttributeNvidiaGpuEccCounterTypeAggregate},
		} {
			if v, ok := r.fields.get(e.id); ok && r.sendSteady(steadyKey{metric: gpuschema.MetricHwErrors, code: int64(i)}, v) {
				r.mb.RecordHwErrorsDataPoint(r.now, int64(v), e.kind, e.ctr)
			}
		}
	}
	if v, ok := r.fields.get(nvml.FI_DEV_REMAPPED_COR); ok && m.NvidiaGpuMemoryRemappedRows.Enabled &&
		r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuMemoryRemappedRows, attrs: metadata.AttributeErrorTypeCorrected.String()}, v) {
		r.mb.RecordNvidiaGpuMemoryRemappedRowsDataPoint(r.now, int64(v), metadata.AttributeErrorTypeCorrected)
	}
	if v, ok := r.fields.get(nvml.FI_DEV_REMAPPED_UNC); ok && m.NvidiaGpuMemoryRemappedRows.Enabled &&
		r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuMemoryRemappedRows, attrs: metadata.AttributeErrorTypeUncorrected.String()}, v) {
		r.mb.RecordNvidiaGpuMemoryRemappedRowsDataPoint(r.now, int64(v), metadata.AttributeErrorTypeUncorrected)
	}
	if v, ok := r.fields.get(nvml.FI_DEV_REMAPPED_PENDING); ok && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuMemoryRemapPending}, v) {
		r.mb.RecordNvidiaGpuMemoryRemapPendingDataPoint(r.now, int64(v))
	}
	if v, ok := r.fields.get(nvml.FI_DEV_REMAPPED_FAILURE); ok && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuMemoryRemapFailed}, v) {
		r.mb.RecordNvidiaGpuMemoryRemapFailedDataPoint(r.now, int64(v))
	}
	if v, ok := r.fields.get(nvml.FI_DEV_RETIRED_SBE); ok && m.NvidiaGpuMemoryRetiredPages.Enabled &&
		r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuMemoryRetiredPages, attrs: metadata.AttributeNvidiaGpuRetiredPagesCauseMultipleSingleBitEcc.String()}, v) {
		r.mb.RecordNvidiaGpuMemoryRetiredPagesDataPoint(r.now, int64(v), metadata.AttributeNvidiaGpuRetiredPagesCauseMultipleSingleBitEcc)
	}
	if v, ok := r.fields.get(nvml.FI_DEV_RETIRED_DBE); ok && m.NvidiaGpuMemoryRetiredPages.Enabled &&
		r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuMemoryRetiredPages, attrs: metadata.AttributeNvidiaGpuRetiredPagesCauseDoubleBitEcc.String()}, v) {
		r.mb.RecordNvidiaGpuMemoryRetiredPagesDataPoint(r.now, int64(v), metadata.AttributeNvidiaGpuRetiredPagesCauseDoubleBitEcc)
	}
	if v, ok := r.fields.get(nvml.FI_DEV_RETIRED_PENDING); ok && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuMemoryRetiredPagesPending}, v) {
		r.mb.RecordNvidiaGpuMemoryRetiredPagesPendingDataPoint(r.now, int64(v))
	}
}
