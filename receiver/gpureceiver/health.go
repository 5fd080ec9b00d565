package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// recordHealth derives hw.status from what this scrape and the XID stream told:
//   - failed: the GPU is lost, a row remap failed, or a fatal XID within the health window;
//   - degraded: uncorrected ECC errors since the driver loaded, a pending row remap or
//     page retirement, or a severe XID within the health window;
//   - ok otherwise.
//
// The XID classes and the window are internal/thresholds', which the XID alerts use too.
func (r *deviceRead) recordHealth() {
	state := metadata.AttributeHwStateOk
	var fatalXID, severeXID bool
	if r.xids != nil {
		fatalXID, severeXID = r.xids.recent(r.dev.uuid)
	}
	flag := func(id uint32) bool { v, ok := r.fields.get(id); return ok && v > 0 }
	switch {
	case r.gone || r.dev.handle == nil || flag(nvml.FI_DEV_REMAPPED_FAILURE) || fatalXID:
		state = metadata.AttributeHwStateFailed
	case flag(nvml.FI_DEV_ECC_DBE_VOL_TOTAL) || flag(nvml.FI_DEV_REMAPPED_PENDING) || flag(nvml.FI_DEV_RETIRED_PENDING) || severeXID:
		state = metadata.AttributeHwStateDegraded
	}
	if state != r.dev.health && r.dev.health != 0 {
		r.logger.Warn("GPU health changed", zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid),
			zap.String("from", r.dev.health.String()), zap.String("to", state.String()))
	}
	r.dev.health = state
	if !r.metrics.HwStatus.Enabled || !r.sendHealth(state) {
		return
	}
	for _, st := range []metadata.AttributeHwState{metadata.AttributeHwStateOk, metadata.AttributeHwStateDegraded, metadata.AttributeHwStateFailed} {
		v := int64(0)
		if st == state {
			v = 1
		}
		r.mb.RecordHwStatusDataPoint(r.now, v, st)
	}
}

// recordXIDs reports the cumulative XID counters of the GPU (a watched GPU with no XID yet
// reports none: there is no code to put on the series) and, opt-in, the last XID's code.
func (r *deviceRead) recordXIDs() {
	if r.xids == nil {
		return
	}
	if r.metrics.NvidiaGpuXidErrors.Enabled {
		for code, n := range r.xids.snapshot(r.dev.uuid) {
			if r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuXidErrors, code: int64(code)}, float64(n)) {
				r.mb.RecordNvidiaGpuXidErrorsDataPoint(r.now, int64(n), int64(code))
			}
		}
	}
	if r.metrics.NvidiaGpuXidLast.Enabled {
		if code, watched := r.xids.lastCode(r.dev.uuid); watched && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuXidLast}, float64(code)) {
			r.mb.RecordNvidiaGpuXidLastDataPoint(r.now, int64(code), int64(code))
		}
	}
}

// sendHealth reports whether this collection sends the GPU's hw.status. The three states
// are one steady group (sent when the state changes and every steady_series_interval),
// but only in a collection that carries the GPU's memory usage: that point keeps the GPU's
// resource in every collection, which gpu_enrich's end-of-series markers rely on. A GPU
// that does not answer (lost, off the bus, its memory unreadable) reports its state in
// every collection, as do GPUs whose memory usage is turned off.
func (r *deviceRead) sendHealth(state metadata.AttributeHwState) bool {
	k := steadyKey{metric: gpuschema.MetricHwStatus}
	if r.memoryUsageSent {
		return r.sendSteady(k, float64(state))
	}
	r.markSteadySent(k, float64(state))
	return true
}
