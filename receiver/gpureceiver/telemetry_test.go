package gpureceiver

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// scrapeAt runs a scenario to simulated time t (a first scrape at t-10s primes the
// interval averages) and returns the scrape at t, with the default configuration.
func scrapeAt(t *testing.T, system, scenario string, at time.Duration) (*gpuScraper, *fakeClock, pmetricResult) {
	t.Helper()
	return scrapeWith(t, testConfig(), system, scenario, at)
}

// scrapeWith is scrapeAt with a configuration of the test's.
func scrapeWith(t *testing.T, cfg *Config, system, scenario string, at time.Duration) (*gpuScraper, *fakeClock, pmetricResult) {
	t.Helper()
	clock := newFakeClock()
	sim := newSim(t, system, scenario, clock)
	s := startedScraper(t, cfg, sim, clock)
	clock.Step(at - 10*time.Second)
	_, _ = s.scrape(context.Background())
	clock.Step(10 * time.Second)
	waitForXIDs(t, s, sim)
	md, err := s.scrape(context.Background())
	return s, clock, pmetricResult{md: md, err: err}
}

func TestThermalThrottleReportsReasonAndDuration(t *testing.T) {
	_, _, res := scrapeWith(t, fullTestConfig(t), "dgxh100", "thermal-throttle", 60*time.Second)
	require.NoError(t, res.err)
	for uuid, gpu := range gpuResources(res.md) {
		index, _ := gpu.Resource().Attributes().Get("nvidia.gpu.index")
		hot := index.Int() == 2 || index.Int() == 5
		thermal := pointValue(t, gpu, "nvidia.gpu.clock_event.active", map[string]string{"nvidia.gpu.clock_event.reason": "hw_thermal_slowdown"})
		power := pointValue(t, gpu, "nvidia.gpu.clock_event.active", map[string]string{"nvidia.gpu.clock_event.reason": "sw_power_cap"})
		assert.Zero(t, power, uuid)
		if hot {
			assert.Equal(t, 1.0, thermal, "GPU %d is thermally throttled", index.Int())
			assert.InDelta(t, 60, pointValue(t, gpu, "nvidia.gpu.clock_event.duration", map[string]string{"nvidia.gpu.clock_event.cause": "thermal"}), 0.01)
			assert.Greater(t, pointValue(t, gpu, "hw.temperature", map[string]string{"hw.sensor_location": "gpu"}),
				pointValue(t, gpu, "hw.temperature.limit", map[string]string{"hw.sensor_location": "gpu", "hw.limit_type": "max"}))
		} else {
			assert.Zero(t, thermal, "GPU %d is not", index.Int())
		}
	}
}

func TestXIDEventsAreCountedExactlyOncePerCode(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	sim.InjectXID(2, 79, 3)
	sim.InjectXID(0, 13, 5)
	sim.InjectXID(0, 31, 1)
	waitForXIDs(t, s, sim)

	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	gpus := gpuResources(md)
	g0, g2 := gpus[s.devices[0].uuid], gpus[s.devices[2].uuid]
	assert.Equal(t, 5.0, pointValue(t, g0, "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "13"}))
	assert.Equal(t, 1.0, pointValue(t, g0, "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "31"}))
	assert.Equal(t, 3.0, pointValue(t, g2, "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "79"}))
	_, other := findMetric(gpus[s.devices[1].uuid], "nvidia.gpu.xid.errors")
	assert.False(t, other, "a GPU without XIDs has no XID series")

	// XID 79 (fell off the bus) is fatal: the GPU reports failed for the next 10 minutes;
	// 13 and 31 are usually the application's fault and leave GPU 0 ok.
	assert.Equal(t, 1.0, pointValue(t, g2, "hw.status", map[string]string{"hw.state": "failed"}))
	assert.Equal(t, 1.0, pointValue(t, g0, "hw.status", map[string]string{"hw.state": "ok"}))
	clock.Step(healthWindow + time.Second)
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1.0, pointValue(t, gpuResources(md)[s.devices[2].uuid], "hw.status", map[string]string{"hw.state": "ok"}))
	assert.Equal(t, 3.0, pointValue(t, gpuResources(md)[s.devices[2].uuid], "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "79"}), "counters never reset")
}

func TestXIDStormIsBoundedAndDoesNotBlockScrapes(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	_, err := s.scrape(context.Background())
	require.NoError(t, err)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	const storm = 100_000
	sim.InjectXID(0, 13, storm)
	for code := uint64(1000); code < 1200; code++ { // 200 distinct codes: more than the cap
		sim.InjectXID(1, code, 1)
	}
	// Scrapes go on while the storm is being read; none waits for it to drain.
	sawPartial := false
	for sim.DeliveredXIDs() < storm+200 {
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		if m, ok := findMetric(gpuResources(md)[s.devices[0].uuid], "nvidia.gpu.xid.errors"); ok {
			if n := m.Sum().DataPoints().At(0).IntValue(); n > 0 && n < storm {
				sawPartial = true
			}
		}
	}
	waitForXIDs(t, s, sim)
	assert.True(t, sawPartial, "a scrape returned while the storm was still being read")

	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	gpus := gpuResources(md)
	assert.Equal(t, float64(storm), pointValue(t, gpus[s.devices[0].uuid], "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "13"}))
	codes, _ := findMetric(gpus[s.devices[1].uuid], "nvidia.gpu.xid.errors")
	assert.Equal(t, maxXIDCodesPerGPU+1, codes.Sum().DataPoints().Len(), "distinct codes are capped; the rest share one overflow series")
	assert.Equal(t, float64(200-maxXIDCodesPerGPU), pointValue(t, gpus[s.devices[1].uuid], "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "0"}))

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	assert.Less(t, int64(after.HeapAlloc)-int64(before.HeapAlloc), int64(4<<20), "the storm leaves no growing state behind")
}

func TestShutdownStopsTheXIDGoroutine(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxb200", "xid-storm", clock)
	s := newGPUScraperForTest(t, sim, clock)
	require.NotNil(t, s.xids)
	clock.Step(30 * time.Second) // the storm is raging
	time.Sleep(20 * time.Millisecond)
	require.NoError(t, s.shutdown(context.Background()))
	goleak.VerifyNone(t)
	assert.Positive(t, sim.Calls()["EventSetFree"], "the event set is freed")
}

func TestGPULostScenarioFailsOneGPUAndRecovers(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "gpu-lost", clock)
	s := startedScraper(t, testConfig(), sim, clock)
	lostUUID := s.devices[3].uuid

	status := func(md pmetricResult, uuid, state string) float64 {
		return pointValue(t, gpuResources(md.md)[uuid], "hw.status", map[string]string{"hw.state": state})
	}
	clock.Step(10 * time.Second)
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 1.0, status(pmetricResult{md: md}, lostUUID, "ok"))

	clock.Step(15 * time.Second) // t=25 s: GPU 3 is off the bus
	waitForXIDs(t, s, sim)
	md, err = s.scrape(context.Background())
	require.NoError(t, err, "a lost GPU is reported in its metrics, not as a scrape error")
	assert.Equal(t, 1.0, status(pmetricResult{md: md}, lostUUID, "failed"))
	for i, d := range s.devices {
		if i != 3 {
			assert.Equal(t, 1.0, status(pmetricResult{md: md}, d.uuid, "ok"), "GPU %d unaffected", i)
			_, ok := findMetric(gpuResources(md)[d.uuid], "hw.power")
			assert.True(t, ok)
		}
	}
	assert.Equal(t, 1.0, pointValue(t, gpuResources(md)[lostUUID], "nvidia.gpu.xid.errors", map[string]string{"nvidia.gpu.xid": "79"}))

	clock.Step(20 * time.Second) // t=45 s: back on the bus
	md, err = s.scrape(context.Background())
	require.NoError(t, err)
	_, ok := findMetric(gpuResources(md)[lostUUID], "hw.power")
	assert.True(t, ok, "it reports normally again")
	// Still failed in health: XID 79 was less than 10 minutes ago.
	assert.Equal(t, 1.0, status(pmetricResult{md: md}, lostUUID, "failed"))
}

func TestECCDegradingMakesTheGPUDegraded(t *testing.T) {
	s, _, res := scrapeAt(t, "dgxh100", "ecc-degrading", 40*time.Second)
	require.NoError(t, res.err)
	g6 := gpuResources(res.md)[s.devices[6].uuid]
	assert.Equal(t, 1.0, pointValue(t, g6, "hw.status", map[string]string{"hw.state": "degraded"}))
	assert.Equal(t, 1.0, pointValue(t, g6, "hw.errors", map[string]string{"error.type": "uncorrected", "nvidia.gpu.ecc.counter_type": "volatile"}))
	assert.Equal(t, 80.0, pointValue(t, g6, "hw.errors", map[string]string{"error.type": "corrected", "nvidia.gpu.ecc.counter_type": "volatile"}))
	assert.Equal(t, 1.0, pointValue(t, g6, "nvidia.gpu.memory.remap.pending", nil))
	g5 := gpuResources(res.md)[s.devices[5].uuid]
	assert.Equal(t, 1.0, pointValue(t, g5, "hw.status", map[string]string{"hw.state": "ok"}))
	assert.Equal(t, 0.0, pointValue(t, g5, "hw.errors", map[string]string{"error.type": "uncorrected", "nvidia.gpu.ecc.counter_type": "volatile"}))
}

func TestSharedGPUReportsEachProcess(t *testing.T) {
	s, _, res := scrapeAt(t, "dgxh100", "shared-gpu", 30*time.Second)
	require.NoError(t, res.err)
	procs := processResources(res.md)
	gpu0 := s.devices[0].uuid
	mem := map[string]float64{}
	sm := map[string]float64{}
	for _, pid := range []string{"41001", "41002", "41003"} {
		p, ok := procs[gpu0+"/"+pid]
		require.True(t, ok, "process %s on GPU 0", pid)
		mem[pid] = pointValue(t, p, "nvidia.gpu.process.memory.usage", nil)
		sm[pid] = pointValue(t, p, "nvidia.gpu.process.utilization", map[string]string{"nvidia.gpu.engine": "sm"})
		name, _ := p.Resource().Attributes().Get("process.executable.name")
		assert.NotEmpty(t, name.Str())
	}
	assert.Greater(t, mem["41001"], mem["41002"])
	assert.Greater(t, mem["41002"], mem["41003"])
	assert.Greater(t, sm["41001"], sm["41002"])
	assert.Greater(t, sm["41002"], sm["41003"])
	used := pointValue(t, gpuResources(res.md)[gpu0], "hw.gpu.memory.usage", nil)
	assert.InDelta(t, used, mem["41001"]+mem["41002"]+mem["41003"], used*0.01, "the processes' memory adds up to the GPU's")
	device := pointValue(t, gpuResources(res.md)[gpu0], "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"})
	assert.InDelta(t, device, sm["41001"]+sm["41002"]+sm["41003"], 0.03)
}

func TestMIGInstancesOfAMixedLayout(t *testing.T) {
	s, _, res := scrapeAt(t, "dgxa100", "mig", 30*time.Second)
	require.NoError(t, res.err)
	migs := migResources(res.md)
	require.Len(t, migs, 4+7, "GPU 0: four instances, GPU 1: seven")
	profiles := map[string][]string{}
	for _, m := range migs {
		a := m.Resource().Attributes()
		parent, _ := a.Get("hw.parent")
		profile, _ := a.Get("nvidia.mig.profile")
		profiles[parent.Str()] = append(profiles[parent.Str()], profile.Str())
		limit := pointValue(t, m, "hw.gpu.memory.limit", nil)
		used := pointValue(t, m, "hw.gpu.memory.usage", nil)
		assert.Positive(t, used)
		assert.Less(t, used, limit)
		_, hasActivity := findMetric(m, "nvidia.gpu.profiling.activity")
		assert.False(t, hasActivity, "no GPM on A100")
	}
	assert.ElementsMatch(t, []string{"3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"}, profiles[s.devices[0].uuid])
	assert.Len(t, profiles[s.devices[1].uuid], 7)
	// The parents keep their device-level metrics; utilization is not available under MIG.
	parent := gpuResources(res.md)[s.devices[0].uuid]
	_, hasPower := findMetric(parent, "hw.power")
	assert.True(t, hasPower)
	_, hasUtil := findMetric(parent, "hw.gpu.utilization")
	assert.False(t, hasUtil)
	// Processes inside MIG instances carry the instance's identity.
	for key, p := range processResources(res.md) {
		a := p.Resource().Attributes()
		if parent, ok := a.Get("hw.parent"); ok {
			assert.Equal(t, s.devices[0].uuid == parent.Str() || s.devices[1].uuid == parent.Str(), true, key)
			_, hasMIG := a.Get("nvidia.mig.uuid")
			assert.True(t, hasMIG)
		}
	}
}

func TestMIGActivityFromGPMOnHopper(t *testing.T) {
	_, _, res := scrapeAt(t, "dgxh100", "mig", 30*time.Second)
	require.NoError(t, res.err)
	for _, m := range migResources(res.md) {
		v := pointValue(t, m, "nvidia.gpu.profiling.activity", map[string]string{"nvidia.gpu.profiling.metric": "sm_active"})
		assert.Positive(t, v)
		assert.LessOrEqual(t, v, 1.0)
	}
}

func TestProfilingOnHopperNotOnAmpere(t *testing.T) {
	_, _, hopper := scrapeWith(t, fullTestConfig(t), "dgxh100", "steady-training", 30*time.Second)
	for _, gpu := range gpuResources(hopper.md) {
		assert.Greater(t, pointValue(t, gpu, "nvidia.gpu.profiling.activity", map[string]string{"nvidia.gpu.profiling.metric": "tensor_active"}), 0.3)
		assert.Positive(t, pointValue(t, gpu, "nvidia.gpu.profiling.bandwidth", map[string]string{"nvidia.gpu.interconnect": "nvlink", "network.io.direction": "transmit"}))
	}
	_, _, ampere := scrapeAt(t, "dgxa100", "steady-training", 30*time.Second)
	for _, gpu := range gpuResources(ampere.md) {
		_, ok := findMetric(gpu, "nvidia.gpu.profiling.activity")
		assert.False(t, ok, "quietly absent where GPM is not supported")
	}
}

// A process reports its SM share by default (processes.engines); the other engines are
// opt-in. A process's engine is reported where the GPU's own hw.gpu.utilization for it
// is, or where the receiver did not read the GPU's engines (hw.gpu.utilization off). GPUs
// without NVENC (A100, H100, H200, B200) answer 0 % for their encoder, as `nvidia-smi -q`
// shows ("Encoder : 0 %") and dcgm-exporter's DCGM_FI_DEV_ENC_UTIL carries: the series is
// there, at 0.
func TestProcessEngines(t *testing.T) {
	engines := func(cfg *Config) (gpu, process []string) {
		s, _, res := scrapeWith(t, cfg, "dgxh100", "shared-gpu", 30*time.Second)
		require.NoError(t, res.err)
		p, ok := processResources(res.md)[s.devices[0].uuid+"/41001"]
		require.True(t, ok)
		m, ok := findMetric(p, "nvidia.gpu.process.utilization")
		require.True(t, ok)
		for i := 0; i < m.Gauge().DataPoints().Len(); i++ {
			v, _ := m.Gauge().DataPoints().At(i).Attributes().Get("nvidia.gpu.engine")
			process = append(process, v.Str())
		}
		if m, ok := findMetric(gpuResources(res.md)[s.devices[0].uuid], "hw.gpu.utilization"); ok {
			for i := 0; i < m.Gauge().DataPoints().Len(); i++ {
				v, _ := m.Gauge().DataPoints().At(i).Attributes().Get("hw.gpu.task")
				gpu = append(gpu, v.Str())
			}
		}
		return gpu, process
	}
	_, process := engines(testConfig())
	assert.Equal(t, []string{"sm"}, process, "by default")

	all := testConfig()
	all.Processes.Engines = []string{"sm", "memory", "encoder", "decoder"}
	gpu, process := engines(all)
	assert.ElementsMatch(t, []string{"general", "encoder", "decoder"}, gpu, "an H100's encoder reads 0 %")
	assert.ElementsMatch(t, []string{"sm", "memory", "encoder", "decoder"}, process)

	all.Metrics.HwGpuUtilization.Enabled = false
	gpu, process = engines(all)
	assert.Empty(t, gpu)
	assert.ElementsMatch(t, []string{"sm", "memory", "encoder", "decoder"}, process)
}
