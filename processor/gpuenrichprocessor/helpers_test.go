package gpuenrichprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/cgroup"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podnames"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// fakeClock is the clock the simulated GPUs, the processor and the test share.
type fakeClock = clocktesting.FakeClock

func newFakeClock() *fakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

// fakePods is a pod-resources source with a fixed answer.
type fakePods struct {
	snap   *podresources.Snapshot
	status podresources.Status
}

func (f *fakePods) Start(context.Context) error { return nil }
func (f *fakePods) Snapshot() (*podresources.Snapshot, podresources.Status) {
	return f.snap, f.status
}
func (f *fakePods) Shutdown() error { return nil }

// fakePIDs says where PIDs run; a PID it does not know cannot be read (as under a proc
// root that hides it), so it is inferred to its GPU's holder, never taken for exited.
type fakePIDs map[uint32]cgroup.Location

func (f fakePIDs) Lookup(pid uint32) (cgroup.Location, error) {
	c, ok := f[pid]
	if !ok {
		return cgroup.Location{}, cgroup.ErrProcessHidden
	}
	return c, nil
}

func (f fakePIDs) Forget(map[uint32]bool) {}

func (f fakePIDs) Close() {}

type fakeNames map[string]podnames.Pod

func (f fakeNames) Lookup(uid string) (podnames.Pod, bool) {
	p, ok := f[uid]
	return p, ok
}

func (f fakeNames) UID(namespace, name string) (string, bool) {
	for uid, p := range f {
		if p.Namespace == namespace && p.Name == name {
			return uid, true
		}
	}
	return "", false
}

// allocateEach makes a snapshot where pod "train-i" in namespace "ml" holds GPU i.
func allocateEach(uuids []string, taken time.Time) *podresources.Snapshot {
	s := &podresources.Snapshot{Allocatable: map[string][]string{"nvidia.com/gpu": uuids}, Taken: taken}
	for i, u := range uuids {
		s.Pods = append(s.Pods, podresources.Pod{Namespace: "ml", Name: "train-" + string(rune('0'+i)), Containers: []podresources.Container{
			{Name: "pytorch", Devices: []podresources.Device{{ResourceName: "nvidia.com/gpu", ID: u}}},
		}})
	}
	return s
}

func testConfig() *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.Idle.Window = time.Minute
	cfg.Leak.Window = time.Minute
	// Most tests follow processes by PID; process_series_test.go checks the default.
	cfg.Processes.KeepPID = true
	// Tests read a flag from one collection, some stepping faster than 10 s; steady_test.go
	// checks that unchanged flags are held back by default.
	cfg.SteadySeriesInterval = 0
	return cfg
}

// harness runs simulated GPUs through the processor.
type harness struct {
	t     *testing.T
	clock *fakeClock
	src   *simulatedSource
	proc  *gpuEnrichProcessor
}

func newHarness(t *testing.T, system, scenario string, cfg *Config, build func(uuids []string, clock *fakeClock) sources) *harness {
	t.Helper()
	return newHarnessWithReceiver(t, system, scenario, nil, cfg, build)
}

// newHarnessWithReceiver is newHarness with the receiver configured by rcfg.
func newHarnessWithReceiver(t *testing.T, system, scenario string, rcfg *gpureceiver.Config, cfg *Config, build func(uuids []string, clock *fakeClock) sources) *harness {
	t.Helper()
	clock := newFakeClock()
	src, err := newSimulatedSource(system, scenario, clock.Now, rcfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, src.Shutdown()) })
	p := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), clock.Now, build(src.UUIDs(), clock))
	require.NoError(t, p.start(context.Background(), nil))
	t.Cleanup(func() { require.NoError(t, p.shutdown(context.Background())) })
	return &harness{t: t, clock: clock, src: src, proc: p}
}

// step advances simulated time, scrapes and processes.
func (h *harness) step(d time.Duration) pmetric.Metrics {
	h.t.Helper()
	h.clock.Step(d)
	md, _ := h.src.Scrape()
	out, err := h.proc.processMetrics(context.Background(), md)
	require.NoError(h.t, err)
	return out
}

// run steps n times and returns the last output.
func (h *harness) run(n int, every time.Duration) pmetric.Metrics {
	var md pmetric.Metrics
	for range n {
		md = h.step(every)
	}
	return md
}

// resources returns the resource metrics whose attributes match all of want, and that
// have (or lack, for "!key") the given keys.
func resources(md pmetric.Metrics, want map[string]string) []pmetric.ResourceMetrics {
	var out []pmetric.ResourceMetrics
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		a := rm.Resource().Attributes()
		ok := true
		for k, v := range want {
			if len(k) > 0 && k[0] == '!' {
				if _, has := a.Get(k[1:]); has {
					ok = false
				}
				continue
			}
			got, has := a.Get(k)
			if !has || (v != "*" && got.AsString() != v) {
				ok = false
			}
		}
		if ok {
			out = append(out, rm)
		}
	}
	return out
}

// gpuResource is the device resource of GPU index i.
func gpuResource(t *testing.T, md pmetric.Metrics, index string) pmetric.ResourceMetrics {
	t.Helper()
	rs := resources(md, map[string]string{"nvidia.gpu.index": index, "!process.pid": "", "!nvidia.mig.uuid": "", "hw.id": "*"})
	for _, rm := range rs {
		if hasScopeMetric(rm, "hw.power") {
			return rm
		}
	}
	t.Fatalf("no device resource for GPU %s", index)
	return pmetric.ResourceMetrics{}
}

func hasScopeMetric(rm pmetric.ResourceMetrics, name string) bool {
	found := false
	pdatawalk.EachPoint(rm, func(n string, _ pmetric.NumberDataPoint) {
		if n == name {
			found = true
		}
	})
	return found
}

// point returns the value of a metric's data point with the given attributes.
func point(t *testing.T, rm pmetric.ResourceMetrics, name string, attrs ...string) float64 {
	t.Helper()
	var v float64
	found := false
	pdatawalk.EachPoint(rm, func(n string, dp pmetric.NumberDataPoint) {
		if n != name || found {
			return
		}
		for i := 0; i+1 < len(attrs); i += 2 {
			if got, ok := dp.Attributes().Get(attrs[i]); !ok || got.AsString() != attrs[i+1] {
				return
			}
		}
		v, found = pdatawalk.Value(dp), true
	})
	require.Truef(t, found, "metric %s%v not found", name, attrs)
	return v
}

func attrOf(rm pmetric.ResourceMetrics, key string) string {
	v, ok := rm.Resource().Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}
