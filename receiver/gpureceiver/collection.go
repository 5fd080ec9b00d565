package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// One GPU's collection, in order: each subsystem file reads its part through the
// deviceRead it is handed (device_read.go), and this file decides what comes when and on
// which resource.

// newDeviceRead starts one GPU's collection at now.
func newDeviceRead(deps readDeps, lib nvml.Interface, d *gpuDevice, now pcommon.Timestamp) *deviceRead {
	return &deviceRead{readDeps: deps, lib: lib, dev: d, now: now}
}

// recordAll reads every subsystem in turn, each on the resource it belongs to: the GPU's
// own metrics first, then its MIG instances and its processes. Each subsystem stops early
// once the GPU is gone. A GPU without a handle (lost, not found again) only reports its
// health: failed.
func (r *deviceRead) recordAll() {
	if r.dev.handle != nil {
		r.readFields()
		r.readGPM()
		r.recordUtilization()
		r.recordMemory()
		r.recordMemoryErrors()
		r.recordTemperature()
		r.recordPower()
		r.recordClocks()
		r.recordClockEvents()
		r.recordPCIe()
		r.recordNVLink()
		r.recordProfiling()
		if !r.gone && r.dev.gone {
			r.logger.Info("GPU answers again", zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid))
			r.dev.gone = false
		}
	}
	r.listProcesses()
	r.recordXIDs()
	r.recordHealth()
	r.recordCallErrors()
	r.mb.EmitForResource(metadata.WithResource(r.gpuResource()))
	migs := r.recordMIG()
	r.recordProcesses(migs)
	r.dev.resources.forgetUnseen()
}

// recordCallErrors reports the failed calls counted so far; a GPU without any reports none.
func (r *deviceRead) recordCallErrors() {
	if !r.metrics.NvidiaNvmlErrors.Enabled {
		return
	}
	for key, n := range r.dev.callErrors {
		r.mb.RecordNvidiaNvmlErrorsDataPoint(r.now, n, key.call, nvmlclient.ReturnName(key.ret))
	}
}

// gpuResource is the GPU's own resource: its identity and, when that attribute is on,
// whether it is in MIG mode (read first if due).
func (r *deviceRead) gpuResource() pcommon.Resource {
	if !r.migModeAttribute {
		return r.dev.resource
	}
	if !r.gone && r.dev.handle != nil {
		r.refreshMIG()
	}
	rb := r.identity()
	rb.SetNvidiaGpuMigEnabled(r.dev.mig.enabled)
	return rb.Emit()
}
