package gpureceiver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/scraper/scrapererror"
)

func TestLostGPUDoesNotStopTheOthers(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	clock.Step(10 * time.Second)

	healthy, err := s.scrape(context.Background())
	require.NoError(t, err)
	require.Len(t, gpuResources(healthy), 8)
	lostUUID := s.devices[3].uuid

	sim.SetLost(3, true)
	clock.Step(10 * time.Second)
	md, err := s.scrape(context.Background())
	require.Error(t, err)
	assert.True(t, scrapererror.IsPartialScrapeError(err), "a lost GPU is a partial failure, not a failed scrape")
	assert.Contains(t, err.Error(), "ERROR_GPU_IS_LOST")
	assert.Contains(t, err.Error(), lostUUID)

	byUUID := gpuResources(md)
	require.Len(t, byUUID, 8, "the lost GPU keeps a resource")
	lost := byUUID[lostUUID]
	assert.Equal(t, 1.0, pointValue(t, lost, "hw.status", map[string]string{"hw.state": "failed"}), "and says it failed")
	assert.Equal(t, 0.0, pointValue(t, lost, "hw.status", map[string]string{"hw.state": "ok"}))
	_, hasUtil := findMetric(lost, "hw.gpu.utilization")
	assert.False(t, hasUtil, "no made-up values for the lost GPU")
	for uuid, rm := range byUUID {
		if uuid == lostUUID {
			continue
		}
		assert.Equal(t, 1.0, pointValue(t, rm, "hw.status", map[string]string{"hw.state": "ok"}))
		for _, name := range []string{"hw.gpu.utilization", "hw.gpu.memory.usage", "hw.temperature", "hw.power", "hw.energy"} {
			_, ok := findMetric(rm, name)
			assert.Truef(t, ok, "GPU %s still reports %s", uuid, name)
		}
	}

	// It comes back: it reports normally again, no restart needed.
	sim.SetLost(3, false)
	clock.Step(10 * time.Second)
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	_, ok := findMetric(gpuResources(md)[lostUUID], "hw.gpu.utilization")
	assert.True(t, ok)
	assert.Equal(t, 1.0, pointValue(t, gpuResources(md)[lostUUID], "hw.status", map[string]string{"hw.state": "ok"}))
}

// TestLostGPUIsFoundAgainByReinitialisingNVML: a GPU lost for over a minute makes the
// receiver re-initialise NVML (real drivers do not revalidate handles). While it is still
// lost it keeps reporting failed; once it answers again, a later re-initialisation finds
// it and it reports normally. The XID counters survive the re-initialisations.
func TestLostGPUIsFoundAgainByReinitialisingNVML(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	lostUUID := s.devices[3].uuid
	sim.InjectXID(3, 79, 1)
	waitForXIDs(t, s, sim)

	sim.SetLost(3, true)
	clock.Step(10 * time.Second)
	_, err := s.scrape(context.Background())
	require.Error(t, err)
	shutdowns := sim.Calls()["Shutdown"]

	clock.Step(rediscoverAfter + time.Second)
	md, _ := s.scrape(context.Background())
	assert.Greater(t, sim.Calls()["Shutdown"], shutdowns, "NVML was re-initialised")
	lost := gpuResources(md)[lostUUID]
	assert.Equal(t, 1.0, pointValue(t, lost, "hw.status", map[string]string{"hw.state": "failed"}), "still failed, still reported")
	assert.Len(t, gpuResources(md), 8)

	sim.SetLost(3, false)
	clock.Step(rediscoverAfter + time.Second)
	_, _ = s.scrape(context.Background()) // re-initialises again and finds it
	clock.Step(10 * time.Second)
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	back := gpuResources(md)[lostUUID]
	_, ok := findMetric(back, "hw.power")
	assert.True(t, ok, "it reports normally again")
	assert.Equal(t, 1.0, pointValue(t, back, "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "79"}), "the XID counter carried over")
	assert.Len(t, gpuResources(md), 8, "no duplicate of the found GPU")
}
