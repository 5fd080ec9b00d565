package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
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
	// processListUnsafe: the driver's process list cannot be read (535.43-535.98), so it is
	// not asked for; logged once by the scraper.
	processListUnsafe bool
	// hiddenProcessesCause names the likely reason when NVML lists no process on a busy GPU.
	hiddenProcessesCause string
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
	gone      bool
	// memoryUsageSent is whether this collection recorded the GPU's hw.gpu.memory.usage,
	// which lets hw.status be held back (sendHealth).
	memoryUsageSent bool
	// memoryUsed is the framebuffer in use (the driver's reservation excluded where the
	// driver tells it apart), when memoryRead.
	memoryUsed          uint64
	memoryRead          bool
	memoryReservedApart bool
	// procs are the processes listed outside MIG mode, procsListed whether a list call
	// answered (listProcesses).
	procs       []gpuProcess
	procsListed bool
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

// skip is true when a call should not be made: the GPU is gone, or the call is known to be
// unsupported on it.
func (r *deviceRead) skip(call string) bool {
	return r.gone || r.dev.unsupported[call]
}

// ok classifies an NVML answer and reports whether its value can be used.
//
// Nothing here becomes a scrape error: the collector logs those at Error level every
// collection, and a driver that keeps answering the same code would fill the log. A lost
// GPU is logged once (and reports hw.status failed); an unexpected code, or a privilege the
// agent lacks, is counted per call and code (nvidia.nvml.errors) and logged once per GPU.
func (r *deviceRead) ok(call string, ret nvml.Return) bool {
	if ret == nvml.SUCCESS {
		return true
	}
	switch {
	case r.gone:
	case nvmlclient.IsDeviceGone(ret):
		r.gone = true
		if !r.dev.gone {
			r.logger.Error("GPU stopped answering; it reports hw.status failed until it answers again",
				zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid), zap.String("nvml_error", nvmlclient.ReturnName(ret)))
			r.dev.gone = true
			r.dev.goneSince = r.clock()
		}
	case ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND:
		r.dev.unsupported[call] = true
	case ret == nvml.ERROR_NO_PERMISSION:
		// The agent's privileges do not change while it runs: the call is not made again.
		r.dev.unsupported[call] = true
		r.countError(call, ret, "NVML refuses this call without a privilege the agent lacks (for MIG queries: NVIDIA's MIG monitor capability, which the container toolkit grants with NVIDIA_MIG_MONITOR_DEVICES=all to a container holding CAP_SYS_ADMIN); what it would answer is missing, not zero, and it is not asked again")
	case nvmlclient.IsNoData(ret):
	default:
		r.countError(call, ret, "NVML call failed; counted in nvidia.nvml.errors, logged once per GPU, call and code")
	}
	return false
}

// countError counts a failed call and logs the first failure of each call and code.
func (r *deviceRead) countError(call string, ret nvml.Return, msg string) {
	key := callError{call: call, ret: ret}
	if r.dev.callErrors[key] == 0 {
		r.logger.Warn(msg, zap.Int("gpu", r.dev.index), zap.String("uuid", r.dev.uuid), zap.String("call", call),
			zap.String("nvml_error", nvmlclient.ReturnName(ret)))
	}
	r.dev.callErrors[key]++
}

// identity starts a resource with the GPU's identity; MIG instances and processes add
// their own attributes to it.
func (r *deviceRead) identity() *metadata.ResourceBuilder {
	return identityBuilder(r.mb, r.hostName, r.dev)
}
