package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// readDeps is what reading a GPU needs from the rest of the receiver. The scraper hands
// it to every read (kubeletstats style), so that a read reaches nothing else.
type readDeps struct {
	logger  *zap.Logger
	clock   func() time.Time
	metrics *metadata.MetricsConfig
	mb      *metadata.MetricsBuilder
	// symbols tells which NVML entry points the driver has.
	symbols interface{ HasSymbol(string) bool }
	// xids counts XID events per GPU; nil when the driver offers no events.
	xids *xidWatcher
	gpm  *nvmlGPM
	// activities are the profiling activities to report.
	activities []gpmActivity
	// processEngines are the engines whose per-process share is reported.
	processEngines engineSelection
	// hostName goes on every resource.
	hostName string
	// procNames names GPU processes.
	procNames *processNames
	// migModeAttribute is whether GPU resources carry nvidia.gpu.mig.enabled.
	migModeAttribute bool
	// steady is when an unchanged steady series is sent again (steady.go).
	steady steadyPolicy
}

// deviceRead is one scrape of one GPU. It classifies every NVML answer in one place:
// success, "no such value here" (skipped quietly), "the GPU is gone" (the rest of this GPU
// is skipped), or an unexpected error (reported, rate-limited in the log).
type deviceRead struct {
	readDeps
	lib    nvml.Interface
	dev    *gpuDevice
	now    pcommon.Timestamp
	fields *fieldValues
	// gpmValues is this interval's GPM reading of the whole GPU, nil without one.
	gpmValues *gpmValues
	errs      []error
	failed    int
	gone      bool
	// memoryUsageSent is whether this collection recorded the GPU's hw.gpu.memory.usage,
	// which lets hw.status be held back (sendHealth).
	memoryUsageSent bool
	// rates caches nvmlDeviceGetUtilizationRates, which answers two metrics at once.
	rates struct {
		read, ok bool
		value    nvml.Utilization
	}
	// gpuEngines says which video engines this collection found on the GPU
	// (recordUtilization); known is false when it did not look (hw.gpu.utilization off,
	// MIG mode).
	gpuEngines struct{ known, encoder, decoder bool }
}

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
	r.recordXIDs()
	r.recordHealth()
	r.mb.EmitForResource(metadata.WithResource(r.gpuResource()))
	migs := r.recordMIG()
	r.recordProcesses(migs)
	r.dev.resources.forgetUnseen()
}

// skip is true when a call should not be made: the GPU is gone, or the call is known to be
// unsupported on it.
func (r *deviceRead) skip(call string) bool {
	return r.gone || r.dev.unsupported[call]
}

// ok classifies an NVML answer and reports whether its value can be used.
func (r *deviceRead) ok(call string, ret nvml.Return) bool {
	if ret == nvml.SUCCESS {
		delete(r.dev.warned, call)
		return true
	}
	switch {
	case r.gone:
	case nvmlclient.IsDeviceGone(ret):
		r.gone = true
		r.failed++
		r.errs = append(r.errs, nvmlclient.NewError(call, ret))
		if !r.dev.gone {
			r.logger.Error("GPU stopped answering; it reports hw.status failed until it answers again",
				zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid), zap.String("nvml_error", nvmlclient.ReturnName(ret)))
			r.dev.gone = true
			r.dev.goneSince = r.clock()
		}
	case ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND:
		r.dev.unsupported[call] = true
	case nvmlclient.IsNoData(ret):
	default:
		r.failed++
		r.errs = append(r.errs, nvmlclient.NewError(call, ret))
		if r.dev.warned[call] != ret {
			r.logger.Warn("NVML call failed", zap.Int("gpu", r.dev.index), zap.String("call", call),
				zap.String("nvml_error", nvmlclient.ReturnName(ret)))
			r.dev.warned[call] = ret
		}
	}
	return false
}

func (r *deviceRead) err() error {
	if len(r.errs) == 0 {
		return nil
	}
	return fmt.Errorf("GPU %d (%s): %w", r.dev.index, r.dev.uuid, errors.Join(r.errs...))
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

// identity starts a resource with the GPU's identity; MIG instances and processes add
// their own attributes to it.
func (r *deviceRead) identity() *metadata.ResourceBuilder {
	return identityBuilder(r.mb, r.hostName, r.dev)
}
