package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const (
	callGetMigMode            = "nvmlDeviceGetMigMode"
	callGetMaxMigDeviceCount  = "nvmlDeviceGetMaxMigDeviceCount"
	callGetMigDeviceHandle    = "nvmlDeviceGetMigDeviceHandleByIndex"
	callMigGetUUID            = "nvmlDeviceGetUUID(mig)"
	callMigGetMemoryInfo      = "nvmlDeviceGetMemoryInfo_v2(mig)"
	callMigGetGpuInstanceID   = "nvmlDeviceGetGpuInstanceId(mig)"
	callMigGetComputeInstance = "nvmlDeviceGetComputeInstanceId(mig)"
	callMigGpmSampleGet       = "nvmlGpmSampleGet(mig)"
	// migRefresh is how often a MIG-enabled GPU's mode and instances are read again:
	// instances come and go (mig-parted, DRA) far less often than scrapes. An instance
	// that stops answering, or a GPU whose device-level utilization stops being supported
	// (MIG was turned on), is looked at again at the next scrape.
	migRefresh = time.Minute
)

// migState is what is known of a GPU's MIG mode and instances between scrapes.
type migState struct {
	enabled bool
	// checked is when the mode (and, in MIG mode, the instances) were read.
	checked time.Time
	// recheck asks for the mode to be read again at the next scrape.
	recheck bool
	// maxDevices is how many MIG devices the GPU can hold (static), 0 until read.
	maxDevices int
	instances  []*migInstance
	// profiles names the GPU's GPU instances' profiles, by GPU instance id, and
	// profileInfos are the GPU's profiles by enum (migprofile.go); both are read again
	// when the mode changes.
	profiles     map[int]string
	profileInfos map[int]nvml.GpuInstanceProfileInfo
}

// migInstance is one MIG device - a compute instance of a GPU instance - as last listed.
type migInstance struct {
	handle      nvml.Device
	uuid        string
	gpuInstance int
	compute     int
	profile     string
	// carriesMemory: the GPU instance's memory is reported once, on its first compute
	// instance; compute instances share their GPU instance's memory, and reporting it on
	// each would count it several times over.
	carriesMemory bool
}

// describe adds the instance's identity to a resource that starts from its parent GPU's:
// hw.id becomes the MIG UUID and hw.parent the GPU's.
func (m *migInstance) describe(rb *metadata.ResourceBuilder, parent *gpuDevice) {
	rb.SetHwID(m.uuid)
	rb.SetHwParent(parent.uuid)
	rb.SetNvidiaMigUUID(m.uuid)
	rb.SetNvidiaMigGpuInstanceID(int64(m.gpuInstance))
	rb.SetNvidiaMigComputeInstanceID(int64(m.compute))
	if m.profile != "" {
		rb.SetNvidiaMigProfile(m.profile)
	}
}

// noteMIGHint marks a GPU for a MIG mode check when a device-level utilization call
// answers NOT_SUPPORTED on a GPU not known to be in MIG mode: that is how turning MIG on
// shows, so non-MIG GPUs need no periodic mode check.
func (r *deviceRead) noteMIGHint(ret nvml.Return) {
	if ret == nvml.ERROR_NOT_SUPPORTED && !r.dev.mig.enabled {
		r.dev.mig.recheck = true
	}
}

// migHintsWork reports whether noteMIGHint can see MIG being turned on: some device-level
// utilization is read from NVML's samples each scrape.
func (r *deviceRead) migHintsWork() bool {
	return r.metrics.NvidiaGpuMemoryCopyUtilization.Enabled ||
		r.metrics.HwGpuUtilization.Enabled && !r.dev.static.gpmSupported
}

// recordMIG emits one resource per MIG device of a MIG-enabled GPU: its GPU instance's
// framebuffer (on the first compute instance of each GPU instance) and, where the GPU has
// GPM, its utilization and activity. The parent keeps its device-level metrics. It returns
// the instances it reported, for their processes.
func (r *deviceRead) recordMIG() []*migInstance {
	if r.gone || r.dev.handle == nil {
		return nil
	}
	r.refreshMIG()
	if !r.dev.mig.enabled {
		return nil
	}
	var out []*migInstance
	for _, mi := range r.dev.mig.instances {
		if r.gone {
			break
		}
		if mi.carriesMemory {
			// _v2: the driver's reservation apart from Used, as on the whole GPU (and as
			// DCGM reports a GPU instance).
			mem, ret := mi.handle.GetMemoryInfo_v2()
			if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
				r.dev.mig.recheck = true // destroyed since it was listed
				continue
			}
			if r.ok(callMigGetMemoryInfo, ret) {
				r.mb.RecordHwGpuMemoryLimitDataPoint(r.now, int64(mem.Total))
				r.mb.RecordHwGpuMemoryUsageDataPoint(r.now, int64(mem.Used))
				r.mb.RecordNvidiaGpuMemoryFreeDataPoint(r.now, int64(mem.Free))
				if r.metrics.NvidiaGpuMemoryReserved.Enabled {
					r.mb.RecordNvidiaGpuMemoryReservedDataPoint(r.now, int64(mem.Reserved))
				}
			}
		}
		if r.dev.static.gpmSupported && !r.skip(callMigGpmSampleGet) {
			v, ok, ret := r.gpm.Read(r.dev.handle, mi.uuid, mi.handle)
			if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
				r.dev.mig.recheck = true
			} else if r.ok(callMigGpmSampleGet, ret) && ok {
				if x, has := v.activity[nvml.GPM_METRIC_GRAPHICS_UTIL]; has && r.metrics.HwGpuUtilization.Enabled {
					r.mb.RecordHwGpuUtilizationDataPoint(r.now, x, metadata.AttributeHwGpuTaskGeneral)
				}
				r.recordActivity(v)
			}
		}
		out = append(out, mi)
		res := r.dev.resources.get(resourceSubject{mig: mi}, func() pcommon.Resource {
			rb := r.identity()
			mi.describe(rb, r.dev)
			return rb.Emit()
		})
		r.mb.EmitForResource(metadata.WithResource(res))
	}
	return out
}

// refreshMIG reads the MIG mode, and in MIG mode the instances, when they are due: on the
// first scrape, every migRefresh in MIG mode (or on every GPU where a hint cannot show
// MIG being turned on), and when a hint asks for it.
func (r *deviceRead) refreshMIG() {
	st := &r.dev.mig
	now := r.clock()
	periodic := st.enabled || !r.migHintsWork()
	due := st.checked.IsZero() || st.recheck || periodic && now.Sub(st.checked) >= migRefresh
	if !due || r.skip(callGetMigMode) {
		return
	}
	st.recheck, st.checked = false, now
	mode, _, ret := r.dev.handle.GetMigMode()
	enabled := r.ok(callGetMigMode, ret) && mode == nvml.DEVICE_MIG_ENABLE
	if enabled != st.enabled {
		// Device-level calls answer differently in and out of MIG mode: ask them again.
		clear(r.dev.unsupported)
		st.profiles, st.profileInfos = nil, nil
	}
	st.enabled = enabled
	var instances []*migInstance
	if enabled {
		instances = r.listMIGInstances()
	}
	// GPM samples of instances that are gone are released.
	listed := map[string]bool{}
	for _, mi := range instances {
		listed[mi.uuid] = true
	}
	for _, mi := range st.instances {
		if !listed[mi.uuid] {
			r.gpm.ForgetInstance(r.dev.handle, mi.uuid)
		}
	}
	st.instances = instances
}

// listMIGInstances lists the GPU's MIG devices. A device already known by its UUID keeps
// what was read of it.
func (r *deviceRead) listMIGInstances() []*migInstance {
	st := &r.dev.mig
	if st.maxDevices == 0 {
		n, ret := r.dev.handle.GetMaxMigDeviceCount()
		if !r.ok(callGetMaxMigDeviceCount, ret) {
			return nil
		}
		st.maxDevices = n
	}
	known := map[string]*migInstance{}
	for _, mi := range st.instances {
		known[mi.uuid] = mi
	}
	var out, added []*migInstance
	for i := 0; i < st.maxDevices && !r.gone; i++ {
		h, ret := r.dev.handle.GetMigDeviceHandleByIndex(i)
		if ret == nvml.ERROR_NOT_FOUND || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue // an empty slot
		}
		if !r.ok(callGetMigDeviceHandle, ret) {
			continue
		}
		uuid, ret := h.GetUUID()
		if !r.ok(callMigGetUUID, ret) {
			continue
		}
		if mi := known[uuid]; mi != nil {
			mi.handle = h
			out = append(out, mi)
			continue
		}
		gi, ret := h.GetGpuInstanceId()
		if !r.ok(callMigGetGpuInstanceID, ret) {
			continue
		}
		ci, ret := h.GetComputeInstanceId()
		if !r.ok(callMigGetComputeInstance, ret) {
			ci = 0
		}
		mi := &migInstance{handle: h, uuid: uuid, gpuInstance: gi, compute: ci}
		out = append(out, mi)
		added = append(added, mi)
	}
	// GPU instance ids are reused by a new layout: a name is kept only for a GPU instance
	// whose MIG devices are listed again.
	st.profiles = map[int]string{}
	for _, mi := range out {
		if known[mi.uuid] != nil {
			st.profiles[mi.gpuInstance] = mi.profile
		}
	}
	for _, mi := range added {
		mi.profile = r.migProfile(mi.handle, mi.gpuInstance)
	}
	// The memory of each GPU instance goes with its lowest compute instance.
	first := map[int]*migInstance{}
	for _, mi := range out {
		if f := first[mi.gpuInstance]; f == nil || mi.compute < f.compute {
			first[mi.gpuInstance] = mi
		}
	}
	for _, mi := range out {
		mi.carriesMemory = first[mi.gpuInstance] == mi
	}
	return out
}

// migProfile names a MIG device's profile once per GPU instance (migprofile.go).
func (r *deviceRead) migProfile(h nvml.Device, gpuInstance int) string {
	st := &r.dev.mig
	if name, ok := st.profiles[gpuInstance]; ok {
		return name
	}
	name := r.nameMIGProfile(h, gpuInstance)
	if name == "" && !r.dev.warnedProfile {
		r.dev.warnedProfile = true
		r.logger.Warn("Cannot name the profile of a MIG instance; its series carry no nvidia.mig.profile. "+
			"The driver has no profile names to give (nvmlDeviceGetGpuInstanceProfileInfoV, R515 and later) and the agent "+
			"lacks NVIDIA's MIG monitor capability (NVIDIA_MIG_MONITOR_DEVICES=all, which the container toolkit grants only with CAP_SYS_ADMIN)",
			zap.Int("gpu", r.dev.index), zap.Int("gpu_instance", gpuInstance))
	}
	st.profiles[gpuInstance] = name
	return name
}
