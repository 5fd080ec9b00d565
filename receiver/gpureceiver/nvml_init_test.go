package gpureceiver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componentstatus"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// noLibrary is an nvml.Interface whose Init fails the way it does on a host without the
// driver. It is go-nvml's bare mock: every other method is unset and panics if called, so
// the tests below fail loudly if the receiver breaks the "nothing after a failed Init" rule.
func noLibrary() *mock.Interface {
	return &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
}

func TestInitFailureCallsNothingElseAndRetriesWithBackoff(t *testing.T) {
	clock := newFakeClock()
	lib := noLibrary()
	cfg := testConfig()
	cfg.NVML.InitRetry = InitRetryConfig{InitialInterval: 10 * time.Second, MaxInterval: 40 * time.Second}
	s := startedScraper(t, cfg, lib, clock)
	require.Len(t, lib.InitCalls(), 1, "Start tries Init once")

	// Scrapes inside the back-off window do not call Init again, but still report the
	// receiver's health so that "NVML is down" is visible in the backend.
	md, err := s.scrape(context.Background())
	require.NoError(t, err)
	require.Len(t, lib.InitCalls(), 1)
	assert.Empty(t, gpuResources(md))
	host := hostResource(t, md)
	assert.Equal(t, 0.0, pointValue(t, host, "nvidia.nvml.available", nil))
	assert.Equal(t, 1.0, pointValue(t, host, "nvidia.nvml.init.errors", map[string]string{"nvidia.nvml.error": "ERROR_LIBRARY_NOT_FOUND"}))

	// Back-off doubles: retries at +10s, then +20s later, then +40s (the maximum), then +40s.
	for _, wait := range []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second} {
		calls := len(lib.InitCalls())
		clock.Step(wait - time.Second)
		_, err = s.scrape(context.Background())
		require.NoError(t, err)
		require.Len(t, lib.InitCalls(), calls, "no retry before the back-off delay")
		clock.Step(time.Second)
		_, err = s.scrape(context.Background())
		require.NoError(t, err)
		require.Len(t, lib.InitCalls(), calls+1, "retry once the back-off delay passed")
	}
	// The shutdown must not touch the library either (Cleanup runs it; a call would panic).
}

// flakyLibrary fails Init while failing is set, then behaves like the simulator.
type flakyLibrary struct {
	*gpusim.Simulator
	failing    atomic.Bool
	initErrors atomic.Int64
}

func (f *flakyLibrary) Init() nvml.Return {
	if f.failing.Load() {
		f.initErrors.Add(1)
		return nvml.ERROR_DRIVER_NOT_LOADED
	}
	return f.Simulator.Init()
}

// statusHost records the component status events the receiver reports.
type statusHost struct {
	component.Host
	events chan *componentstatus.Event
}

func (h *statusHost) Report(ev *componentstatus.Event) {
	select {
	case h.events <- ev:
	default:
	}
}

// TestReceiverRecoversWhenNVMLAppears runs the whole receiver (scraper controller, real
// ticker) against a library that is missing at start and appears later.
func TestReceiverRecoversWhenNVMLAppears(t *testing.T) {
	sim, err := gpusim.New(gpusim.Options{System: "dgxh100", Scenario: "steady-training", Seed: 1, Now: time.Now})
	require.NoError(t, err)
	lib := &flakyLibrary{Simulator: sim}
	lib.failing.Store(true)

	factory := newFactory(func(*Config, func() time.Time) (nvml.Interface, error) { return lib, nil }, time.Now)
	cfg := testConfig()
	cfg.CollectionInterval = 20 * time.Millisecond
	cfg.InitialDelay = 0
	cfg.NVML.InitRetry = InitRetryConfig{InitialInterval: 10 * time.Millisecond, MaxInterval: 20 * time.Millisecond}
	sink := &consumertest.MetricsSink{}
	rcv, err := factory.CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, sink)
	require.NoError(t, err)
	host := &statusHost{Host: componenttest.NewNopHost(), events: make(chan *componentstatus.Event, 16)}
	require.NoError(t, rcv.Start(context.Background(), host))
	defer func() { require.NoError(t, rcv.Shutdown(context.Background())) }()

	ev := <-host.events
	require.Equal(t, componentstatus.StatusRecoverableError, ev.Status(), "the failure is reported as a recoverable component status")
	require.Eventually(t, func() bool { return lib.initErrors.Load() >= 3 }, 5*time.Second, 5*time.Millisecond, "Init is retried")
	require.Zero(t, sim.TotalCalls(), "no NVML function is called while Init fails")
	for _, md := range sink.AllMetrics() {
		require.Empty(t, gpuResources(md))
	}

	lib.failing.Store(false)
	require.Eventually(t, func() bool {
		all := sink.AllMetrics()
		return len(all) > 0 && len(gpuResources(all[len(all)-1])) == 8
	}, 5*time.Second, 5*time.Millisecond, "all eight GPUs report once NVML is up, without a restart")
	require.Eventually(t, func() bool {
		select {
		case ev := <-host.events:
			return ev.Status() == componentstatus.StatusOK
		default:
			return false
		}
	}, 5*time.Second, 5*time.Millisecond, "status returns to OK")
}

// The XID watcher blocks inside NVML for up to defaultXIDWait at a time, so that an idle
// agent wakes rarely; a receiver's shutdown waits for the wait in progress and no longer,
// and no NVML call is left running once it returns (Shutdown is the session's last call).
func TestShutdownWaitsForAtMostOneXIDWait(t *testing.T) {
	clock := newFakeClock()
	sim := newSim(t, "dgxh100", "steady-training", clock)
	s := newGPUScraper(testConfig(), receivertest.NewNopSettings(metadata.Type), sim, clock.Now)
	require.Equal(t, defaultXIDWait, s.xidWait, "as shipped")
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()))
	require.NotNil(t, s.xids, "the simulator has XID events: the watcher runs")
	time.Sleep(100 * time.Millisecond) // the watcher is inside a wait now
	begin := time.Now()
	require.NoError(t, s.shutdown(context.Background()))
	took := time.Since(begin)
	assert.Less(t, took, defaultXIDWait+time.Second, "shutdown waits for one XID wait at most")
	select {
	case <-s.xids.done:
	default:
		t.Fatal("the XID watcher still runs after shutdown")
	}
}
