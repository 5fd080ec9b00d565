package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"errors"
	"maps"
	"slices"
	"sort"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/allocation"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

// How an owner was found (nvidia.gpu.attribution.method). A process's cgroup is the truth
// about where it runs; inferring the GPU's holder is a fallback for a cgroup that cannot be
// read, and says so.
const (
	methodCgroup     = "cgroup"
	methodAllocation = "allocation"
	methodInferred   = "inferred"
)

// podRef identifies a pod (and, when known, its container and claim) as far as it is known.
type podRef struct {
	Namespace, Name, UID, Container, ContainerID, Claim string
}

func (p podRef) known() bool { return p.Name != "" || p.UID != "" }

// key identifies the pod among a GPU's users.
func (p podRef) key() string {
	if p.Name != "" {
		return p.Namespace + "/" + p.Name
	}
	return p.UID
}

// owner is who a GPU, a process or a per-user series belongs to. The zero owner is
// unknown, or the host itself.
type owner struct {
	pod                  podRef // a Kubernetes pod
	containerID          string // a container outside Kubernetes (docker run, podman)
	slurmJob, slurmSLUID string // a Slurm job, by ID or (Slurm 26.05+) SLUID
	slurmStep            string
	method               string
}

// resolveAllocation maps the kubelet's answer onto this batch's GPUs.
func (p *gpuEnrichProcessor) resolveAllocation(snap *podresources.Snapshot, b *batch) allocation.Allocation {
	var inv allocation.Inventory
	for _, g := range b.gpus {
		if g.mig {
			// The receiver does not report a MIG device's enumeration index: index-strategy
			// MIG IDs ("<gpu>:<mig>"), which NVIDIA's plugin never hands the kubelet, stay
			// unmapped.
			inv.MIGs = append(inv.MIGs, allocation.MIG{UUID: g.uuid, Parent: g.parent, Index: -1, GPUInstanceID: int(g.migGI), Profile: g.migProfile})
		} else {
			inv.GPUs = append(inv.GPUs, allocation.GPU{UUID: g.uuid, Index: int(g.index), Minor: int(g.minor)})
		}
	}
	var dra allocation.Slices
	var finished allocation.Finished
	if p.src.kube != nil {
		dra, finished = p.src.kube, p.src.kube.Finished
	}
	a := allocation.Resolve(snap, inv, dra, finished)
	if a.Example != "" && a.Example != p.unmappedExample {
		p.logger.Warn("kubelet allocated GPU devices that map to no GPU of this node; their pods are not attributed (see nvidia.gpu.attribution.unmapped_devices)",
			zap.Any("per_resource", a.Unmapped), zap.String("example", a.Example))
	}
	p.unmappedExample = a.Example
	for _, res := range slices.Sorted(maps.Keys(a.Unlisted)) {
		if p.unlistedLogged[res] {
			continue
		}
		p.unlistedLogged[res] = true
		p.logger.Warn("kubelet allocated GPUs under a resource name that is not in kubelet.resource_names; their pods are not attributed (counted in nvidia.gpu.attribution.unmapped_devices): add it to kubelet.resource_names",
			zap.String("resource_name", res), zap.String("device_id", a.Unlisted[res]))
	}
	return a
}

// associate gives each GPU its holders and each process its owner, and writes them on
// their resources. Processes that exited before their cgroup was read leave b.procs; their
// resources are returned for the caller to drop from the batch.
func (p *gpuEnrichProcessor) associate(b *batch, a allocation.Allocation) (exited map[pmetric.ResourceMetrics]bool) {
	byUUID := make(map[string]*gpuView, len(b.gpus))
	for _, g := range b.gpus {
		byUUID[g.uuid] = g
		g.holders = holdersOf(a.ByUUID[g.uuid])
		if p.src.names != nil {
			// The kubelet names the holders; their UID (for k8s_attributes, and on the
			// series for whoever keys on it) comes from the API or the log directory.
			for i := range g.holders {
				if uid, ok := p.src.names.UID(g.holders[i].Namespace, g.holders[i].Name); ok {
					g.holders[i].UID = uid
				}
			}
		}
		if len(g.holders) == 1 {
			p.putOwner(g.rm.Resource().Attributes(), owner{pod: g.holders[0], method: methodAllocation})
		}
	}
	alive := make(map[uint32]bool, len(b.procs))
	running := b.procs[:0]
	for _, proc := range b.procs {
		alive[proc.pid] = true
		g := byUUID[proc.on]
		o, ok := p.attributeProcess(proc, g)
		if !ok {
			// Gone before it could be placed: whose it was is unknown, and the GPU's
			// holder is the one answer known to be unfounded on a busy node. Its series
			// sit out this collection (end_series ends them if they were there before).
			if exited == nil {
				exited = map[pmetric.ResourceMetrics]bool{}
			}
			exited[proc.rm] = true
			if g != nil {
				g.exited = append(g.exited, proc)
			}
			continue
		}
		proc.owner = o
		p.putOwner(proc.rm.Resource().Attributes(), proc.owner)
		if g != nil {
			g.processes = append(g.processes, proc)
		}
		running = append(running, proc)
	}
	b.procs = running
	if p.src.pids != nil {
		p.src.pids.Forget(alive)
	}
	return exited
}

// holdersOf turns the containers holding a device into distinct pods. A pod gets a
// container name only when one of its containers holds the device, and a claim only when
// it holds it through one claim.
func holdersOf(hs []allocation.Holder) []podRef {
	byPod := map[string]*podRef{}
	var order []string
	for _, h := range hs {
		key := h.Namespace + "/" + h.Pod
		ref := byPod[key]
		if ref == nil {
			byPod[key] = &podRef{Namespace: h.Namespace, Name: h.Pod, Container: h.Container, Claim: h.Claim}
			order = append(order, key)
			continue
		}
		if ref.Container != h.Container {
			ref.Container = ""
		}
		if ref.Claim != h.Claim {
			ref.Claim = ""
		}
	}
	sort.Strings(order)
	out := make([]podRef, 0, len(order))
	for _, key := range order {
		out = append(out, *byPod[key])
	}
	return out
}

// attributeProcess finds who a GPU process belongs to. Its cgroup decides: a pod (UID and
// container ID; named through the pod-name source), a container outside Kubernetes, a
// Slurm job, or the host — even on a GPU that a single pod holds. Only when the cgroup
// exists but cannot be read (EACCES, hidepid, no host /proc) is the process given to its
// GPU's single holder, marked inferred. A process that exited between NVML's listing and
// the read (its /proc entry gone) is not: ok is false, and it belongs to no one.
func (p *gpuEnrichProcessor) attributeProcess(proc *processView, g *gpuView) (o owner, ok bool) {
	var holders []podRef
	if g != nil {
		holders = g.holders
	}
	if p.src.pids == nil {
		return inferOwner(holders), true
	}
	loc, err := p.src.pids.Lookup(proc.pid)
	switch {
	case errors.Is(err, cgroup.ErrProcessGone):
		return owner{}, false
	case err != nil:
		p.logger.Debug("Cannot read a GPU process's cgroup", zap.Uint32("pid", proc.pid), zap.Error(err))
		return inferOwner(holders), true
	}
	return p.ownerAt(loc, holders), true
}

// ownerAt is the owner a process's cgroup location names.
func (p *gpuEnrichProcessor) ownerAt(loc cgroup.Location, holders []podRef) owner {
	switch {
	case loc.InPod():
		pod := podRef{UID: loc.PodUID, ContainerID: loc.ContainerID}
		if p.src.names != nil {
			if named, ok := p.src.names.Lookup(loc.PodUID); ok {
				pod.Namespace, pod.Name = named.Namespace, named.Name
				pod.Container = named.ContainerName(loc.ContainerID)
				// A static pod's cgroup has its config hash; the series carry the UID
				// its GPUs' do, the API's, so that k8s_attributes associates both.
				if named.APIUID != "" {
					pod.UID = named.APIUID
				}
			}
		}
		if pod.Name == "" {
			// Not named by UID, but a holder of the GPU was given this UID by its name:
			// the same pod, which must not become two.
			for _, h := range holders {
				if h.UID != "" && h.UID == pod.UID {
					pod.Namespace, pod.Name = h.Namespace, h.Name
				}
			}
		}
		for _, h := range holders {
			if h.Namespace == pod.Namespace && h.Name == pod.Name {
				pod.Claim = h.Claim
			}
		}
		return owner{pod: pod, method: methodCgroup}
	case loc.ContainerID != "":
		return owner{containerID: loc.ContainerID, method: methodCgroup}
	case loc.SlurmJob != "" || loc.SlurmSLUID != "":
		return owner{slurmJob: loc.SlurmJob, slurmSLUID: loc.SlurmSLUID, slurmStep: loc.SlurmStep, method: methodCgroup}
	default:
		return owner{} // the host's own: a service, a user's session
	}
}

// inferOwner gives a process whose cgroup cannot be read to the only pod holding its GPU
// (never the container: the pod may have others), and says it was inferred.
func inferOwner(holders []podRef) owner {
	if len(holders) != 1 {
		return owner{}
	}
	h := holders[0]
	return owner{pod: podRef{Namespace: h.Namespace, Name: h.Name, Claim: h.Claim}, method: methodInferred}
}

// ownerKeys are the resource attributes an owner is written under; a per-user resource
// starts from its GPU's attributes without them.
var ownerKeys = []string{"k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid", "k8s.container.name", "container.id",
	"k8s.resourceclaim.name", "slurm.job.id", "slurm.job.sluid", "slurm.job.step", "nvidia.gpu.attribution.method"}

// putOwner writes an owner's attributes, each only where the configuration's
// resource_attributes leaves it enabled. It writes into attrs directly rather than through
// the generated resource builder: this runs for every GPU, process and pod of every batch.
func (p *gpuEnrichProcessor) putOwner(attrs pcommon.Map, o owner) {
	ra := p.cfg.ResourceAttributes
	containerID := o.pod.ContainerID
	if o.containerID != "" {
		containerID = o.containerID
	}
	for _, a := range [...]struct {
		key     string
		enabled bool
		value   string
	}{
		{"k8s.namespace.name", ra.K8sNamespaceName.Enabled, o.pod.Namespace},
		{"k8s.pod.name", ra.K8sPodName.Enabled, o.pod.Name},
		{"k8s.pod.uid", ra.K8sPodUID.Enabled, o.pod.UID},
		{"k8s.container.name", ra.K8sContainerName.Enabled, o.pod.Container},
		{"container.id", ra.ContainerID.Enabled, containerID},
		{"k8s.resourceclaim.name", ra.K8sResourceclaimName.Enabled, o.pod.Claim},
		{"slurm.job.id", ra.SlurmJobID.Enabled, o.slurmJob},
		{"slurm.job.sluid", ra.SlurmJobSluid.Enabled, o.slurmSLUID},
		{"slurm.job.step", ra.SlurmJobStep.Enabled, o.slurmStep},
		{"nvidia.gpu.attribution.method", ra.NvidiaGpuAttributionMethod.Enabled, o.method},
	} {
		if a.enabled && a.value != "" {
			attrs.PutStr(a.key, a.value)
		}
	}
}
