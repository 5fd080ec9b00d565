package gpuenrichprocessor

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

const (
	uidTrainer = "5fb5b359-2df7-421a-8b41-2a10445bd33c"
	idTrainer  = "e869c6fdbb0da801b07940cc75e5d5910e79b680458a96aac553bbae03a3abde"
)

// exclusiveWithHostProcess: on the shared-gpu scenario's GPU 0, pod ml/trainer holds the
// GPU alone; process 41001 runs in it, 41002 is the host's (a display server), 41003 a
// user's plain docker container.
func exclusiveWithHostProcess(uuids []string, clock *fakeClock) sources {
	snap := &podresources.Snapshot{Taken: clock.Now(), Pods: []podresources.Pod{{Namespace: "ml", Name: "trainer", Containers: []podresources.Container{
		{Name: "pytorch", Devices: []podresources.Device{{ResourceName: "nvidia.com/gpu", ID: uuids[0]}}},
		{Name: "sidecar"},
	}}}}
	return sources{
		pods: &fakePods{snap: snap},
		pids: fakePIDs{
			41001: {PodUID: uidTrainer, ContainerID: idTrainer},
			41002: {},
			41003: {ContainerID: "673033715c3cd6f574b9ce8f7dbb34a780134c04f3dbb6e8c9dd4e1390e63495", Runtime: "docker"},
		},
		names: fakeNames{uidTrainer: {Namespace: "ml", Name: "trainer", Containers: []string{"pytorch", "sidecar"}, ContainerIDs: map[string]string{idTrainer: "pytorch"}}},
	}
}

// procByPID is the process's resource with values (not the end markers of a series that
// changed).
func procByPID(t *testing.T, md pmetric.Metrics, pid string) pmetric.ResourceMetrics {
	t.Helper()
	var live []pmetric.ResourceMetrics
	for _, rm := range resources(md, map[string]string{"process.pid": pid}) {
		if !onlyEndMarkers(rm) {
			live = append(live, rm)
		}
	}
	require.Len(t, live, 1, "process %s", pid)
	return live[0]
}

func onlyEndMarkers(rm pmetric.ResourceMetrics) bool {
	only := true
	pdatawalk.EachPoint(rm, func(_ string, dp pmetric.NumberDataPoint) {
		if !dp.Flags().NoRecordedValue() {
			only = false
		}
	})
	return only
}

// The GPU's only holder never gets a process whose cgroup says it is elsewhere, and the
// pod's memory, utilization and energy are its own processes' only.
func TestAProcessKeepsWhatItsCgroupSays(t *testing.T) {
	h := newHarness(t, "dgxh100", "shared-gpu", testConfig(), exclusiveWithHostProcess)
	first := h.step(10 * time.Second)
	e0 := point(t, gpuResource(t, first, "0"), "hw.energy")
	md := h.run(6, 10*time.Second)

	gpu := gpuResource(t, md, "0")
	assert.Equal(t, "trainer", attrOf(gpu, "k8s.pod.name"), "the GPU itself is its holder's")
	assert.Equal(t, methodAllocation, attrOf(gpu, "nvidia.gpu.attribution.method"))

	trainer := procByPID(t, md, "41001")
	assert.Equal(t, "trainer", attrOf(trainer, "k8s.pod.name"))
	assert.Equal(t, "pytorch", attrOf(trainer, "k8s.container.name"))
	assert.Equal(t, methodCgroup, attrOf(trainer, "nvidia.gpu.attribution.method"))

	host := procByPID(t, md, "41002")
	for _, k := range ownerKeys {
		assert.Empty(t, attrOf(host, k), "a host process on the held GPU: no %s", k)
	}
	docker := procByPID(t, md, "41003")
	assert.Empty(t, attrOf(docker, "k8s.pod.name"), "a plain docker container is no pod")
	assert.Equal(t, "673033715c3cd6f574b9ce8f7dbb34a780134c04f3dbb6e8c9dd4e1390e63495", attrOf(docker, "container.id"))

	pods := resources(md, map[string]string{"nvidia.gpu.index": "0", "k8s.pod.name": "trainer", "!process.pid": ""})
	var pod pmetric.ResourceMetrics
	for _, rm := range pods {
		if hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage") {
			pod = rm
		}
	}
	require.True(t, hasScopeMetric(pod, "nvidia.gpu.pod.memory.usage"))
	assert.Equal(t, "pytorch", attrOf(pod, "k8s.container.name"))
	assert.Equal(t, point(t, trainer, "nvidia.gpu.process.memory.usage"), point(t, pod, "nvidia.gpu.pod.memory.usage"), "only its own process's memory")
	procSM := point(t, trainer, "nvidia.gpu.process.utilization", "nvidia.gpu.engine", "sm")
	assert.InDelta(t, procSM, point(t, pod, "nvidia.gpu.pod.utilization"), 1e-9, "only its own process's SMs")
	others := point(t, host, "nvidia.gpu.process.utilization", "nvidia.gpu.engine", "sm") + point(t, docker, "nvidia.gpu.process.utilization", "nvidia.gpu.engine", "sm")
	e1 := point(t, gpu, "hw.energy")
	assert.InDelta(t, (e1-e0)*procSM/(procSM+others), point(t, pod, "nvidia.gpu.pod.energy"), (e1-e0)*0.05,
		"its share of the GPU's energy, not the host's or the container's share")
	assert.Less(t, point(t, pod, "nvidia.gpu.pod.energy"), (e1-e0)*0.9)
}

// A sidecar that did not request the GPU keeps its own container: the holder container's
// name is never copied onto it, even when its ID cannot be named.
func TestASidecarKeepsItsOwnContainer(t *testing.T) {
	const sidecarID = "6b3dac1bbe2e62bea89cacd28082983d93b788f51b1d70d46ea0d0623c966d95"
	build := func(known bool) func([]string, *fakeClock) sources {
		return func(uuids []string, clock *fakeClock) sources {
			s := exclusiveWithHostProcess(uuids, clock)
			s.pids.(fakePIDs)[41002] = cgroup.Location{PodUID: uidTrainer, ContainerID: sidecarID}
			if known {
				s.names.(fakeNames)[uidTrainer].ContainerIDs[sidecarID] = "sidecar"
			}
			return s
		}
	}
	md := newHarness(t, "dgxh100", "shared-gpu", testConfig(), build(true)).run(1, 10*time.Second)
	sidecar := procByPID(t, md, "41002")
	assert.Equal(t, "trainer", attrOf(sidecar, "k8s.pod.name"))
	assert.Equal(t, "sidecar", attrOf(sidecar, "k8s.container.name"))
	assert.Equal(t, sidecarID, attrOf(sidecar, "container.id"))

	md = newHarness(t, "dgxh100", "shared-gpu", testConfig(), build(false)).run(1, 10*time.Second)
	sidecar = procByPID(t, md, "41002")
	assert.Empty(t, attrOf(sidecar, "k8s.container.name"), "unknown, never the GPU container's name")
	assert.Equal(t, sidecarID, attrOf(sidecar, "container.id"), "k8s_attributes names it from its ID")
	pod := resources(md, map[string]string{"nvidia.gpu.index": "0", "k8s.pod.name": "trainer", "!process.pid": ""})
	for _, rm := range pod {
		if hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage") {
			assert.Empty(t, attrOf(rm, "k8s.container.name"), "two of the pod's containers use the GPU")
		}
	}
}

// Inferring the holder is allowed only when the cgroup cannot be read, and says so.
func TestInferredOnlyWhenTheCgroupCannotBeRead(t *testing.T) {
	unreadable := func(uuids []string, clock *fakeClock) sources {
		s := exclusiveWithHostProcess(uuids, clock)
		s.pids = cgroup.NewResolver(filepath.Join(t.TempDir(), "not-the-host-proc"))
		return s
	}
	md := newHarness(t, "dgxh100", "shared-gpu", testConfig(), unreadable).run(1, 10*time.Second)
	for _, pid := range []string{"41001", "41002", "41003"} {
		proc := procByPID(t, md, pid)
		assert.Equal(t, "trainer", attrOf(proc, "k8s.pod.name"))
		assert.Equal(t, methodInferred, attrOf(proc, "nvidia.gpu.attribution.method"), "pid %s", pid)
		assert.Empty(t, attrOf(proc, "k8s.container.name"), "the pod may have other containers")
		assert.Empty(t, attrOf(proc, "k8s.pod.uid"), "nothing observed")
	}
	// On a GPU held by two pods there is no single holder to infer.
	shared := newHarness(t, "dgxh100", "shared-gpu", testConfig(), func(uuids []string, clock *fakeClock) sources {
		s := sharedSources(uuids, clock)
		s.pids = cgroup.NewResolver(filepath.Join(t.TempDir(), "missing"))
		return s
	}).run(1, 10*time.Second)
	assert.Empty(t, attrOf(procByPID(t, shared, "41001"), "k8s.pod.name"))
}

// A PID reused between two scrapes by another process does not inherit the old
// process's pod: the resolver tells processes apart by their start time.
func TestAReusedPIDDoesNotInheritThePod(t *testing.T) {
	root := t.TempDir()
	write := func(pid, cgroupLine string, start int) {
		dir := filepath.Join(root, pid)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroupLine+"\n"), 0o644))
		stat := pid + " (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " + itoa(start) + " 1 1 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
	}
	podCgroup := "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5fb5b359_2df7_421a_8b41_2a10445bd33c.slice/cri-containerd-" + idTrainer + ".scope"
	for _, pid := range []string{"41001", "41002", "41003"} {
		write(pid, podCgroup, 1000)
	}
	h := newHarness(t, "dgxh100", "shared-gpu", testConfig(), func(uuids []string, clock *fakeClock) sources {
		s := exclusiveWithHostProcess(uuids, clock)
		s.pids = cgroup.NewResolver(root)
		s.names = fakeNames{uidTrainer: podnames.Pod{Namespace: "ml", Name: "trainer", Containers: []string{"pytorch", "sidecar"}}}
		return s
	})
	md := h.run(1, 10*time.Second)
	require.Equal(t, "trainer", attrOf(procByPID(t, md, "41002"), "k8s.pod.name"))

	// Between two scrapes 41002 exits and a user's process gets the PID.
	write("41002", "0::/user.slice/user-1000.slice/session-3.scope", 99000)
	md = h.run(1, 10*time.Second)
	assert.Empty(t, attrOf(procByPID(t, md, "41002"), "k8s.pod.name"))
	var ended []pmetric.ResourceMetrics
	for _, rm := range resources(md, map[string]string{"process.pid": "41002", "k8s.pod.name": "trainer"}) {
		if onlyEndMarkers(rm) {
			ended = append(ended, rm)
		}
	}
	assert.Len(t, ended, 1, "the old process's series (with the pod) end now, not 5 minutes later")
	assert.Equal(t, "trainer", attrOf(procByPID(t, md, "41001"), "k8s.pod.name"))
}

func itoa(n int) string { return strconv.Itoa(n) }

// A GPU that falls off the bus ends its series at once: the next batch carries one end
// marker for each of its series that is gone (its status, still reported as failed, goes
// on), and a returning GPU's series simply continue.
func TestSeriesOfALostGPUEndWithinOneInterval(t *testing.T) {
	h := newHarness(t, "dgxh100", "gpu-lost", testConfig(), kubeletOnly)
	endedOn := func(md pmetric.Metrics, index string) map[string]bool {
		out := map[string]bool{}
		for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": index}) {
			pdatawalk.EachPoint(rm, func(name string, dp pmetric.NumberDataPoint) {
				if dp.Flags().NoRecordedValue() {
					out[name] = true
				}
			})
		}
		return out
	}
	for range 14 { // t = 14 s: GPU 3 is still there
		md := h.step(time.Second)
		require.Empty(t, endedOn(md, "3"))
	}
	var lost map[string]bool
	for range 3 { // it falls off at 15 s; the receiver notices on its next read
		if lost = endedOn(h.step(time.Second), "3"); len(lost) > 0 {
			break
		}
	}
	assert.True(t, lost["hw.gpu.utilization"], "utilization ends: %v", lost)
	assert.True(t, lost["hw.energy"], "the energy counter ends")
	assert.True(t, lost["nvidia.gpu.process.memory.usage"], "its process's series end")
	assert.True(t, lost["nvidia.gpu.pod.energy"], "its pod's series end")
	assert.False(t, lost["hw.status"], "the GPU's status goes on saying failed")
	assert.Empty(t, endedOn(h.step(time.Second), "3"), "ended once")
	assert.Empty(t, endedOn(h.step(time.Second), "0"), "the other GPUs go on")
}

// An owner attribute switched off in resource_attributes is written nowhere: not on the
// GPU, its processes or the per-pod series (a user drops k8s.pod.uid to save a label).
func TestADisabledOwnerAttributeIsNeverWritten(t *testing.T) {
	cfg := testConfig()
	cfg.ResourceAttributes.K8sPodUID.Enabled = false
	cfg.ResourceAttributes.NvidiaGpuAttributionMethod.Enabled = false
	h := newHarness(t, "dgxh100", "shared-gpu", cfg, exclusiveWithHostProcess)
	md := h.run(3, 10*time.Second)

	owned := resources(md, map[string]string{"k8s.pod.name": "trainer"})
	require.NotEmpty(t, owned)
	var kinds []string
	for _, rm := range owned {
		assert.Empty(t, attrOf(rm, "k8s.pod.uid"))
		assert.Empty(t, attrOf(rm, "nvidia.gpu.attribution.method"))
		assert.Equal(t, "pytorch", attrOf(rm, "k8s.container.name"), "the others are still written")
		switch {
		case attrOf(rm, "process.executable.name") != "":
			kinds = append(kinds, "process")
		case hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage"):
			kinds = append(kinds, "pod")
		default:
			kinds = append(kinds, "gpu")
		}
	}
	assert.Subset(t, kinds, []string{"gpu", "process", "pod"})
}

// closeCountingPIDs is fakePIDs that counts Close calls.
type closeCountingPIDs struct {
	fakePIDs
	closed int
}

func (c *closeCountingPIDs) Close() { c.closed++ }

// The cgroup resolver keeps a descriptor of each GPU process's /proc entry open; a stopped
// (or reloaded) processor must give them back.
func TestShutdownReleasesTheProcessLookups(t *testing.T) {
	pids := &closeCountingPIDs{fakePIDs: fakePIDs{}}
	p := newProcessor(testConfig(), processortest.NewNopSettings(metadata.Type), time.Now, sources{pids: pids})
	require.NoError(t, p.start(context.Background(), nil))
	require.NoError(t, p.shutdown(context.Background()))
	assert.Equal(t, 1, pids.closed)
}

// writeProcEntry writes <root>/<pid>/{cgroup,stat} as the kernel shows them.
func writeProcEntry(t *testing.T, root string, pid int, cgroupLine string, start int) {
	t.Helper()
	dir := filepath.Join(root, itoa(pid))
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte(cgroupLine+"\n"), 0o644))
	stat := itoa(pid) + " (python3) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " + itoa(start) + " 1 1 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644))
}

// A process NVML lists whose /proc entry is gone by the time it is read has exited: it is
// not given to the pod that holds the GPU (on a busy node it may have been anyone's), its
// series sit out the collection, the pod's values leave its memory out, and it is counted.
// Only a cgroup that cannot be read — the proc root hides the process — is inferred.
func TestAProcessThatExitedIsNotGivenToTheHolder(t *testing.T) {
	const trainerCgroup = "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod5fb5b359_2df7_421a_8b41_2a10445bd33c.slice/cri-containerd-" + idTrainer + ".scope"
	run := func(t *testing.T, showInit bool) pmetric.Metrics {
		root := t.TempDir()
		if showInit {
			writeProcEntry(t, root, 1, "0::/init.scope", 5)
		}
		writeProcEntry(t, root, 41001, trainerCgroup, 1000)
		writeProcEntry(t, root, 41003, "0::/system.slice/docker-673033715c3cd6f574b9ce8f7dbb34a780134c04f3dbb6e8c9dd4e1390e63495.scope", 1000)
		for pid := 20001; pid <= 20007; pid++ { // the other GPUs' processes
			writeProcEntry(t, root, pid, "0::/system.slice/train.service", 1000)
		}
		// 41002, which NVML lists, has no /proc entry: it exited after NVML's listing.
		h := newHarness(t, "dgxh100", "shared-gpu", testConfig(), func(uuids []string, clock *fakeClock) sources {
			s := exclusiveWithHostProcess(uuids, clock)
			s.pids = cgroup.NewResolver(root)
			return s
		})
		return h.run(3, 10*time.Second)
	}
	podPoint := func(t *testing.T, md pmetric.Metrics, name string) float64 {
		t.Helper()
		for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "0", "k8s.pod.name": "trainer", "!process.pid": ""}) {
			if hasScopeMetric(rm, name) {
				return point(t, rm, name)
			}
		}
		t.Fatal("no per-pod series for trainer on GPU 0")
		return 0
	}
	sm := func(t *testing.T, md pmetric.Metrics, pid string) float64 {
		t.Helper()
		return point(t, procByPID(t, md, pid), "nvidia.gpu.process.utilization", "nvidia.gpu.engine", "sm")
	}

	// The same entry missing under a proc root that shows no PID 1 (hidepid=invisible, no
	// host /proc): the process may well run, its cgroup is unreadable, and it is inferred.
	md := run(t, false)
	hidden := procByPID(t, md, "41002")
	assert.Equal(t, "trainer", attrOf(hidden, "k8s.pod.name"))
	assert.Equal(t, methodInferred, attrOf(hidden, "nvidia.gpu.attribution.method"))
	assert.Zero(t, hostPoint(t, md, "nvidia.gpu.processes.exited"))
	sm1, sm2 := sm(t, md, "41001"), sm(t, md, "41002")
	inferredEnergy := podPoint(t, md, "nvidia.gpu.pod.energy")

	md = run(t, true)
	for _, rm := range resources(md, map[string]string{"process.pid": "41002"}) {
		assert.True(t, onlyEndMarkers(rm), "the exited process has no series in the collection")
	}
	trainer := procByPID(t, md, "41001")
	assert.Equal(t, methodCgroup, attrOf(trainer, "nvidia.gpu.attribution.method"))
	assert.Equal(t, point(t, trainer, "nvidia.gpu.process.memory.usage"), podPoint(t, md, "nvidia.gpu.pod.memory.usage"),
		"the pod's memory is its own process's, not the exited one's")
	assert.InDelta(t, sm1, podPoint(t, md, "nvidia.gpu.pod.utilization"), 1e-9)
	// Its share of the GPU's energy went with it, to no pod: the pod keeps its own process's
	// share of what the inferred pair had.
	assert.InDelta(t, inferredEnergy*sm1/(sm1+sm2), podPoint(t, md, "nvidia.gpu.pod.energy"), inferredEnergy*0.05)
	assert.Equal(t, 3.0, hostPoint(t, md, "nvidia.gpu.processes.exited"), "counted in each of the three collections")
}

// hostPoint is a metric's value on the host resource, for one resource name when given.
func hostPoint(t *testing.T, md pmetric.Metrics, name string, attrs ...string) float64 {
	t.Helper()
	host := resources(md, map[string]string{"!hw.id": "", "host.name": "*"})
	require.Len(t, host, 1)
	return point(t, host[0], name, attrs...)
}

// Device IDs as the field hands them to the kubelet: a GPU UUID in upper case maps to the
// GPU NVML reports in lower case; an empty device ID is no allocated device; a renamed
// resource outside kubelet.resource_names is counted as unmapped and named in one log
// line, not every collection.
func TestDeviceIDsSeenInTheField(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	h := newHarness(t, "dgxh100", "steady-training", testConfig(), func(uuids []string, clock *fakeClock) sources {
		upper := "GPU-" + strings.ToUpper(uuids[0][len("GPU-"):])
		snap := &podresources.Snapshot{Taken: clock.Now(), Pods: []podresources.Pod{
			{Namespace: "ml", Name: "upper", Containers: []podresources.Container{
				{Name: "c", Devices: []podresources.Device{{ResourceName: "nvidia.com/gpu", ID: upper}}},
			}},
			{Namespace: "ml", Name: "empty", Containers: []podresources.Container{
				{Name: "c", Devices: []podresources.Device{{ResourceName: "nvidia.com/gpu", ID: ""}}},
			}},
			{Namespace: "ml", Name: "renamed", Containers: []podresources.Container{
				{Name: "c", Unlisted: []podresources.Device{{ResourceName: "nvidia.com/a100-80gb", ID: uuids[1]}}},
			}},
		}}
		return sources{pods: &fakePods{snap: snap}}
	})
	h.proc.logger = zap.New(core)
	var md pmetric.Metrics
	for range 4 {
		md = h.step(10 * time.Second)
	}
	assert.Equal(t, "upper", attrOf(gpuResource(t, md, "0"), "k8s.pod.name"), "an upper-case UUID is the GPU's")
	assert.Empty(t, attrOf(gpuResource(t, md, "1"), "k8s.pod.name"), "not attributed until its resource is listed")

	assert.Equal(t, 1.0, hostPoint(t, md, "nvidia.gpu.devices.allocated", "nvidia.gpu.resource_name", "nvidia.com/gpu"), "the empty ID is no device")
	assert.Equal(t, 1.0, hostPoint(t, md, "nvidia.gpu.attribution.unmapped_devices", "nvidia.gpu.resource_name", "nvidia.com/gpu"))
	assert.Equal(t, 1.0, hostPoint(t, md, "nvidia.gpu.attribution.unmapped_devices", "nvidia.gpu.resource_name", "nvidia.com/a100-80gb"))

	renamed := logs.FilterField(zap.String("resource_name", "nvidia.com/a100-80gb")).All()
	require.Len(t, renamed, 1, "logged once, not every collection: %v", logs.All())
	assert.Contains(t, renamed[0].Message, "kubelet.resource_names")
	empty := logs.FilterMessageSnippet("map to no GPU").All()
	require.Len(t, empty, 1, "logged once: %v", logs.All())
	assert.Contains(t, empty[0].ContextMap()["example"], "empty device ID")
}

// Without kube_api or pod_logs_dir nothing links the kubelet's holder (a name) to the pod a
// process's cgroup names (a UID): one pod's GPU is still one per-pod series — the observed
// one, by UID, with its process's values — the same in every collection, not a second one
// under the holder's name saying 0.
func TestOnePodsGPUIsOneSeriesWithoutPodNames(t *testing.T) {
	h := newHarness(t, "dgxh100", "shared-gpu", testConfig(), func(uuids []string, clock *fakeClock) sources {
		s := exclusiveWithHostProcess(uuids, clock)
		s.names = nil
		return s
	})
	var identity map[string]any
	for i := range 5 {
		md := h.step(10 * time.Second)
		var live []pmetric.ResourceMetrics
		for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "0", "!process.pid": ""}) {
			if !hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage") {
				continue
			}
			require.False(t, onlyEndMarkers(rm), "collection %d: no per-pod series ends: %v", i, rm.Resource().Attributes().AsRaw())
			live = append(live, rm)
		}
		require.Len(t, live, 1, "collection %d: one per-pod series for the one pod", i)
		pod := live[0]
		assert.Equal(t, uidTrainer, attrOf(pod, "k8s.pod.uid"))
		assert.Equal(t, methodCgroup, attrOf(pod, "nvidia.gpu.attribution.method"))
		assert.Equal(t, point(t, procByPID(t, md, "41001"), "nvidia.gpu.process.memory.usage"), point(t, pod, "nvidia.gpu.pod.memory.usage"))
		if identity == nil {
			identity = pod.Resource().Attributes().AsRaw()
		}
		assert.Equal(t, identity, pod.Resource().Attributes().AsRaw(), "collection %d: the same series", i)
	}
}

// A GPU whose only listed process exited still had a process: its holder is not given the
// GPU's memory (which holds the exited process's), as it is when NVML lists none at all.
func TestAnExitedOnlyProcessIsNotTheHoldersMemory(t *testing.T) {
	root := t.TempDir()
	writeProcEntry(t, root, 1, "0::/init.scope", 5) // the proc root shows processes; none of the GPUs'
	h := newHarness(t, "dgxh100", "steady-training", testConfig(), func(uuids []string, clock *fakeClock) sources {
		s := kubeletOnly(uuids, clock)
		s.pids = cgroup.NewResolver(root)
		return s
	})
	md := h.run(2, 10*time.Second)
	assert.Empty(t, resources(md, map[string]string{"nvidia.gpu.index": "0", "process.pid": "*"}), "the exited process has no series")
	assert.Positive(t, point(t, gpuResource(t, md, "0"), "hw.gpu.memory.usage"))
	pods := resources(md, map[string]string{"nvidia.gpu.index": "0", "k8s.pod.name": "train-0", "!process.pid": ""})
	var found bool
	for _, rm := range pods {
		if hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage") {
			found = true
			assert.Zero(t, point(t, rm, "nvidia.gpu.pod.memory.usage"), "none of the GPU's memory is known to be the pod's")
		}
	}
	assert.True(t, found, "the holder keeps its series")
}
