package gpureceiver

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

// What real NVIDIA drivers answer, as the simulator models them from nvml.h and NVIDIA's
// kernel modules (internal/gpusim/driver.go), and what the receiver makes of it.

// simWith is a simulator of the test's options on the test's clock.
func simWith(t *testing.T, opts gpusim.Options, clock *fakeClock) *gpusim.Simulator {
	t.Helper()
	opts.Seed, opts.Now = 1, clock.Now
	sim, err := gpusim.New(opts)
	require.NoError(t, err)
	return sim
}

// scrapes runs n collections 10 s apart and returns the last one's metrics.
func scrapes(t *testing.T, s *gpuScraper, clock *fakeClock, n int) pmetric.Metrics {
	t.Helper()
	var md pmetric.Metrics
	for range n {
		clock.Step(10 * time.Second)
		var err error
		md, err = s.scrape(context.Background())
		require.NoError(t, err)
	}
	return md
}

// Since 535.113 the driver lists only the processes of the caller's PID namespace: an agent
// without hostPID sees none of the other containers' processes, and says so instead of
// reporting GPUs that look idle.
func TestProcessesHiddenFromAnAgentInItsOwnPIDNamespace(t *testing.T) {
	for _, c := range []struct {
		name, driver, namespace string
		hidden                  bool
	}{
		{"current driver, own namespace", "580.95.05", gpusim.PIDNamespaceContainer, true},
		{"current driver, hostPID", "580.95.05", gpusim.PIDNamespaceHost, false},
		{"before 535.113 host PIDs were listed to everyone", "535.104.05", gpusim.PIDNamespaceContainer, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			sim := simWith(t, gpusim.Options{System: "dgxh100", Scenario: "steady-training", Driver: c.driver, PIDNamespace: c.namespace}, clock)
			cfg := testConfig()
			cfg.Simulated.PIDNamespace = c.namespace
			s, logs := observedScraper(t, cfg, sim, clock)
			md := scrapes(t, s, clock, 3)
			assert.Equal(t, c.hidden, len(processResources(md)) == 0, "process series")
			for uuid, gpu := range gpuResources(md) {
				v, ok := pointValueOK(gpu, "nvidia.gpu.processes.hidden", nil)
				assert.Equal(t, c.hidden, ok, "%s: nvidia.gpu.processes.hidden present", uuid)
				if ok {
					assert.Equal(t, 1.0, v)
				}
			}
			hiddenLogs := logs.FilterMessageSnippet("NVML lists no process")
			if !c.hidden {
				assert.Zero(t, hiddenLogs.Len())
				return
			}
			require.Equal(t, 8, hiddenLogs.Len(), "one line per GPU, not one per collection")
			assert.Contains(t, hiddenLogs.All()[0].ContextMap()["likely_cause"], "hostPID")
		})
	}
}

// 535.43.02 to 535.98 write 32-byte process entries into go-nvml's 24-byte ones: the list is
// not asked for at all (the real library would write past go-nvml's buffer), and one line
// says why.
func TestProcessListIsNotReadOnDriversThatCorruptIt(t *testing.T) {
	for _, c := range []struct {
		driver string
		read   bool
	}{{"535.54.03", false}, {"535.86.10", false}, {"535.104.05", true}} {
		clock := newFakeClock()
		sim := simWith(t, gpusim.Options{System: "dgxh100", Scenario: "shared-gpu", Driver: c.driver}, clock)
		s, logs := observedScraper(t, testConfig(), sim, clock)
		md := scrapes(t, s, clock, 3)
		assert.Equal(t, c.read, sim.Calls()["DeviceGetComputeRunningProcesses"] > 0, c.driver)
		assert.Equal(t, c.read, len(processResources(md)) > 0, c.driver)
		if !c.read {
			assert.Equal(t, 1, logs.FilterMessageSnippet("535.104.05 or later").Len(), c.driver)
			continue
		}
		gpu0 := s.devices[0].uuid
		for _, pid := range []string{"41001", "41002", "41003"} {
			_, ok := processResources(md)[gpu0+"/"+pid]
			assert.True(t, ok, "%s: the shared GPU's process %s, with its own PID", c.driver, pid)
		}
	}
}

// migProfiles lists the nvidia.mig.profile of every MIG device, by parent index.
func migProfiles(t *testing.T, s *gpuScraper, md pmetric.Metrics) map[int][]string {
	t.Helper()
	index := map[string]int{}
	for _, d := range s.devices {
		index[d.uuid] = d.index
	}
	out := map[int][]string{}
	for _, rm := range migResources(md) {
		a := rm.Resource().Attributes()
		parent, _ := a.Get("hw.parent")
		name := "(none)"
		if p, ok := a.Get("nvidia.mig.profile"); ok {
			name = p.Str()
		}
		out[index[parent.Str()]] = append(out[index[parent.Str()]], name)
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

// A GPU instance's profileId is the device's own profile id (H100: 1g.10gb=19, 3g.40gb=9,
// 7g.80gb=0), not the enum GetGpuInstanceProfileInfo takes: names come from the enum whose
// answer carries that id, as go-nvlib and the device plugin name them.
func TestMIGProfilesAreNamedFromTheDevicesOwnProfileIDs(t *testing.T) {
	for _, c := range []struct {
		system string
		want   map[int][]string
	}{
		{"dgxh100", map[int][]string{
			0: {"1c.3g.40gb", "1c.3g.40gb", "1c.3g.40gb", "1g.10gb", "1g.10gb+me", "2g.20gb"},
			1: {"1g.20gb", "1g.20gb", "4g.40gb"},
			2: {"7g.80gb"},
		}},
		// No GPM on the A100: a compute instance that does not carry its GPU instance's
		// memory has no series of its own there, only its processes.
		{"dgxa100", map[int][]string{
			0: {"1c.3g.20gb", "1g.5gb", "1g.5gb+me", "2g.10gb"},
			1: {"1g.10gb", "1g.10gb", "4g.20gb"},
			2: {"7g.40gb"},
		}},
		{"dgxh200", map[int][]string{
			0: {"1c.3g.71gb", "1c.3g.71gb", "1c.3g.71gb", "1g.18gb", "1g.18gb+me", "2g.35gb"},
			1: {"1g.35gb", "1g.35gb", "4g.71gb"},
			2: {"7g.141gb"},
		}},
		{"dgxb200", map[int][]string{
			0: {"1c.3g.90gb", "1c.3g.90gb", "1c.3g.90gb", "1g.23gb", "1g.23gb+me", "2g.45gb"},
			1: {"1g.45gb", "1g.45gb", "4g.90gb"},
			2: {"7g.180gb"},
		}},
	} {
		clock := newFakeClock()
		sim := simWith(t, gpusim.Options{System: c.system, Scenario: "mig-mixed"}, clock)
		s := startedScraper(t, testConfig(), sim, clock)
		md := scrapes(t, s, clock, 2)
		assert.Equal(t, c.want, migProfiles(t, s, md), c.system)
	}
}

// Without NVIDIA's MIG monitor capability (which the container toolkit gives only with
// CAP_SYS_ADMIN; the shipped DaemonSet has none), the calls nvml.h says "require privileged
// user" answer NO_PERMISSION: the instances are still read on their own handles (memory,
// activity, processes) and named from what each reports of itself and the driver's own
// profile names; the refusal is counted and logged, not taken for "no data".
func TestMIGWithoutTheMonitorCapability(t *testing.T) {
	clock := newFakeClock()
	sim := simWith(t, gpusim.Options{System: "dgxh100", Scenario: "mig-mixed", NoMIGMonitor: true}, clock)
	s, logs := observedScraper(t, testConfig(), sim, clock)
	md := scrapes(t, s, clock, 3)
	assert.Equal(t, map[int][]string{
		0: {"1c.3g.40gb", "1c.3g.40gb", "1c.3g.40gb", "1g.10gb", "1g.10gb+me", "2g.20gb"},
		1: {"1g.20gb", "1g.20gb", "4g.40gb"},
		2: {"7g.80gb"},
	}, migProfiles(t, s, md), "named without privilege")
	gpu0 := gpuResources(md)[s.devices[0].uuid]
	assert.Equal(t, 1.0, pointValue(t, gpu0, "nvidia.nvml.errors", map[string]string{"nvidia.nvml.call": callGetGpuInstanceByID, "nvidia.nvml.error": "ERROR_NO_PERMISSION"}))
	assert.Equal(t, 3, logs.FilterMessageSnippet("without a privilege").FilterField(zap.String("call", callGetGpuInstanceByID)).Len(), "once per MIG-enabled GPU")
	withMemory, withActivity := 0, 0
	for _, rm := range migResources(md) {
		if _, ok := findMetric(rm, "hw.gpu.memory.usage"); ok {
			withMemory++
		}
		if _, ok := findMetric(rm, "nvidia.gpu.profiling.activity"); ok {
			withActivity++
		}
	}
	assert.Equal(t, 8, withMemory, "one per GPU instance")
	assert.Equal(t, 10, withActivity, "one per MIG device")
	migProcesses := 0
	for _, rm := range processResources(md) {
		if _, ok := rm.Resource().Attributes().Get("nvidia.mig.uuid"); ok {
			migProcesses++
		}
	}
	assert.Equal(t, 10, migProcesses, "each MIG device's process, listed on its own handle")
}

// Where the driver gives no profile names and the agent may not ask for a GPU instance's
// profile id, the name is written from the GPU's total memory, which in MIG mode is itself
// a privileged read: a GPU read before MIG was turned on is named, one never read whole is
// left unnamed rather than guessed.
func TestMIGProfileNamesWithoutTheDriversNames(t *testing.T) {
	clock := newFakeClock()
	sim := simWith(t, gpusim.Options{System: "dgxh100", Scenario: "mig-mixed", NoMIGMonitor: true}, clock)
	sim.SetSymbolMissing(nvmlclient.SymbolGetGpuInstanceProfileInfoV, true)
	s, logs := observedScraper(t, testConfig(), sim, clock)
	md := scrapes(t, s, clock, 3)
	assert.Equal(t, []string{"(none)"}, migProfiles(t, s, md)[2], "no name rather than a wrong one")
	assert.Positive(t, logs.FilterMessageSnippet("Cannot name the profile").Len())

	require.NoError(t, sim.SetMIGInstances(4, []gpusim.MIGInstance{{Profile: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1}, {Profile: nvml.GPU_INSTANCE_PROFILE_2_SLICE}}))
	md = scrapes(t, s, clock, 8)
	assert.Equal(t, []string{"1g.10gb+me", "2g.20gb"}, migProfiles(t, s, md)[4], "GPU 4 was read whole before")
}

// Compute instances sharing a GPU instance are each a MIG device: each gets its own GPM
// interval (sampled on its own handle) and its own processes; the GPU instance's memory is
// reported once, on its first compute instance.
func TestComputeInstancesOfOneGPUInstance(t *testing.T) {
	clock := newFakeClock()
	sim := simWith(t, gpusim.Options{System: "dgxh100", Scenario: "mig-mixed"}, clock)
	s := startedScraper(t, testConfig(), sim, clock)
	md := scrapes(t, s, clock, 3)
	var shared []pmetric.ResourceMetrics
	for _, rm := range migResources(md) {
		a := rm.Resource().Attributes()
		parent, _ := a.Get("hw.parent")
		gi, _ := a.Get("nvidia.mig.gpu_instance_id")
		if parent.Str() == s.devices[0].uuid && gi.Int() == 1 {
			shared = append(shared, rm)
		}
	}
	require.Len(t, shared, 3)
	sort.Slice(shared, func(i, j int) bool {
		a, _ := shared[i].Resource().Attributes().Get("nvidia.mig.compute_instance_id")
		b, _ := shared[j].Resource().Attributes().Get("nvidia.mig.compute_instance_id")
		return a.Int() < b.Int()
	})
	utils := map[float64]bool{}
	for ci, rm := range shared {
		u := pointValue(t, rm, "hw.gpu.utilization", map[string]string{"hw.gpu.task": "general"})
		assert.Positive(t, u, "compute instance %d: a real interval, not microseconds", ci)
		utils[u] = true
		_, hasMemory := findMetric(rm, "hw.gpu.memory.usage")
		assert.Equal(t, ci == 0, hasMemory, "compute instance %d: the GPU instance's memory once", ci)
	}
	assert.Len(t, utils, 3, "each compute instance its own activity")
	perInstance := map[string]int{}
	for _, rm := range processResources(md) {
		if mig, ok := rm.Resource().Attributes().Get("nvidia.mig.uuid"); ok {
			perInstance[mig.Str()]++
		}
	}
	for _, rm := range shared {
		mig, _ := rm.Resource().Attributes().Get("nvidia.mig.uuid")
		assert.Equal(t, 1, perInstance[mig.Str()], "its own process")
	}
}

// nvml.h: the NVLink data-link error counters are "unsupported for Blackwell+"; B200s count
// link recovery and symbol errors with NVLink5's counters instead.
func TestNVLinkErrorsOnBlackwell(t *testing.T) {
	for _, c := range []struct {
		system string
		types  []string
	}{
		{"dgxb200", []string{"recovery", "symbol"}},
		{"dgxh100", []string{"crc", "recovery", "replay"}},
	} {
		clock := newFakeClock()
		sim := newSim(t, c.system, "steady-training", clock)
		md := scrapes(t, startedScraper(t, testConfig(), sim, clock), clock, 2)
		for uuid, gpu := range gpuResources(md) {
			_, ok := findMetric(gpu, "nvidia.gpu.nvlink.errors")
			assert.True(t, ok, "%s %s: nvidia.gpu.nvlink.errors by default", c.system, uuid)
		}
		full := fullTestConfig(t)
		clock = newFakeClock()
		sim = newSim(t, c.system, "steady-training", clock)
		md = scrapes(t, startedScraper(t, full, sim, clock), clock, 2)
		gpu := gpuResources(md)[sim.UUIDs()[0]]
		m, ok := findMetric(gpu, "nvidia.gpu.nvlink.errors")
		require.True(t, ok)
		types := map[string]bool{}
		for i := 0; i < m.Sum().DataPoints().Len(); i++ {
			v, _ := m.Sum().DataPoints().At(i).Attributes().Get("nvidia.gpu.nvlink.error.type")
			types[v.Str()] = true
		}
		var got []string
		for k := range types {
			got = append(got, k)
		}
		sort.Strings(got)
		assert.Equal(t, c.types, got, c.system)
	}
}

// The PCIe byte counters (field ids 197/198) first appear with R555; on R535 and R550, the
// most deployed branches, hw.gpu.io comes from GPM's PCIe rates (Hopper) or the driver's
// 20 ms throughput sample, and grows as the counters would.
func TestPCIeBytesBeforeR555(t *testing.T) {
	increase := func(system, driver string) (float64, float64) {
		clock := newFakeClock()
		sim := simWith(t, gpusim.Options{System: system, Scenario: "steady-training", Driver: driver}, clock)
		s := startedScraper(t, testConfig(), sim, clock)
		value := func(md pmetric.Metrics) (float64, float64) {
			gpu := gpuResources(md)[s.devices[0].uuid]
			return pointValue(t, gpu, "hw.gpu.io", map[string]string{"network.io.direction": "transmit"}),
				pointValue(t, gpu, "hw.gpu.io", map[string]string{"network.io.direction": "receive"})
		}
		tx0, rx0 := value(scrapes(t, s, clock, 3))
		tx1, rx1 := value(scrapes(t, s, clock, 6))
		return tx1 - tx0, rx1 - rx0
	}
	wantTX, wantRX := increase("dgxh100", "580.95.05") // the driver's own counters
	require.Positive(t, wantTX)
	for _, c := range []struct{ system, driver string }{{"dgxh100", "550.127.05"}, {"dgxh100", "535.230.02"}, {"dgxa100", "550.127.05"}} {
		tx, rx := increase(c.system, c.driver)
		assert.InEpsilon(t, wantTX, tx, 0.1, "%s on %s: transmit bytes over a minute", c.system, c.driver)
		assert.InEpsilon(t, wantRX, rx, 0.1, "%s on %s: receive bytes over a minute", c.system, c.driver)
	}
}

func TestPCIeByteCounterWraps(t *testing.T) {
	var c pcieBytes
	c.add(1000)
	c.add(4000)
	assert.Equal(t, 4000.0, c.total)
	c.add(500) // wrapped (or reset): 500 counted since, never a step back
	assert.Equal(t, 4500.0, c.total)
	c.add(700)
	assert.Equal(t, 4700.0, c.total)
	// A collection whose field read failed counts from the rate; the counter then resumes
	// from its own reading, not counting those bytes again.
	now := time.Unix(1000, 0)
	c.addRate(100, now)
	c.addRate(100, now.Add(10*time.Second))
	assert.Equal(t, 5700.0, c.total)
	c.add(2700)
	assert.Equal(t, 5700.0, c.total)
	c.add(2800)
	assert.Equal(t, 5800.0, c.total)
}

// Per-process samples as real drivers return them (nvtop#110): the sample at lastSeen
// comes back, a share can exceed 100 %, PIDs outside the process list (an exited process,
// another PID namespace's) are in the buffer. Those are dropped; a listed process without
// a sample did nothing in the interval and reads 0, one whose samples were all impossible
// was active and reads nothing.
func TestProcessUtilizationSamplesAsDriversReturnThem(t *testing.T) {
	lib, dev := oneGPU()
	dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{{Pid: 101, UsedGpuMemory: 1 << 30}, {Pid: 102, UsedGpuMemory: 1 << 30}, {Pid: 103, UsedGpuMemory: 1 << 30}}, nvml.SUCCESS
	}
	dev.GetGraphicsRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	var lastSeen []uint64
	dev.GetProcessUtilizationFunc = func(since uint64) ([]nvml.ProcessUtilizationSample, nvml.Return) {
		lastSeen = append(lastSeen, since)
		if since == 0 {
			return []nvml.ProcessUtilizationSample{{Pid: 101, TimeStamp: 1000, SmUtil: 30}}, nvml.SUCCESS
		}
		return []nvml.ProcessUtilizationSample{
			{Pid: 101, TimeStamp: since, SmUtil: 90},      // not newer than asked for
			{Pid: 101, TimeStamp: since + 1, SmUtil: 40},  // the interval's
			{Pid: 101, TimeStamp: since + 2, SmUtil: 180}, // impossible
			{Pid: 999, TimeStamp: since + 3, SmUtil: 70},  // not in the process list
			{Pid: 101, TimeStamp: since + 4, SmUtil: 20},  // the interval's
			{Pid: 103, TimeStamp: since + 5, SmUtil: 250}, // impossible, and its only one
		}, nvml.SUCCESS
	}
	clock := newFakeClock()
	s := startedScraper(t, testConfig(), lib, clock)
	md := scrapes(t, s, clock, 2)
	procs := processResources(md)
	uuid := "GPU-11111111-2222-3333-4444-555555555555"
	require.Len(t, procs, 3, "no series for PID 999")
	assert.InDelta(t, 0.30, pointValue(t, procs[uuid+"/101"], "nvidia.gpu.process.utilization", map[string]string{"nvidia.gpu.engine": "sm"}), 1e-9,
		"(40+20)/2: the stale and the impossible sample left out")
	assert.Equal(t, 0.0, pointValue(t, procs[uuid+"/102"], "nvidia.gpu.process.utilization", map[string]string{"nvidia.gpu.engine": "sm"}),
		"a listed process without a sample was idle, not absent")
	_, ok := findMetric(procs[uuid+"/103"], "nvidia.gpu.process.utilization")
	assert.False(t, ok, "a process whose only sample is impossible was active: unknown, not idle")
	assert.Equal(t, []uint64{0, 1000}, lastSeen)
	md = scrapes(t, s, clock, 1)
	assert.Equal(t, uint64(1005), lastSeen[2], "the newest sample seen, whatever its PID or value")
}

// nvmlDeviceGetTemperature is deprecated from R570 on (NVML 13 on R580): the supported
// nvmlDeviceGetTemperatureV is used where the driver has it, the old call before, and
// neither is called where the library lacks the symbol.
func TestTemperatureThroughTheSupportedCall(t *testing.T) {
	for _, c := range []struct {
		driver        string
		missing       string
		v, deprecated bool
	}{
		{"580.95.05", "", true, false},
		{"550.127.05", "", false, true},
		{"550.127.05", "nvmlDeviceGetTemperature", false, false},
	} {
		clock := newFakeClock()
		sim := simWith(t, gpusim.Options{System: "dgxh100", Scenario: "steady-training", Driver: c.driver}, clock)
		if c.missing != "" {
			sim.SetSymbolMissing(c.missing, true)
		}
		md := scrapes(t, startedScraper(t, testConfig(), sim, clock), clock, 2)
		assert.Equal(t, c.v, sim.Calls()["DeviceGetTemperatureV"] > 0, "%s: GetTemperatureV", c.driver)
		assert.Equal(t, c.deprecated, sim.Calls()["DeviceGetTemperature"] > 0, "%s: GetTemperature", c.driver)
		_, ok := pointValueOK(gpuResources(md)[sim.UUIDs()[0]], "hw.temperature", map[string]string{"hw.sensor_location": "gpu"})
		assert.Equal(t, c.v || c.deprecated, ok, c.driver)
	}
}

// TestDriverMatrix reads each system on the driver branches it is deployed with, through
// the receiver's production path, and checks what an operator relies on there: every GPU
// reports its health and memory, nothing is logged as an error every collection, and what
// the branch and the GPU cannot give is absent rather than made up.
func TestDriverMatrix(t *testing.T) {
	for _, c := range []struct {
		system, scenario, driver string
		gpus                     int
		// present and absent are metrics of the first GPU.
		present, absent []string
		migProfiles     bool
	}{
		{"dgxh100", "shared-gpu", "535.230.02", 8, []string{"hw.gpu.io", "hw.temperature", "nvidia.gpu.nvlink.errors", "nvidia.gpu.profiling.activity"}, nil, false},
		{"dgxh100", "shared-gpu", "580.95.05", 8, []string{"hw.gpu.io", "hw.temperature", "nvidia.gpu.nvlink.errors", "nvidia.gpu.profiling.activity"}, nil, false},
		{"dgxa100", "mig-mixed", "550.127.05", 8, []string{"hw.gpu.memory.usage", "hw.temperature"}, []string{"nvidia.gpu.profiling.activity"}, true},
		{"l4", "steady-training", "550.127.05", 4, []string{"hw.gpu.io", "hw.temperature", "hw.power"}, []string{"nvidia.gpu.nvlink.errors", "nvidia.gpu.profiling.activity"}, false},
		{"dgxb200", "steady-training", "580.95.05", 8, []string{"hw.gpu.io", "nvidia.gpu.nvlink.errors", "nvidia.gpu.profiling.activity"}, nil, false},
		{"vgpu-h100", "steady-training", "550.127.05", 1, []string{"hw.gpu.memory.usage", "hw.gpu.utilization"}, []string{"hw.power", "hw.energy", "hw.temperature", "hw.gpu.io", "nvidia.gpu.profiling.activity"}, false},
	} {
		t.Run(c.system+"@"+c.driver, func(t *testing.T) {
			clock := newFakeClock()
			sim := simWith(t, gpusim.Options{System: c.system, Scenario: c.scenario, Driver: c.driver}, clock)
			s, logs := observedScraper(t, fullTestConfig(t), sim, clock)
			md := scrapes(t, s, clock, 4)
			gpus := gpuResources(md)
			require.Len(t, gpus, c.gpus)
			for uuid, gpu := range gpus {
				assert.Equal(t, 1.0, pointValue(t, gpu, "hw.status", map[string]string{"hw.state": "ok"}), uuid)
				_, hasMemory := findMetric(gpu, "hw.gpu.memory.limit")
				assert.True(t, hasMemory, "%s: framebuffer", uuid)
				driver, _ := gpu.Resource().Attributes().Get("hw.driver_version")
				assert.Equal(t, c.driver, driver.Str())
			}
			first := gpus[sim.UUIDs()[0]]
			for _, name := range c.present {
				_, ok := findMetric(first, name)
				assert.True(t, ok, "%s present", name)
			}
			for _, name := range c.absent {
				_, ok := findMetric(first, name)
				assert.False(t, ok, "%s absent", name)
			}
			if c.migProfiles {
				for _, names := range migProfiles(t, s, md) {
					assert.NotContains(t, names, "(none)")
				}
			}
			assert.Zero(t, logs.FilterLevelExact(zapcore.ErrorLevel).Len(), "no error logs")
			// Whatever the branch lacks is asked once, not every collection. (The XID
			// watcher's waits run on a goroutine of their own, at their own pace.)
			scrapeCalls := func() int64 {
				var n int64
				for call, c := range sim.Calls() {
					if call != "EventSetWait" {
						n += c
					}
				}
				return n
			}
			calls := scrapeCalls()
			scrapes(t, s, clock, 1)
			perScrape := scrapeCalls() - calls
			scrapes(t, s, clock, 1)
			assert.Equal(t, perScrape, scrapeCalls()-calls-perScrape, "steady NVML calls per collection")
			if c.system == "vgpu-h100" {
				gpm := sim.Calls()["GpmSampleGet"]
				scrapes(t, s, clock, 2)
				assert.Equal(t, gpm, sim.Calls()["GpmSampleGet"], "GPM that cannot be sampled is not asked every collection")
				assert.Equal(t, 1, logs.FilterMessageSnippet("vGPU guest").Len())
			}
		})
	}
}
