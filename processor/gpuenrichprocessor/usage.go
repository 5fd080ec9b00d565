package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"slices"
	"sort"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/tracking"
)

// user is one user of a GPU (or MIG instance) — a pod or a Slurm job — and what its own
// processes do there.
type user struct {
	kind  tracking.UserKind
	id    string
	owner owner

	mem, sm       float64
	hasMem, hasSM bool
	fromProcesses bool
}

// gpuUsers lists a GPU's users: pods and Slurm jobs its processes belong to, and the pods
// the kubelet says hold it (a pod may hold a GPU and run nothing on it). Processes of
// anyone else — the host, containers outside Kubernetes, unknown, exited before they could
// be placed — are summed in others: they take their share of the GPU's energy, and count
// for no pod.
func gpuUsers(g *gpuView) (users []*user, others *user) {
	byKey := map[tracking.Key]*user{}
	others = &user{}
	add := func(u *user, proc *processView) {
		u.fromProcesses = true
		if proc.hasMem {
			u.mem, u.hasMem = u.mem+proc.mem, true
		}
		if proc.hasSM {
			u.sm, u.hasSM = u.sm+proc.sm, true
		}
	}
	for _, proc := range g.processes {
		var key tracking.Key
		switch o := proc.owner; {
		case o.pod.known():
			key = tracking.UserKey(g.uuid, tracking.Pod, o.pod.key())
		case o.slurmJob != "" || o.slurmSLUID != "":
			key = tracking.UserKey(g.uuid, tracking.SlurmJob, o.slurmJob+o.slurmSLUID)
		default:
			add(others, proc)
			continue
		}
		u := byKey[key]
		if u == nil {
			u = &user{kind: key.UserKind, id: key.UserID, owner: ownerOfUser(proc.owner)}
			byKey[key] = u
		} else {
			mergeOwner(&u.owner, proc.owner)
		}
		add(u, proc)
	}
	for _, proc := range g.exited {
		add(others, proc) // it used the GPU until it exited, for no known pod
	}
	unnamed := false // a process runs in a pod known by its UID only
	for _, u := range byKey {
		unnamed = unnamed || (u.kind == tracking.Pod && u.owner.pod.Name == "")
	}
	for _, h := range g.holders {
		key := tracking.UserKey(g.uuid, tracking.Pod, h.key())
		if u := byKey[key]; u != nil {
			if u.owner.pod.Claim == "" {
				u.owner.pod.Claim = h.Claim
			}
			continue
		}
		if unnamed && h.UID == "" {
			// The kubelet knows the holder by name, the cgroup a process's pod by UID, and
			// no source here (kube_api, pod_logs_dir) links the two: the holder may be that
			// very pod. A series of its own would show one pod's GPU twice — its processes'
			// values under the UID, and 0 under the name — so the UID's series stands alone
			// (k8s_attributes names it).
			continue
		}
		byKey[key] = &user{kind: tracking.Pod, id: key.UserID, owner: owner{pod: h, method: methodAllocation}}
	}
	keys := make([]tracking.Key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].UserKind != keys[j].UserKind {
			return keys[i].UserKind < keys[j].UserKind
		}
		return keys[i].UserID < keys[j].UserID
	})
	for _, k := range keys {
		users = append(users, byKey[k])
	}
	switch listed := len(g.processes) + len(g.exited); {
	case listed == 0 && len(users) == 1 && users[0].kind == tracking.Pod:
		// One pod holds the GPU and NVML lists no process at all (processes in other PID
		// namespaces are invisible on some setups): the pod's values are the GPU's.
		only := users[0]
		only.mem, only.hasMem = g.memUsed, g.hasMem
		only.sm, only.hasSM = g.util, g.hasUtil
	case listed > 0:
		// Processes are listed (one that exited counts: the GPU's values still hold its
		// memory, which is no holder's): a holder running none of them uses nothing.
		for _, u := range users {
			if !u.fromProcesses {
				u.hasMem, u.hasSM = true, true
			}
		}
	}
	return users, others
}

// ownerOfUser is a process's owner as the owner of its pod's or job's series: the
// process-level details (its step) do not carry over.
func ownerOfUser(o owner) owner {
	o.slurmStep = ""
	return o
}

// mergeOwner keeps what all of a user's processes agree on: a container (of a pod) only
// when they all run in it, "inferred" only when none was observed.
func mergeOwner(into *owner, o owner) {
	if into.pod.Container != o.pod.Container {
		into.pod.Container = ""
	}
	if into.pod.ContainerID != o.pod.ContainerID {
		into.pod.ContainerID = ""
	}
	if into.pod.UID == "" {
		into.pod.UID = o.pod.UID
	}
	if o.method == methodCgroup {
		into.method = methodCgroup
	}
}

// energyShares splits a GPU's energy between its users and everyone else on it: by SM
// utilization share; by framebuffer share when no process is busy; equally between the
// users when nothing is known.
func energyShares(users []*user, others *user) []float64 {
	shares := make([]float64, len(users))
	smSum, memSum := others.sm, others.mem
	for _, u := range users {
		smSum += u.sm
		memSum += u.mem
	}
	for i, u := range users {
		switch {
		case smSum > 0:
			shares[i] = u.sm / smSum
		case memSum > 0:
			shares[i] = u.mem / memSum
		case !others.fromProcesses:
			shares[i] = 1 / float64(len(users))
		}
	}
	return shares
}

// deriveUsers adds one resource per user of the GPU: the GPU's identity plus the user's,
// with the user's own memory, utilization and energy — never the GPU's values copied to
// every pod of a shared GPU, never a host process's counted for a pod.
func (p *gpuEnrichProcessor) deriveUsers(g *gpuView, ts pcommon.Timestamp, out pmetric.ResourceMetricsSlice, flags *gpuOutputs) {
	users, others := gpuUsers(g)
	if len(users) == 0 {
		if g.hasEnergy && !g.mig {
			p.tracker.GPUEnergyDelta(tracking.GPUKey(g.uuid), g.energy, ts.AsTime()) // keep the baseline current
		}
		return
	}
	var delta float64
	hasEnergy := g.hasEnergy && !g.mig // MIG instances have no energy counter of their own
	if hasEnergy {
		delta = p.tracker.GPUEnergyDelta(tracking.GPUKey(g.uuid), g.energy, ts.AsTime())
	}
	shares := energyShares(users, others)
	for i, u := range users {
		key := tracking.UserKey(g.uuid, u.kind, u.id)
		start := p.startTime
		var joules float64
		if hasEnergy {
			var since time.Time
			joules, since = p.tracker.AddEnergy(key, delta*shares[i], ts.AsTime())
			start = pcommon.NewTimestampFromTime(since)
		}
		switch u.kind {
		case tracking.Pod:
			p.recordPod(g, u, key, ts, joules, hasEnergy, flags)
		case tracking.SlurmJob:
			p.recordJob(u, ts, joules, hasEnergy)
		}
		// The GPU's identity without its holder, then this user as owner. The scratch
		// resource is reused: WithResource copies it into the emitted series.
		res := p.userResource.Attributes()
		res.Clear()
		res.EnsureCapacity(g.rm.Resource().Attributes().Len() + len(ownerKeys))
		for k, v := range g.rm.Resource().Attributes().All() {
			if !slices.Contains(ownerKeys, k) {
				v.CopyTo(res.PutEmpty(k))
			}
		}
		p.putOwner(res, u.owner)
		emitted := p.mb.Emit(metadata.WithResource(p.userResource), metadata.WithStartTimeOverride(start))
		emitted.ResourceMetrics().MoveAndAppendTo(out)
	}
}

func (p *gpuEnrichProcessor) recordPod(g *gpuView, u *user, key tracking.Key, ts pcommon.Timestamp, joules float64, hasEnergy bool, flags *gpuOutputs) {
	if u.hasMem {
		p.mb.RecordNvidiaGpuPodMemoryUsageDataPoint(ts, int64(u.mem))
	}
	if u.hasSM {
		p.mb.RecordNvidiaGpuPodUtilizationDataPoint(ts, u.sm)
	}
	if hasEnergy {
		p.mb.RecordNvidiaGpuPodEnergyDataPoint(ts, joules)
	}
	if u.hasMem && g.hasLimit {
		samples := p.tracker.Observe(key, tracking.Sample{T: ts.AsTime(), Util: u.sm, HasUtil: u.hasSM, Memory: u.mem})
		p.mb.RecordNvidiaGpuPodMemoryGrowthRateDataPoint(ts, tracking.Slope(tracking.Within(samples, p.cfg.Leak.Window)))
		leak := asInt(tracking.LeakSuspected(samples, g.memLimit, p.leakRule()))
		if flags.send(outputKey{metric: metadata.MetricsInfo.NvidiaGpuPodMemoryLeakSuspected.Name, user: u.owner}, leak) {
			p.mb.RecordNvidiaGpuPodMemoryLeakSuspectedDataPoint(ts, leak)
		}
	}
}

func (p *gpuEnrichProcessor) recordJob(u *user, ts pcommon.Timestamp, joules float64, hasEnergy bool) {
	if u.hasMem {
		p.mb.RecordNvidiaGpuJobMemoryUsageDataPoint(ts, int64(u.mem))
	}
	if u.hasSM {
		p.mb.RecordNvidiaGpuJobUtilizationDataPoint(ts, u.sm)
	}
	if hasEnergy {
		p.mb.RecordNvidiaGpuJobEnergyDataPoint(ts, joules)
	}
}
