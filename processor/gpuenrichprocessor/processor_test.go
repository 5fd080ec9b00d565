package gpuenrichprocessor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
)

func kubeletOnly(uuids []string, clock *fakeClock) sources {
	return sources{pods: &fakePods{snap: allocateEach(uuids, clock.Now())}}
}

func TestGPUsAndTheirProcessesAreAttributedToTheirPods(t *testing.T) {
	h := newHarness(t, "dgxh100", "steady-training", testConfig(), kubeletOnly)
	md := h.run(2, 10*time.Second)
	for i := range 8 {
		idx := string(rune('0' + i))
		gpu := gpuResource(t, md, idx)
		assert.Equal(t, "ml", attrOf(gpu, "k8s.namespace.name"))
		assert.Equal(t, "train-"+idx, attrOf(gpu, "k8s.pod.name"))
		assert.Equal(t, "pytorch", attrOf(gpu, "k8s.container.name"))
		procs := resources(md, map[string]string{"nvidia.gpu.index": idx, "process.pid": "*"})
		require.Len(t, procs, 1)
		assert.Equal(t, "train-"+idx, attrOf(procs[0], "k8s.pod.name"), "the only pod on the GPU owns its process")
		pods := resources(md, map[string]string{"nvidia.gpu.index": idx, "k8s.pod.name": "*", "!process.pid": ""})
		var perPod int
		for _, rm := range pods {
			if hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage") {
				perPod++
				assert.InDelta(t, point(t, gpu, "hw.gpu.memory.usage"), point(t, rm, "nvidia.gpu.pod.memory.usage"), 1)
			}
		}
		assert.Equal(t, 1, perPod)
	}
}

func TestDerivedSignalsOnEveryGPU(t *testing.T) {
	h := newHarness(t, "dgxh100", "thermal-throttle", testConfig(), kubeletOnly)
	md := h.run(2, 10*time.Second)
	for i := range 8 {
		idx := string(rune('0' + i))
		gpu := gpuResource(t, md, idx)
		ratio := point(t, gpu, "hw.gpu.memory.utilization")
		assert.InDelta(t, point(t, gpu, "hw.gpu.memory.usage")/point(t, gpu, "hw.gpu.memory.limit"), ratio, 1e-9)
		hot := idx == "2" || idx == "5"
		assert.Equal(t, hot, point(t, gpu, "nvidia.gpu.throttled", "nvidia.gpu.throttle.cause", "thermal") == 1, "GPU %s", idx)
		assert.Zero(t, point(t, gpu, "nvidia.gpu.throttled", "nvidia.gpu.throttle.cause", "power"))
		assert.Equal(t, 1.0, point(t, gpu, "nvidia.gpu.bottleneck", "nvidia.gpu.bottleneck.class", "compute_bound"))
		assert.Zero(t, point(t, gpu, "nvidia.gpu.idle_while_allocated"))
	}
	host := resources(md, map[string]string{"!hw.id": "", "host.name": "*"})
	require.Len(t, host, 1)
	assert.Equal(t, 8.0, point(t, host[0], "nvidia.gpu.devices.allocatable", "nvidia.gpu.resource_name", "nvidia.com/gpu"))
	assert.Equal(t, 8.0, point(t, host[0], "nvidia.gpu.devices.allocated", "nvidia.gpu.resource_name", "nvidia.com/gpu"))
}

func TestIdleScenarioBecomesIdleWhileAllocatedAfterItsWindow(t *testing.T) {
	h := newHarness(t, "dgxh100", "idle", testConfig(), kubeletOnly)
	md := h.run(5, 10*time.Second) // 50 s: less than the 1 min window
	assert.Zero(t, point(t, gpuResource(t, md, "0"), "nvidia.gpu.idle_while_allocated"))
	md = h.run(2, 10*time.Second) // 70 s
	for i := range 8 {
		gpu := gpuResource(t, md, string(rune('0'+i)))
		assert.Equal(t, 1.0, point(t, gpu, "nvidia.gpu.idle_while_allocated"))
		assert.Equal(t, 1.0, point(t, gpu, "nvidia.gpu.bottleneck", "nvidia.gpu.bottleneck.class", "idle"))
	}

	// The same idle GPUs with nobody holding them are not "wasted allocations".
	free := newHarness(t, "dgxh100", "idle", testConfig(), func([]string, *fakeClock) sources { return sources{} })
	md = free.run(8, 10*time.Second)
	assert.Zero(t, point(t, gpuResource(t, md, "0"), "nvidia.gpu.idle_while_allocated"))
}

func TestMemoryLeakIsSuspectedWithinItsWindow(t *testing.T) {
	h := newHarness(t, "dgxh100", "memory-leak", testConfig(), kubeletOnly)
	md := h.run(8, 5*time.Second) // 40 s
	assert.Zero(t, point(t, gpuResource(t, md, "0"), "nvidia.gpu.memory.leak_suspected"), "not before a whole window")
	md = h.run(6, 5*time.Second) // 70 s
	for i := range 8 {
		idx := string(rune('0' + i))
		gpu := gpuResource(t, md, idx)
		assert.Equal(t, 1.0, point(t, gpu, "nvidia.gpu.memory.leak_suspected"), "GPU %s", idx)
		// 1.5 % of 80 GiB every 5 s.
		assert.InDelta(t, 0.015*80*(1<<30)/5, point(t, gpu, "nvidia.gpu.memory.growth_rate"), 0.2*0.015*80*(1<<30)/5)
		pod := resources(md, map[string]string{"nvidia.gpu.index": idx, "k8s.pod.name": "train-" + idx, "!process.pid": ""})
		for _, rm := range pod {
			if hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage") {
				assert.Equal(t, 1.0, point(t, rm, "nvidia.gpu.pod.memory.leak_suspected"), "and the pod's own trend says so too")
				assert.Positive(t, point(t, rm, "nvidia.gpu.pod.memory.growth_rate"))
				assert.False(t, hasScopeMetric(rm, "nvidia.gpu.memory.leak_suspected"), "a pod's series do not collide with its GPU's")
			}
		}
	}

	steady := newHarness(t, "dgxh100", "steady-training", testConfig(), kubeletOnly)
	md = steady.run(14, 5*time.Second)
	gpu := gpuResource(t, md, "0")
	assert.Zero(t, point(t, gpu, "nvidia.gpu.memory.leak_suspected"))
	assert.Less(t, point(t, gpu, "nvidia.gpu.memory.growth_rate"), 1e6, "a steady job's memory does not trend")
}

// sharedSources: GPU 0 is time-sliced between pods infer-a (process 41001) and infer-b
// (processes 41002 and 41003); GPU i > 0 is held by pod ml/train-i, whose process 20000+i
// runs in it. Processes are found through cgroups and named through the kubelet's log
// directory.
func sharedSources(uuids []string, clock *fakeClock) sources {
	snap := allocateEach(uuids, clock.Now())
	snap.Pods[0] = podresources.Pod{Namespace: "serving", Name: "infer-a", Containers: []podresources.Container{
		{Name: "server", Devices: []podresources.Device{{ResourceName: "nvidia.com/gpu.shared", ID: uuids[0] + "::0"}}},
	}}
	snap.Pods = append(snap.Pods, podresources.Pod{Namespace: "serving", Name: "infer-b", Containers: []podresources.Container{
		{Name: "server", Devices: []podresources.Device{{ResourceName: "nvidia.com/gpu.shared", ID: uuids[0] + "::1"}}},
	}})
	const uidA, uidB = "aaaaaaaa-0000-4000-8000-000000000001", "bbbbbbbb-0000-4000-8000-000000000002"
	pids := fakePIDs{
		41001: {PodUID: uidA, ContainerID: strings.Repeat("1", 64)},
		41002: {PodUID: uidB, ContainerID: strings.Repeat("2", 64)},
		41003: {PodUID: uidB, ContainerID: strings.Repeat("2", 64)},
	}
	names := fakeNames{
		uidA: {Namespace: "serving", Name: "infer-a", Containers: []string{"server"}},
		uidB: {Namespace: "serving", Name: "infer-b", Containers: []string{"server"}},
	}
	for i := 1; i < len(uuids); i++ {
		uid := fmt.Sprintf("0000000%d-0000-4000-8000-00000000000%d", i, i)
		pids[uint32(20000+i)] = cgroup.Location{PodUID: uid, ContainerID: strings.Repeat(fmt.Sprint(i), 64)}
		names[uid] = podnames.Pod{Namespace: "ml", Name: fmt.Sprintf("train-%d", i), Containers: []string{"pytorch"}}
	}
	return sources{pods: &fakePods{snap: snap}, pids: pids, names: names}
}

func TestSharedGPUGivesEachPodItsOwnMemoryAndEnergy(t *testing.T) {
	h := newHarness(t, "dgxh100", "shared-gpu", testConfig(), sharedSources)
	first := h.step(10 * time.Second)
	gpu0 := gpuResource(t, first, "0")
	_, hasPod := gpu0.Resource().Attributes().Get("k8s.pod.name")
	assert.False(t, hasPod, "a shared GPU's device series belong to no single pod")
	e0 := point(t, gpu0, "hw.energy")

	md := h.run(6, 10*time.Second)
	gpu0 = gpuResource(t, md, "0")
	e1 := point(t, gpu0, "hw.energy")
	perPod := map[string][3]float64{}
	for _, rm := range resources(md, map[string]string{"nvidia.gpu.index": "0", "k8s.pod.name": "*", "!process.pid": ""}) {
		if !hasScopeMetric(rm, "nvidia.gpu.pod.memory.usage") {
			continue
		}
		assert.Equal(t, "server", attrOf(rm, "k8s.container.name"))
		assert.NotEmpty(t, attrOf(rm, "k8s.pod.uid"))
		perPod[attrOf(rm, "k8s.pod.name")] = [3]float64{
			point(t, rm, "nvidia.gpu.pod.memory.usage"),
			point(t, rm, "nvidia.gpu.pod.utilization"),
			point(t, rm, "nvidia.gpu.pod.energy"),
		}
	}
	require.Len(t, perPod, 2)
	a, b := perPod["infer-a"], perPod["infer-b"]
	assert.NotEqual(t, a[0], b[0], "distinct memory")
	assert.InDelta(t, point(t, gpu0, "hw.gpu.memory.usage"), a[0]+b[0], point(t, gpu0, "hw.gpu.memory.usage")*0.01, "memory adds up")
	assert.InDelta(t, 0.55/0.45, a[1]/b[1], 0.1, "utilization follows each pod's processes")
	assert.NotEqual(t, a[2], b[2], "distinct energy")
	assert.InDelta(t, e1-e0, a[2]+b[2], 1, "the GPU's energy is split, not copied")
	assert.InDelta(t, a[1]/(a[1]+b[1]), a[2]/(a[2]+b[2]), 0.05, "in proportion to SM utilization")
	for _, proc := range resources(md, map[string]string{"nvidia.gpu.index": "0", "process.pid": "*"}) {
		assert.Contains(t, []string{"infer-a", "infer-b"}, attrOf(proc, "k8s.pod.name"))
		assert.NotEmpty(t, attrOf(proc, "container.id"))
	}
}

func TestBottleneckRule(t *testing.T) {
	for name, tc := range map[string]struct {
		g    gpuView
		want string
	}{
		"idle":                   {gpuView{util: 0.01, hasUtil: true}, bottleneckIdle},
		"compute-bound with GPM": {gpuView{util: 0.97, hasUtil: true, smActive: 0.9, hasSM: true, dramActive: 0.3, hasDRAM: true}, bottleneckCompute},
		"memory-bound with GPM":  {gpuView{util: 0.97, hasUtil: true, smActive: 0.5, hasSM: true, dramActive: 0.8, hasDRAM: true}, bottleneckMemory},
		"starved with GPM":       {gpuView{util: 0.6, hasUtil: true, smActive: 0.2, hasSM: true, dramActive: 0.1, hasDRAM: true}, bottleneckStarved},
		"compute-bound, no GPM":  {gpuView{util: 0.9, hasUtil: true, memCopy: 0.3, hasMemCopy: true}, bottleneckCompute},
		"memory-bound, no GPM":   {gpuView{util: 0.7, hasUtil: true, memCopy: 0.75, hasMemCopy: true}, bottleneckMemory},
		"starved, no GPM":        {gpuView{util: 0.3, hasUtil: true, memCopy: 0.1, hasMemCopy: true}, bottleneckStarved},
		"MIG: only GPM, starved": {gpuView{smActive: 0.2, hasSM: true}, bottleneckStarved},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := bottleneck(&tc.g, 0.05, 0.6)
			require.True(t, ok)
			assert.Equal(t, tc.want, got)
		})
	}
	_, ok := bottleneck(&gpuView{}, 0.05, 0.6)
	assert.False(t, ok, "nothing to classify without utilization")
}

// Descriptions are two fifths of an OTLP request's bytes and Prometheus 3 does not keep
// them: off, every metric goes out without one, the received and the derived alike, and
// nothing else changes.
func TestDescriptionsCanBeLeftOut(t *testing.T) {
	described := func(md pmetric.Metrics) (with int, names []string) {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			pdatawalk.EachMetric(md.ResourceMetrics().At(i), func(m pmetric.Metric) {
				if m.Description() != "" {
					with++
				}
				names = append(names, m.Name())
			})
		}
		return with, names
	}
	kept := newHarness(t, "dgxh100", "shared-gpu", testConfig(), kubeletOnly).run(2, 10*time.Second)
	gpu := gpuResource(t, kept, "0")
	for _, name := range []string{"hw.gpu.memory.usage", "hw.gpu.memory.utilization"} { // received, derived
		var description string
		pdatawalk.EachMetric(gpu, func(m pmetric.Metric) {
			if m.Name() == name {
				description = m.Description()
			}
		})
		assert.NotEmpty(t, description, "%s keeps its description by default", name)
	}
	_, keptNames := described(kept)

	cfg := testConfig()
	cfg.Descriptions = false
	dropped := newHarness(t, "dgxh100", "shared-gpu", cfg, kubeletOnly).run(2, 10*time.Second)
	with, names := described(dropped)
	assert.Zero(t, with, "metrics that kept a description")
	assert.ElementsMatch(t, keptNames, names, "the same metrics go out")
	assert.Equal(t, kept.DataPointCount(), dropped.DataPointCount())
}
