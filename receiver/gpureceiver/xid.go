package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"sync"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/nvmlclient"
)

const (
	// defaultXIDWait bounds how long the watcher blocks inside NVML, and so how long
	// Shutdown waits for it. Each timeout is a wake-up of an otherwise idle agent: at
	// 500 ms the watcher was the agent's largest source of them, and 2 s took 7-17 %
	// off its CPU together with the batch processor's 1 s timeout (docs/benchmarks.md).
	defaultXIDWait = 2 * time.Second
	// maxXIDCodesPerGPU bounds the counters kept per GPU; codes beyond it are counted
	// under xidOverflowCode. Real drivers define a few hundred codes; a GPU rarely shows
	// more than a handful.
	maxXIDCodesPerGPU = 64
	xidOverflowCode   = 0
	// healthWindow is how long an XID keeps a GPU degraded or failed.
	healthWindow = thresholds.XIDHealthWindow
)

// xidWatcher reads XID events from an NVML event set on its own goroutine, so that a storm
// of events never lands on the scrape path. Memory is bounded: counters per (GPU, code),
// capped per GPU, and the time of the last serious and fatal XID.
type xidWatcher struct {
	logger *zap.Logger
	now    func() time.Time
	set    nvml.EventSet
	uuids  map[nvml.Device]string
	// wait is how long one wait inside NVML may block (defaultXIDWait).
	wait time.Duration

	mu     sync.Mutex
	counts map[string]map[uint64]uint64
	// last is the code of each GPU's last XID (dcgm-exporter's "last XID" gauge).
	last       map[string]uint64
	lastFatal  map[string]time.Time
	lastSevere map[string]time.Time

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// startXIDWatcher registers every GPU that supports XID events. It returns nil when NVML
// has no event support here; GPUs keep being read either way.
func startXIDWatcher(lib nvml.Interface, devices []*gpuDevice, logger *zap.Logger, now func() time.Time, wait time.Duration) *xidWatcher {
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		logger.Info("XID events are not available; nvidia.gpu.xid.errors will be absent", zap.String("nvml_error", nvmlclient.ReturnName(ret)))
		return nil
	}
	w := &xidWatcher{
		logger:     logger,
		now:        now,
		set:        set,
		uuids:      map[nvml.Device]string{},
		wait:       wait,
		counts:     map[string]map[uint64]uint64{},
		last:       map[string]uint64{},
		lastFatal:  map[string]time.Time{},
		lastSevere: map[string]time.Time{},
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	for _, d := range devices {
		if d.handle == nil {
			continue
		}
		supported, ret := d.handle.GetSupportedEventTypes()
		if ret != nvml.SUCCESS || supported&nvml.EventTypeXidCriticalError == 0 {
			continue
		}
		if ret := d.handle.RegisterEvents(nvml.EventTypeXidCriticalError, set); ret != nvml.SUCCESS {
			logger.Warn("Cannot register for XID events", zap.Int("gpu", d.index), zap.String("nvml_error", nvmlclient.ReturnName(ret)))
			continue
		}
		w.uuids[d.handle] = d.uuid
		w.counts[d.uuid] = map[uint64]uint64{}
	}
	if len(w.uuids) == 0 {
		set.Free()
		return nil
	}
	go w.run()
	return w
}

func (w *xidWatcher) run() {
	defer close(w.done)
	for {
		select {
		case <-w.stop:
			return
		default:
		}
		ev, ret := w.set.Wait(uint32(w.wait.Milliseconds()))
		switch {
		case ret == nvml.SUCCESS:
			w.record(ev)
		case ret == nvml.ERROR_TIMEOUT:
		default:
			// A lost GPU or a driver problem: back off instead of spinning.
			select {
			case <-w.stop:
				return
			case <-time.After(w.wait):
			}
		}
	}
}

func (w *xidWatcher) record(ev nvml.EventData) {
	if ev.EventType&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	code := ev.EventData
	w.mu.Lock()
	defer w.mu.Unlock()
	uuid, ok := w.uuids[ev.Device]
	if !ok {
		return
	}
	w.last[uuid] = code
	counts := w.counts[uuid]
	if _, seen := counts[code]; !seen && len(counts) >= maxXIDCodesPerGPU {
		code = xidOverflowCode
	}
	counts[code]++
	switch thresholds.ClassOfXID(ev.EventData) {
	case thresholds.XIDFatal:
		w.lastFatal[uuid] = w.now()
	case thresholds.XIDSevere:
		w.lastSevere[uuid] = w.now()
	}
}

// register adds a GPU found again (a new handle) to the running event set, so that the
// other GPUs' XID stream is not interrupted.
func (w *xidWatcher) register(d *gpuDevice) {
	select {
	case <-w.stop: // closed: it only holds counters now
		return
	default:
	}
	w.mu.Lock()
	_, known := w.uuids[d.handle]
	w.mu.Unlock()
	if known {
		return
	}
	supported, ret := d.handle.GetSupportedEventTypes()
	if ret != nvml.SUCCESS || supported&nvml.EventTypeXidCriticalError == 0 {
		return
	}
	if ret := d.handle.RegisterEvents(nvml.EventTypeXidCriticalError, w.set); ret != nvml.SUCCESS {
		w.logger.Warn("Cannot register for XID events", zap.Int("gpu", d.index), zap.String("nvml_error", nvmlclient.ReturnName(ret)))
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.uuids[d.handle] = d.uuid
	if w.counts[d.uuid] == nil {
		w.counts[d.uuid] = map[uint64]uint64{}
	}
}

// snapshot copies one GPU's counters.
func (w *xidWatcher) snapshot(uuid string) map[uint64]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.counts[uuid]) == 0 {
		return nil // most GPUs, most of the time: nothing to copy
	}
	out := make(map[uint64]uint64, len(w.counts[uuid]))
	for code, n := range w.counts[uuid] {
		out[code] = n
	}
	return out
}

// lastCode is the code of the GPU's last XID, 0 before any; watched is false for a GPU
// whose XID events could not be registered.
func (w *xidWatcher) lastCode(uuid string) (code uint64, watched bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, watched = w.counts[uuid]
	return w.last[uuid], watched
}

// recent reports whether the GPU had a fatal or a severe XID within healthWindow.
func (w *xidWatcher) recent(uuid string) (fatal, severe bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if t, ok := w.lastFatal[uuid]; ok && now.Sub(t) < healthWindow {
		fatal = true
	}
	if t, ok := w.lastSevere[uuid]; ok && now.Sub(t) < healthWindow {
		severe = true
	}
	return fatal, severe
}

// close stops the goroutine (within its wait) and frees the event set.
func (w *xidWatcher) close() {
	w.closeOnce.Do(func() {
		close(w.stop)
		<-w.done
		w.set.Free()
	})
}

// carryCounts keeps the counters of a previous watcher (after a re-initialisation), so
// the cumulative series do not reset.
func (w *xidWatcher) carryCounts(old *xidWatcher) {
	if old == nil {
		return
	}
	old.mu.Lock()
	defer old.mu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	for uuid, counts := range old.counts {
		if w.counts[uuid] == nil {
			w.counts[uuid] = map[uint64]uint64{}
		}
		for code, n := range counts {
			w.counts[uuid][code] += n
		}
	}
	for uuid, code := range old.last {
		if _, newer := w.last[uuid]; !newer {
			w.last[uuid] = code
		}
	}
	for uuid, t := range old.lastFatal {
		w.lastFatal[uuid] = t
	}
	for uuid, t := range old.lastSevere {
		w.lastSevere[uuid] = t
	}
}
