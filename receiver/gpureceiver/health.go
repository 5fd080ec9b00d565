package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

type xidSeverity int

const (
	xidInformational xidSeverity = iota
	xidSevere                    // the GPU needs attention: degraded
	xidFatal                     // the GPU cannot be trusted: failed
)

// xidSeverities classifies the XIDs that say something about the GPU itself (NVIDIA's
// XID catalogue). Codes not listed (e.g. 13, 31, 43: usually the application's fault)
// are counted but do not change the GPU's health.
var xidSeverities = map[uint64]xidSeverity{
	48:  xidFatal,  // double-bit ECC error
	64:  xidFatal,  // row remapping / page retirement could not be recorded
	79:  xidFatal,  // GPU has fallen off the bus
	95:  xidFatal,  // uncontained ECC error
	119: xidFatal,  // GSP RPC timeout
	120: xidFatal,  // GSP error
	140: xidFatal,  // unrecovered ECC error
	63:  xidSevere, // row remapping / page retirement event
	74:  xidSevere, // NVLink error
	92:  xidSevere, // high single-bit ECC error rate
	94:  xidSevere, // contained ECC error
}

func xidSeverityOf(code uint64) xidSeverity { return xidSeverities[code] }

// recordHealth derives hw.status from what this scrape and the XID stream told:
//   - failed: the GPU is lost, a row remap failed, or a fatal XID in the last 10 minutes;
//   - degraded: uncorrected ECC errors since the driver loaded, a pending row remap or
//     page retirement, or a severe XID in the last 10 minutes;
//   - ok otherwise.
func (r *deviceRead) recordHealth() {
	state := metadata.AttributeHwStateOk
	var fatalXID, severeXID bool
	if r.s.xids != nil {
		fatalXID, severeXID = r.s.xids.recent(r.dev.uuid)
	}
	flag := func(id uint32) bool { v, ok := r.fields.get(id); return ok && v > 0 }
	switch {
	case r.gone || r.dev.handle == nil || flag(nvml.FI_DEV_REMAPPED_FAILURE) || fatalXID:
		state = metadata.AttributeHwStateFailed
	case flag(nvml.FI_DEV_ECC_DBE_VOL_TOTAL) || flag(nvml.FI_DEV_REMAPPED_PENDING) || flag(nvml.FI_DEV_RETIRED_PENDING) || severeXID:
		state = metadata.AttributeHwStateDegraded
	}
	if state != r.dev.health && r.dev.health != 0 {
		r.s.logger.Warn("GPU health changed", zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid),
			zap.String("from", r.dev.health.String()), zap.String("to", state.String()))
	}
	r.dev.health = state
	if !r.metrics().HwStatus.Enabled {
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

// recordXIDs reports the cumulative XID counters of the GPU. A watched GPU with no XID yet
// reports nothing: there is no code to put on the series.
func (r *deviceRead) recordXIDs() {
	if r.s.xids == nil || !r.metrics().NvidiaGpuXidErrors.Enabled {
		return
	}
	for code, n := range r.s.xids.snapshot(r.dev.uuid) {
		r.mb.RecordNvidiaGpuXidErrorsDataPoint(r.now, int64(n), int64(code))
	}
}
