package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// gpuView is what a correct agent reports of one GPU, in nvidia-smi's units; tests change
// one thing in it to see that the comparison catches it.
type gpuView struct {
	attrs     map[string]any
	values    map[string]float64 // keys k…; memory in MiB, clocks in MHz
	migs      []migView
	processes []processView
}

type migView struct {
	uuid     string
	gi, ci   int
	profile  string
	totalMiB float64
	usedMiB  float64
}

type processView struct {
	pid     int
	name    string
	typ     string
	memMiB  float64
	migUUID string
	gi      int
}

// viewOf is the agent's view matching an nvidia-smi GPU.
func viewOf(s smiSample, g smiGPUState, profiles map[migProfileKey]string) *gpuView {
	v := &gpuView{
		attrs: map[string]any{
			"hw.id": g.UUID, "hw.model": g.Model, "hw.driver_version": s.Driver,
			"nvidia.gpu.index": int64(g.Index), "nvidia.gpu.pci_bus_id": g.BusID,
			"nvidia.gpu.mig.enabled": g.MIG == "Enabled",
		},
		values: map[string]float64{},
	}
	if g.Minor != nil {
		v.attrs["nvidia.gpu.minor_number"] = int64(*g.Minor)
	}
	for smi, agent := range map[string]string{
		vMemTotal: kMemLimit, vMemUsed: kMemUsage, vMemReserved: kMemReserved, vPower: kPower, vPowerLimit: kPowerLimit,
		vTempGPU: kTempGPU, vTempMemory: kTempMemory, vClockSM: kClockSM, vClockMemory: kClockMemory, vMaxSM: kMaxSM, vMaxMemory: kMaxMemory,
	} {
		if x, ok := g.Values[smi]; ok {
			v.values[agent] = x
		}
	}
	for _, m := range g.MIGs {
		v.migs = append(v.migs, migView{uuid: fmt.Sprintf("MIG-%d-%d", m.GPUInstance, m.ComputeInstance), gi: m.GPUInstance, ci: m.ComputeInstance,
			profile: profiles[migProfileKey{g.Index, m.GPUInstance}], totalMiB: m.Values[vMemTotal], usedMiB: m.Values[vMemUsed] + m.Values[vMemReserved]})
	}
	for _, p := range g.Processes {
		typ := "compute"
		if p.Type == "G" {
			typ = "graphics"
		}
		pv := processView{pid: p.PID, name: p.Name, typ: typ, memMiB: deref(p.MemoryMiB), gi: -1}
		if p.GPUInstance != nil {
			pv.gi = *p.GPUInstance
			pv.migUUID = fmt.Sprintf("MIG-%d-0", pv.gi)
		}
		v.processes = append(v.processes, pv)
	}
	return v
}

// metrics renders views as the receiver's OTLP: a resource per GPU, MIG instance and
// process, and the host resource with nvidia.gpu.count.
func metrics(ts time.Time, views ...*gpuView) pmetric.Metrics {
	md := pmetric.NewMetrics()
	t := pcommon.NewTimestampFromTime(ts)
	gauge := func(rm pmetric.ResourceMetrics, name string, v float64, attrs ...string) {
		m := rm.ScopeMetrics().At(0).Metrics().AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptyGauge().DataPoints().AppendEmpty()
		dp.SetTimestamp(t)
		dp.SetDoubleValue(v)
		for i := 0; i+1 < len(attrs); i += 2 {
			dp.Attributes().PutStr(attrs[i], attrs[i+1])
		}
	}
	sum := func(rm pmetric.ResourceMetrics, name string, v int64) {
		m := rm.ScopeMetrics().At(0).Metrics().AppendEmpty()
		m.SetName(name)
		dp := m.SetEmptySum().DataPoints().AppendEmpty()
		dp.SetTimestamp(t)
		dp.SetIntValue(v)
	}
	resource := func(attrs map[string]any) pmetric.ResourceMetrics {
		rm := md.ResourceMetrics().AppendEmpty()
		if err := rm.Resource().Attributes().FromRaw(attrs); err != nil {
			panic(err)
		}
		rm.ScopeMetrics().AppendEmpty()
		return rm
	}
	host := resource(map[string]any{"host.name": "node"})
	sum(host, "nvidia.gpu.count", int64(len(views)))
	for _, v := range views {
		rm := resource(v.attrs)
		for key, x := range v.values {
			switch key {
			case kMemLimit, kMemUsage, kMemReserved:
				sum(rm, key, int64(x*mib))
			case kPower:
				gauge(rm, "hw.power", x)
			case kPowerLimit:
				gauge(rm, "nvidia.gpu.power.limit", x, "nvidia.gpu.power.limit_type", "enforced")
			case kTempGPU, kTempMemory:
				gauge(rm, "hw.temperature", x, "hw.sensor_location", strings.TrimSuffix(strings.TrimPrefix(key, "hw.temperature{"), "}"))
			case kClockSM, kClockMemory:
				gauge(rm, "nvidia.gpu.clock.frequency", x*1e6, "nvidia.gpu.clock.type", strings.TrimSuffix(strings.TrimPrefix(key, "nvidia.gpu.clock.frequency{"), "}"))
			case kMaxSM, kMaxMemory:
				gauge(rm, "nvidia.gpu.clock.frequency.max", x*1e6, "nvidia.gpu.clock.type", strings.TrimSuffix(strings.TrimPrefix(key, "nvidia.gpu.clock.frequency.max{"), "}"))
			}
		}
		gpu := v.attrs["hw.id"].(string)
		for _, m := range v.migs {
			mr := resource(map[string]any{"hw.id": m.uuid, "hw.parent": gpu, "nvidia.mig.uuid": m.uuid, "nvidia.mig.gpu_instance_id": int64(m.gi),
				"nvidia.mig.compute_instance_id": int64(m.ci), "nvidia.mig.profile": m.profile})
			sum(mr, kMemLimit, int64(m.totalMiB*mib))
			sum(mr, kMemUsage, int64(m.usedMiB*mib))
		}
		for _, p := range v.processes {
			attrs := map[string]any{"hw.id": gpu, "process.pid": int64(p.pid), "process.executable.name": p.name, "nvidia.gpu.process.type": p.typ}
			if p.migUUID != "" {
				attrs["hw.id"], attrs["hw.parent"], attrs["nvidia.mig.uuid"], attrs["nvidia.mig.gpu_instance_id"] = p.migUUID, gpu, p.migUUID, int64(p.gi)
			}
			sum(resource(attrs), kProcMemory, int64(p.memMiB*mib))
		}
	}
	return md
}

// checkAgainst compares one nvidia-smi sample with one agent collection a second later.
func checkAgainst(s smiSample, views ...*gpuView) []*Check {
	store := newAgentStore()
	store.add(metrics(s.Time.Add(time.Second), views...))
	return compare(compareInput{Samples: []smiSample{s}, Agent: store, MIGProfiles: migProfiles, MaxGap: 5 * time.Second})
}

var migProfiles = map[migProfileKey]string{{0, 3}: "1g.20gb", {0, 4}: "1g.20gb", {0, 5}: "1g.20gb", {0, 6}: "1g.20gb"}

// withProcesses is the A100 sample with a process in MIG instance 3 (the file has none),
// at a fixed time.
func withProcesses(t *testing.T) smiSample {
	s := readSample(t, "telegraf-a100-sxm4-v12.xml")
	s.Time = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	s.GPUs[0].Processes = []smiProcess{{PID: 4242, Type: "C", Name: "/usr/bin/python3", MemoryMiB: ptr(1024.0), GPUInstance: ptr(3)}}
	return s
}

func failing(checks []*Check) []*Check {
	var out []*Check
	for _, c := range checks {
		if c.Status == statusFail {
			out = append(out, c)
		}
	}
	return out
}

// An agent that reports what nvidia-smi shows passes every check it can make; the rest
// are not comparable, each with its reason.
func TestCompareMatchingPasses(t *testing.T) {
	for _, file := range []string{"telegraf-a100-sxm4-v12.xml", "telegraf-a10g.xml", "telegraf-rtx-4000-sff-ada-v13.xml"} {
		t.Run(file, func(t *testing.T) {
			s := readSample(t, file)
			s.Time = time.Now()
			var views []*gpuView
			for _, g := range s.GPUs {
				views = append(views, viewOf(s, g, migProfiles))
			}
			checks := checkAgainst(s, views...)
			assert.Empty(t, failing(checks))
			fields := map[string]Status{}
			for _, c := range checks {
				fields[c.Subject+"/"+c.Field] = c.Status
				if c.Status == statusSkip {
					assert.NotEmpty(t, c.Note, "a check not made says why: %s", c.Field)
				}
			}
			for _, f := range []string{"GPU/present (UUID)", "GPU/model (product_name / hw.model)", "GPU/memory total (fb_memory_usage/total)",
				"GPU/memory used + reserved", "GPU/temperature (gpu_temp)", "GPU/SM clock (clocks/sm_clock)", "GPU/max SM clock (max_clocks/sm_clock)",
				"GPU/process list (processes / process.pid)", "host/GPU count (attached GPUs / nvidia.gpu.count)"} {
				assert.Equal(t, statusPass, fields[f], f)
			}
			assert.Equal(t, statusSkip, fields["GPU/graphics clock (clocks/graphics_clock)"])
		})
	}
}

func TestCompareMatchingMIGAndProcessesPass(t *testing.T) {
	s := withProcesses(t)
	checks := checkAgainst(s, viewOf(s, s.GPUs[0], migProfiles))
	assert.Empty(t, failing(checks))
	byField := map[string]*Check{}
	for _, c := range checks {
		byField[c.Subject+"/"+c.Field] = c
	}
	assert.Equal(t, statusPass, byField["GPU/MIG instances (mig_devices)"].Status)
	assert.Equal(t, "gi 3/ci 0, gi 4/ci 0, gi 5/ci 0, gi 6/ci 0", byField["GPU/MIG instances (mig_devices)"].Agent)
	assert.Equal(t, statusPass, byField["MIG gi 3/ci 0/profile (nvidia-smi mig -lgi / nvidia.mig.profile)"].Status)
	assert.Equal(t, statusPass, byField["MIG gi 6/ci 0/memory total"].Status)
	assert.Equal(t, statusPass, byField["process 4242/used memory"].Status)
	assert.Equal(t, statusPass, byField["process 4242/MIG GPU instance"].Status)
	assert.Equal(t, statusPass, byField["process 4242/name (process_name / process.executable.name)"].Status, "the same file name")
}

// Each kind of mismatch fails its own row, with a line that says what differs.
func TestCompareEachMismatchFails(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(v *gpuView)
		field  string
		smi    string
		agent  string
		note   string
	}{
		{name: "model", change: func(v *gpuView) { v.attrs["hw.model"] = "NVIDIA A100-SXM4-40GB" },
			field: "GPU/model (product_name / hw.model)", smi: "NVIDIA A100-SXM4-80GB", agent: "NVIDIA A100-SXM4-40GB"},
		{name: "minor number", change: func(v *gpuView) { v.attrs["nvidia.gpu.minor_number"] = int64(0) },
			field: "GPU/minor number", smi: "1", agent: "0"},
		{name: "MIG mode", change: func(v *gpuView) { v.attrs["nvidia.gpu.mig.enabled"] = false },
			field: "GPU/MIG mode (current_mig / nvidia.gpu.mig.enabled)", smi: "true", agent: "false"},
		{name: "identity attribute missing", change: func(v *gpuView) { delete(v.attrs, "nvidia.gpu.pci_bus_id") },
			field: "GPU/PCI bus id", agent: "absent", note: "the agent does not report nvidia.gpu.pci_bus_id"},
		{name: "memory total", change: func(v *gpuView) { v.values[kMemLimit] -= 2 },
			field: "GPU/memory total (fb_memory_usage/total)", smi: "81920 MiB", agent: "81918 MiB"},
		{name: "memory used without the reservation", change: func(v *gpuView) { v.values[kMemUsage] += 2048 },
			field: "GPU/memory used + reserved", smi: "919 MiB", agent: "2967 MiB"},
		{name: "power", change: func(v *gpuView) { v.values[kPower] = 100 },
			field: "GPU/power draw (power_draw)", smi: "67.03 W", agent: "100 W"},
		{name: "temperature", change: func(v *gpuView) { v.values[kTempGPU] += 6 },
			field: "GPU/temperature (gpu_temp)", smi: "27 °C", agent: "33 °C"},
		{name: "memory temperature missing", change: func(v *gpuView) { delete(v.values, kTempMemory) },
			field: "GPU/memory temperature (memory_temp)", smi: "44 °C", agent: "absent", note: "the agent never reported hw.temperature{memory}"},
		{name: "SM clock", change: func(v *gpuView) { v.values[kClockSM] = 600 },
			field: "GPU/SM clock (clocks/sm_clock)", smi: "1275 MHz", agent: "600 MHz"},
		{name: "max clock", change: func(v *gpuView) { v.values[kMaxMemory] = 1592 },
			field: "GPU/max memory clock (max_clocks/mem_clock)", smi: "1593 MHz", agent: "1592 MHz"},
		{name: "MIG instance missing", change: func(v *gpuView) { v.migs = v.migs[:3] },
			field: "GPU/MIG instances (mig_devices)", note: "the agent lacks instances gi 6/ci 0"},
		{name: "MIG profile", change: func(v *gpuView) { v.migs[1].profile = "1g.19gb" },
			field: "MIG gi 4/ci 0/profile (nvidia-smi mig -lgi / nvidia.mig.profile)", smi: "1g.20gb", agent: "1g.19gb"},
		{name: "MIG memory", change: func(v *gpuView) { v.migs[0].totalMiB = 20480 },
			field: "MIG gi 3/ci 0/memory total", smi: "19968 MiB", agent: "20480 MiB"},
		{name: "process missing", change: func(v *gpuView) { v.processes = nil },
			field: "GPU/process list (processes / process.pid)", smi: "4242", agent: "none", note: "the agent lacks PIDs 4242"},
		{name: "process extra", change: func(v *gpuView) {
			v.processes = append(v.processes, processView{pid: 777, name: "x", typ: "compute", memMiB: 10, gi: -1})
		}, field: "GPU/process list (processes / process.pid)", agent: "777, 4242", note: "nvidia-smi lacks PIDs 777"},
		{name: "process memory", change: func(v *gpuView) { v.processes[0].memMiB = 2048 },
			field: "process 4242/used memory", smi: "1024 MiB", agent: "2048 MiB"},
		{name: "process type", change: func(v *gpuView) { v.processes[0].typ = "graphics" },
			field: "process 4242/type", smi: "C", agent: "graphics"},
		{name: "process name", change: func(v *gpuView) { v.processes[0].name = "bash" },
			field: "process 4242/name (process_name / process.executable.name)", smi: "/usr/bin/python3", agent: "bash"},
		{name: "process MIG instance", change: func(v *gpuView) { v.processes[0].gi = 4; v.processes[0].migUUID = "MIG-4-0" },
			field: "process 4242/MIG GPU instance", smi: "3", agent: "4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := withProcesses(t)
			v := viewOf(s, s.GPUs[0], migProfiles)
			tc.change(v)
			fails := failing(checkAgainst(s, v))
			require.Len(t, fails, 1, "only the changed field fails: %v", fieldsOf(fails))
			c := fails[0]
			assert.Equal(t, tc.field, c.Subject+"/"+c.Field)
			if tc.smi != "" {
				assert.Equal(t, tc.smi, c.SMI)
			}
			if tc.agent != "" {
				assert.Equal(t, tc.agent, c.Agent)
			}
			if tc.note != "" {
				assert.Equal(t, tc.note, c.Note)
			}
		})
	}
}

// A GPU one side does not list fails its presence; a GPU the agent reports no collection
// near an nvidia-smi sample fails too, and samples outside the agent's run are not used.
func TestComparePresenceAndTiming(t *testing.T) {
	s := withProcesses(t)
	other := viewOf(s, s.GPUs[0], migProfiles)
	other.attrs["hw.id"] = "GPU-not-in-nvidia-smi"
	other.migs, other.processes = nil, nil
	fails := failing(checkAgainst(s, other))
	var notes []string
	for _, c := range fails {
		if c.Field == "present (UUID)" {
			notes = append(notes, c.Note)
		}
	}
	assert.ElementsMatch(t, []string{"nvidia-smi lists a GPU the agent never reported", "the agent reports a GPU nvidia-smi does not list"}, notes)

	// Two collections 30 s apart, a sample in the middle: too far from either.
	store := newAgentStore()
	v := viewOf(s, s.GPUs[0], migProfiles)
	store.add(metrics(s.Time.Add(-15*time.Second), v))
	store.add(metrics(s.Time.Add(15*time.Second), v))
	fails = failing(compare(compareInput{Samples: []smiSample{s}, Agent: store, MIGProfiles: migProfiles, MaxGap: 5 * time.Second}))
	require.Len(t, fails, 1)
	assert.Equal(t, "collection near the sample", fails[0].Field)

	// A sample before the agent's first collection is not compared.
	store = newAgentStore()
	store.add(metrics(s.Time.Add(time.Minute), v))
	checks := compare(compareInput{Samples: []smiSample{s}, Agent: store, MIGProfiles: migProfiles, MaxGap: 5 * time.Second})
	assert.Empty(t, failing(checks))
}

// The pair a row shows is the one farthest apart, and one pair out of tolerance fails the
// row even when the others are within it.
func TestCompareWorstPairDecides(t *testing.T) {
	s := withProcesses(t)
	store := newAgentStore()
	var samples []smiSample
	for i, power := range []float64{67, 70, 90} { // within 15 W, within, 23 W off
		v := viewOf(s, s.GPUs[0], migProfiles)
		v.values[kPower] = power
		sample := s
		sample.Time = s.Time.Add(time.Duration(i) * 10 * time.Second)
		samples = append(samples, sample)
		store.add(metrics(sample.Time.Add(time.Second), v))
	}
	var power *Check
	for _, c := range compare(compareInput{Samples: samples, Agent: store, MIGProfiles: migProfiles, MaxGap: 5 * time.Second}) {
		if strings.HasPrefix(c.Field, "power draw") {
			power = c
		}
	}
	require.NotNil(t, power)
	assert.Equal(t, statusFail, power.Status)
	assert.Equal(t, 3, power.Pairs)
	assert.Equal(t, "90 W", power.Agent)
	assert.Equal(t, "67.03 W", power.SMI)
}

// Without the reservation reported apart (drivers before R510, nvmlDeviceGetMemoryInfo)
// the receiver's used includes it: used + reserved still agrees.
func TestCompareMemoryWithoutReservedMetric(t *testing.T) {
	s := withProcesses(t)
	v := viewOf(s, s.GPUs[0], migProfiles)
	v.values[kMemUsage] += v.values[kMemReserved]
	delete(v.values, kMemReserved)
	checks := checkAgainst(s, v)
	assert.Empty(t, failing(checks))
	for _, c := range checks {
		if strings.HasPrefix(c.Field, "memory reserved") {
			assert.Equal(t, statusSkip, c.Status)
			assert.Contains(t, c.Note, "older than R510")
		}
	}
}

func fieldsOf(checks []*Check) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Subject+"/"+c.Field+": "+c.SMI+" vs "+c.Agent+" "+c.Note)
	}
	return out
}
