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
	clock.Advance(10 * time.Second)

	healthy, err := s.scrape(context.Background())
	require.NoError(t, err)
	require.Len(t, gpuResources(healthy), 8)
	lostUUID := s.devices[3].uuid

	sim.SetLost(3, true)
	clock.Advance(10 * time.Second)
	md, err := s.scrape(context.Background())
	require.Error(t, err)
	assert.True(t, scrapererror.IsPartialScrapeError(err), "a lost GPU is a partial failure, not a failed scrape")
	assert.Contains(t, err.Error(), "ERROR_GPU_IS_LOST")
	assert.Contains(t, err.Error(), lostUUID)

	byUUID := gpuResources(md)
	require.Len(t, byUUID, 7, "no made-up values for the lost GPU")
	require.NotContains(t, byUUID, lostUUID)
	for uuid, rm := range byUUID {
		for _, name := range []string{"hw.gpu.utilization", "hw.gpu.memory.usage", "hw.temperature", "hw.power", "hw.energy"} {
			_, ok := findMetric(rm, name)
			assert.Truef(t, ok, "GPU %s still reports %s", uuid, name)
		}
	}

	// It comes back: it reports normally again, no restart needed.
	sim.SetLost(3, false)
	clock.Advance(10 * time.Second)
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	_, ok := findMetric(gpuResources(md)[lostUUID], "hw.gpu.utilization")
	assert.True(t, ok)
}
