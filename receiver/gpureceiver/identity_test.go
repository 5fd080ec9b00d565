package gpureceiver

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

func intAttr(t *testing.T, attrs pcommon.Map, key string) int64 {
	t.Helper()
	v, ok := attrs.Get(key)
	require.Truef(t, ok, "%s missing", key)
	return v.Int()
}

// TestMinorNumberOnGPUMIGAndProcessResources: device plugins and DRA drivers name GPUs by
// their device node's minor number, which is not the NVML index on every host. Each GPU
// carries its own; MIG instances and processes carry their GPU's.
func TestMinorNumberOnGPUMIGAndProcessResources(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "mig", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	clock.Step(10 * time.Second)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)

	minorByUUID := map[string]int64{}
	differs := false
	for uuid, rm := range gpuResources(md) {
		a := rm.Resource().Attributes()
		h, ret := sim.DeviceGetHandleByUUID(uuid)
		require.Equal(t, nvml.SUCCESS, ret)
		want, _ := h.GetMinorNumber()
		minor := intAttr(t, a, "nvidia.gpu.minor_number")
		assert.Equal(t, int64(want), minor, uuid)
		minorByUUID[uuid] = minor
		differs = differs || minor != intAttr(t, a, "nvidia.gpu.index")
	}
	require.Len(t, minorByUUID, 8)
	assert.True(t, differs, "the simulated H100s number their device nodes apart from NVML's order")

	migs := migResources(md)
	require.NotEmpty(t, migs)
	for uuid, rm := range migs {
		a := rm.Resource().Attributes()
		parent, _ := a.Get("hw.parent")
		assert.Equal(t, minorByUUID[parent.Str()], intAttr(t, a, "nvidia.gpu.minor_number"), "MIG %s carries its GPU's minor number", uuid)
	}
	procs := processResources(md)
	require.NotEmpty(t, procs)
	for key, rm := range procs {
		a := rm.Resource().Attributes()
		gpu, ok := a.Get("hw.parent")
		if !ok {
			gpu, _ = a.Get("hw.id")
		}
		assert.Equal(t, minorByUUID[gpu.Str()], intAttr(t, a, "nvidia.gpu.minor_number"), "process %s carries its GPU's minor number", key)
	}
}

// TestMinorNumberAbsentWhereNVMLCannotTell: a driver that does not report it (Windows)
// leaves the attribute out instead of reporting a made-up 0.
func TestMinorNumberAbsentWhereNVMLCannotTell(t *testing.T) {
	lib, _ := oneGPU()
	s := startedScraper(t, testConfig(), lib, newFakeClock())
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	gpu := gpuResources(md)["GPU-11111111-2222-3333-4444-555555555555"]
	_, ok := gpu.Resource().Attributes().Get("nvidia.gpu.minor_number")
	assert.False(t, ok)
	assert.Equal(t, int64(0), intAttr(t, gpu.Resource().Attributes(), "nvidia.gpu.index"))
}

// TestProcessAndMIGResourcesFollowTheirSubjects: the resources of processes and MIG
// instances are kept between scrapes (resourceCache). A process that exits and a MIG
// instance that is destroyed leave no resource behind, nothing kept grows with them, and
// what a scrape emits is the receiver's own copy: a processor that adds attributes to it
// (gpu_enrich adds the pod's) does not change the next scrape's.
func TestProcessAndMIGResourcesFollowTheirSubjects(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxa100", "churn", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	gpu0, gpu1 := s.devices[0].uuid, s.devices[1].uuid
	// scrape returns the processes' resources by GPU and PID, and GPU 1's MIG instances'.
	scrape := func() (procs, migs map[string]pcommon.Map) {
		t.Helper()
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		procs, migs = map[string]pcommon.Map{}, map[string]pcommon.Map{}
		for key, rm := range processResources(md) {
			procs[key] = rm.Resource().Attributes()
		}
		for key, rm := range migResources(md) {
			if parent, _ := rm.Resource().Attributes().Get("hw.parent"); parent.Str() == gpu1 {
				migs[key] = rm.Resource().Attributes()
			}
		}
		return procs, migs
	}
	name := func(attrs pcommon.Map) string {
		v, _ := attrs.Get("process.executable.name")
		return v.Str()
	}

	procs, migs := scrape()
	require.Contains(t, procs, gpu0+"/43001")
	require.Contains(t, procs, gpu0+"/43002")
	assert.Equal(t, "python3", name(procs[gpu0+"/43001"]))
	assert.Equal(t, "dataloader", name(procs[gpu0+"/43002"]))
	require.Len(t, migs, 2, "GPU 1 in two MIG halves")
	for _, attrs := range procs {
		attrs.PutStr("k8s.pod.name", "added-downstream")
	}
	for _, attrs := range migs {
		attrs.PutStr("k8s.pod.name", "added-downstream")
	}

	for range 6 { // past the churn (40 s) and the next MIG listing (a minute)
		procs, migs = scrape()
	}
	require.Contains(t, procs, gpu0+"/43001")
	assert.NotContains(t, procs, gpu0+"/43002", "the data loader exited")
	assert.Equal(t, "python3", name(procs[gpu0+"/43001"]))
	assert.Len(t, migs, 1, "one MIG half destroyed")
	for key, attrs := range procs {
		_, added := attrs.Get("k8s.pod.name")
		assert.False(t, added, "process %s: what a processor added to an earlier scrape", key)
	}
	for key, attrs := range migs {
		_, added := attrs.Get("k8s.pod.name")
		assert.False(t, added, "MIG instance %s: what a processor added to an earlier scrape", key)
	}
	assert.Len(t, s.devices[0].resources.kept, 1, "GPU 0 keeps only its remaining process's resource")
	onGPU1 := len(migs)
	for _, attrs := range procs {
		if parent, _ := attrs.Get("hw.parent"); parent.Str() == gpu1 {
			onGPU1++
		}
	}
	assert.Len(t, s.devices[1].resources.kept, onGPU1, "GPU 1 keeps only its remaining instance's and processes' resources")
}
