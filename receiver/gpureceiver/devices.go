package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// gpuDevice is one discovered GPU: its handle, its identity (read once) and the state
// that must survive between scrapes.
type gpuDevice struct {
	handle nvml.Device // nil while the GPU is lost and could not be found again
	index  int
	// minor is the device node's minor number (/dev/nvidia<minor>), -1 where NVML cannot
	// tell (e.g. on Windows).
	minor  int
	uuid   string
	model  string
	busID  string
	driver string
	// inventory is read once per discovery, for the resource attributes that are on.
	inventory inventory

	resource pcommon.Resource
	// resources are its MIG instances' and processes' (resourceCache).
	resources resourceCache
	static    staticFacts
	// fieldRequest is the GPU's nvmlDeviceGetFieldValues batch, reused every scrape.
	fieldRequest []nvml.FieldValue
	// fieldValues holds the decoded answers to fieldRequest, reused every scrape.
	fieldValues *fieldValues

	// lastSampleTS is the newest utilization sample seen, per sampling type, so that each
	// scrape averages only the samples taken since the previous one.
	lastSampleTS map[nvml.SamplingType]uint64
	// lastProcessTS is the same for per-process utilization samples.
	lastProcessTS uint64
	// pcieIO counts hw.gpu.io's bytes each way (transmit, receive).
	pcieIO [2]pcieBytes
	// unsupported remembers calls the device answered NOT_SUPPORTED, so they are not
	// repeated every scrape.
	unsupported map[string]bool
	// callErrors counts the calls that answered an unexpected code or NO_PERMISSION, by
	// call and code (nvidia.nvml.errors); the first of each is logged.
	callErrors map[callError]int64
	// gone is set while the device answers "GPU is lost"; goneSince is when it started.
	gone      bool
	goneSince time.Time
	// lookupDelay and nextLookup are the back-off of looking a lost GPU up again by UUID.
	lookupDelay time.Duration
	nextLookup  time.Time
	// mig is the GPU's MIG mode and instances, read again every migRefresh.
	mig migState
	// memoryTotal is the framebuffer's size as last read, 0 until then (MIG profile names
	// are rounded against it); warnedProfile is whether an unnamed MIG profile was logged.
	memoryTotal   uint64
	warnedProfile bool
	// processesHidden is whether NVML listed no process while the memory was in use, at
	// the last look (logged when it starts).
	processesHidden bool
	// health is the state reported last, to log changes once.
	health metadata.AttributeHwState
	// steadySent is what each steady series sent last, and when (steady.go).
	steadySent map[steadyKey]steadyPoint
}

// callError is an NVML call and what it answered.
type callError struct {
	call string
	ret  nvml.Return
}

// inventory is what dcgm-exporter offers as opt-in labels: versions and serial numbers.
type inventory struct {
	brand, serial, vbios, inforomImage, inforomOEM, inforomECC, inforomPower, nvmlVersion string
}

// staticFacts are read once at discovery: they do not change while the driver runs.
type staticFacts struct {
	powerDefaultMW, powerMinMW, powerMaxMW uint32
	tempLimitsC                            [4]uint32 // indexed like temperatureLimits
	pcieMaxGen, pcieMaxWidth               int
	maxSMClockMHz, maxMemClockMHz          uint32
	nvlinks                                int
	// nvlink5: the links count errors with NVLink5's counters (Blackwell and later).
	nvlink5      bool
	gpmSupported bool
}

// identityBuilder starts a resource with the GPU's identity; MIG instances and processes
// add their own attributes to it.
func identityBuilder(mb *metadata.MetricsBuilder, hostName string, d *gpuDevice) *metadata.ResourceBuilder {
	rb := mb.NewResourceBuilder()
	rb.SetHostName(hostName)
	rb.SetHwID(d.uuid)
	rb.SetHwType("gpu")
	rb.SetHwVendor("NVIDIA")
	rb.SetHwModel(d.model)
	rb.SetHwDriverVersion(d.driver)
	rb.SetNvidiaGpuIndex(int64(d.index))
	if d.minor >= 0 {
		rb.SetNvidiaGpuMinorNumber(int64(d.minor))
	}
	rb.SetNvidiaGpuPciBusID(d.busID)
	for _, a := range []struct {
		set   func(string)
		value string
	}{
		{rb.SetNvidiaGpuBrand, d.inventory.brand},
		{rb.SetNvidiaGpuSerial, d.inventory.serial},
		{rb.SetNvidiaGpuVbiosVersion, d.inventory.vbios},
		{rb.SetNvidiaGpuInforomImageVersion, d.inventory.inforomImage},
		{rb.SetNvidiaGpuInforomOemVersion, d.inventory.inforomOEM},
		{rb.SetNvidiaGpuInforomEccVersion, d.inventory.inforomECC},
		{rb.SetNvidiaGpuInforomPowerVersion, d.inventory.inforomPower},
		{rb.SetNvidiaNvmlVersion, d.inventory.nvmlVersion},
	} {
		if a.value != "" {
			a.set(a.value)
		}
	}
	return rb
}

// cString converts a NUL-terminated C char array.
func cString(b []int8) string {
	var sb strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		sb.WriteByte(byte(c))
	}
	return sb.String()
}
