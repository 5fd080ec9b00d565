package gpureceiver

import (
	"context"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// observedScraper is startedScraper with its log captured.
func observedScraper(t *testing.T, cfg *Config, lib nvml.Interface, clock *fakeClock) (*gpuScraper, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.InfoLevel)
	set := receivertest.NewNopSettings(metadata.Type)
	set.Logger = zap.New(core)
	s := newGPUScraper(cfg, set, lib, clock.Now)
	s.xidWait = testXIDWait
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, s.shutdown(context.Background())) })
	return s, logs
}

func TestLostGPUDoesNotStopTheOthers(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s, logs := observedScraper(t, testConfig(), sim, clock)
	clock.Step(10 * time.Second)

	healthy, err := s.scrape(context.Background())
	require.NoError(t, err)
	require.Len(t, gpuResources(healthy), 8)
	lostUUID := s.devices[3].uuid

	sim.SetLost(3, true)
	for range 3 {
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err, "a lost GPU is reported in its metrics and logged once, not as a scrape error the collector logs every collection")

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
	}
	assert.Equal(t, 1, logs.FilterMessageSnippet("GPU stopped answering").Len(), "logged once, not every collection")

	// It comes back on the handle it had: it reports normally again, no restart needed.
	sim.SetLost(3, false)
	clock.Step(10 * time.Second)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	_, ok := findMetric(gpuResources(md)[lostUUID], "hw.gpu.utilization")
	assert.True(t, ok)
	assert.Equal(t, 1.0, pointValue(t, gpuResources(md)[lostUUID], "hw.status", map[string]string{"hw.state": "ok"}))
}

// TestLostGPUNeverBlanksTheHealthyOnes: while one GPU stays off the bus for half an hour,
// NVML is never re-initialised (that would blank the seven healthy GPUs for a collection
// and end their GPM interval), the lost one is looked up by UUID with a back-off, and the
// healthy GPUs report at every collection.
func TestLostGPUNeverBlanksTheHealthyOnes(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	sim.SetLost(3, true)
	inits := sim.Calls()["Init"]
	for elapsed := time.Duration(0); elapsed < 30*time.Minute; elapsed += 10 * time.Second {
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		powered := 0
		for _, rm := range gpuResources(md) {
			if _, ok := findMetric(rm, "hw.power"); ok {
				powered++
			}
		}
		require.Equalf(t, 7, powered, "the seven healthy GPUs report at %s", elapsed)
	}
	assert.Equal(t, inits, sim.Calls()["Init"], "NVML was not re-initialised while GPUs answered")
	assert.Zero(t, sim.Calls()["Shutdown"])
	// Looked up at 1, 2, 4, 8 and 16 minutes after it was lost (and answering GPU_IS_LOST
	// each time): not once a collection.
	assert.Equal(t, int64(5), sim.Calls()["DeviceGetHandleByUUID"])
}

// TestNoGPUAnswersReinitialisesWithBackOff: when no GPU answers at all (a driver reload
// leaves every handle stale), NVML is re-initialised, with a back-off. A GPU that could not
// be enumerated then is looked up by UUID once it is back, and its XID counter carries over.
func TestNoGPUAnswersReinitialisesWithBackOff(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	lostUUID := s.devices[3].uuid
	sim.InjectXID(3, 79, 1)
	waitForXIDs(t, s, sim)
	for i := range 8 {
		sim.SetLost(i, true)
	}
	for elapsed := time.Duration(0); elapsed < 16*time.Minute; elapsed += 10 * time.Second {
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		require.Len(t, gpuResources(md), 8, "every GPU keeps reporting failed")
	}
	// At 1, 2, 4 and 8 minutes after they were all lost: not every minute.
	assert.Equal(t, int64(4), sim.Calls()["Shutdown"])

	// All but GPU 3 come back: the next re-initialisation finds them; GPU 3 is not
	// enumerable yet and is kept without a handle.
	for i := range 8 {
		sim.SetLost(i, i == 3)
	}
	clock.Step(16 * time.Minute)
	_, err := s.scrape(context.Background())
	require.NoError(t, err)
	shutdowns := sim.Calls()["Shutdown"]
	sim.SetLost(3, false)
	var back bool
	for step := 0; step < 200 && !back; step++ {
		clock.Step(10 * time.Second)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		_, back = findMetric(gpuResources(md)[lostUUID], "hw.power")
		if back {
			assert.Len(t, gpuResources(md), 8, "no duplicate of the GPU found again")
			assert.Equal(t, 1.0, pointValue(t, gpuResources(md)[lostUUID], "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "79"}), "the XID counter carried over")
		}
	}
	assert.True(t, back, "GPU 3 was found again")
	assert.Equal(t, shutdowns, sim.Calls()["Shutdown"], "found by UUID, without re-initialising NVML under the healthy GPUs")
}
