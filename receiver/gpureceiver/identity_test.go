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
