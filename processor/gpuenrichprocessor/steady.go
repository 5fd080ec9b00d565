package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
)

// gpu_enrich's own steady outputs are its window flags: idle-while-allocated and
// leak-suspected (of a GPU and of a pod), each the verdict over a window of minutes. As the
// receiver does with its steady series (gpuschema.IsSteady), an unchanged flag is held back
// at short collection intervals until steady_series_interval has passed since it was last
// sent, and the end-of-series tracker gives a missing one the same grace
// (gpuschema.SteadyResendMax) while its resource is in the batch. A flag is sent at once
// when its value changes, when its resource changes (another holder, a pod's UID learnt),
// when it was missing from the GPU's previous collection, and when the GPU was missing from
// its host's previous batch: in each case the tracker has ended, or will end, the series
// it continued.
//
// nvidia.gpu.throttled is not held back: throttling can come and go within seconds, and
// avg_over_time (the power-capping alert's "throttled more than half the time") counts
// points, not seconds. Points on change and every 10 s would weigh a short spell as much
// as a long one.

// isSteadyOutput reports whether a gpu_enrich metric is one of its held-back flags.
func isSteadyOutput(metric string) bool {
	switch metric {
	case metadata.MetricsInfo.NvidiaGpuIdleWhileAllocated.Name,
		metadata.MetricsInfo.NvidiaGpuMemoryLeakSuspected.Name, metadata.MetricsInfo.NvidiaGpuPodMemoryLeakSuspected.Name:
		return true
	}
	return false
}

// steadySeries tells the end-of-series tracker which series may skip collections: the
// receiver's steady series, and gpu_enrich's flags when it holds them back.
func steadySeries(cfg *Config) func(metric string) bool {
	if cfg.SteadySeriesInterval <= 0 {
		return gpuschema.IsSteady
	}
	return func(metric string) bool { return gpuschema.IsSteady(metric) || isSteadyOutput(metric) }
}

// steadyOutputs remembers, per GPU or MIG instance, the flags it sent last.
type steadyOutputs struct {
	every time.Duration          // steady_series_interval; 0: every collection
	gpus  map[string]*gpuOutputs // by GPU or MIG UUID
	// batch counts the batches; origins holds each host's last two.
	batch   uint64
	origins map[string]*originBatches
}

// originBatches are the numbers of a host's (an origin's) last two batches.
type originBatches struct{ prev, cur uint64 }

func newSteadyOutputs(cfg *Config) *steadyOutputs {
	return &steadyOutputs{every: cfg.SteadySeriesInterval, gpus: map[string]*gpuOutputs{}, origins: map[string]*originBatches{}}
}

// beginBatch starts a batch: each GPU's begin after it belongs to it.
func (s *steadyOutputs) beginBatch() { s.batch++ }

// gpuOutputs is one GPU's flags as last sent, and its last two collections' times.
type gpuOutputs struct {
	policy *steadyOutputs
	// memLimit is the GPU's last framebuffer size: the receiver holds it back as a
	// steady series, and each collection's ratio and leak rule need it.
	memLimit float64
	hasLimit bool
	// clockEvents are the GPU's last clock-event reasons, and when they came: the receiver
	// holds them back as one steady group (all eight, or none), and each collection's
	// throttle flags need them. They stand in for at most gpuschema.SteadyResendMax, the
	// longest the receiver holds them, so that a GPU whose reasons can no longer be read
	// loses its flags as its steady series end.
	clockEvents   map[string]bool
	clockEventsAt pcommon.Timestamp
	holder        podRef // the pod whose attributes the GPU's own resource carries, if any
	batch         uint64 // the batch of its last collection
	prev, cur     pcommon.Timestamp
	sent          map[outputKey]sentFlag
}

// outputKey names one flag series of a GPU: its metric and, for a pod's flag, the pod's
// owner attributes, which its resource carries.
type outputKey struct {
	metric string
	user   owner
}

type sentFlag struct {
	value int64
	sent  pcommon.Timestamp // when it was last sent
	seen  pcommon.Timestamp // the last collection that sent or held it (end)
}

// begin returns the GPU's flags for the collection at ts, and gives g its framebuffer size
// and clock-event reasons when the receiver held them back (only while the GPU is read:
// a lost GPU's last reasons do not stand in). Nothing sent before counts when
// the GPU was missing from its host's previous batch (the tracker ended its resource's
// series at once), or when its resource now names another holder (or none, or the same
// pod with its UID learnt): a new resource to the tracker, which ended the old one's.
func (s *steadyOutputs) begin(g *gpuView, ts pcommon.Timestamp) *gpuOutputs {
	host := ""
	if v, ok := g.rm.Resource().Attributes().Get(attrHostName); ok {
		host = v.AsString()
	}
	ob := s.origins[host]
	if ob == nil {
		ob = &originBatches{}
		s.origins[host] = ob
	}
	if ob.cur != s.batch {
		ob.prev, ob.cur = ob.cur, s.batch
	}
	o := s.gpus[g.uuid]
	if o == nil {
		o = &gpuOutputs{policy: s, sent: map[outputKey]sentFlag{}}
		s.gpus[g.uuid] = o
	}
	if g.hasLimit {
		o.memLimit, o.hasLimit = g.memLimit, true
	} else if o.hasLimit && g.hasMem {
		g.memLimit, g.hasLimit = o.memLimit, true
	}
	if len(g.clockEvents) > 0 {
		o.clockEvents, o.clockEventsAt = g.clockEvents, ts
	} else if o.clockEvents != nil && g.hasMem && ts < o.clockEventsAt+pcommon.Timestamp(gpuschema.SteadyResendMax) {
		g.clockEvents = o.clockEvents
	}
	continued := o.batch == ob.prev || o.batch == s.batch
	o.batch = s.batch
	if ts != o.cur {
		o.prev, o.cur = o.cur, ts
	}
	var holder podRef
	if len(g.holders) == 1 {
		holder = g.holders[0]
	}
	if !continued || holder != o.holder {
		o.holder = holder
		clear(o.sent)
	}
	return o
}

// send reports whether this collection records the flag's point: it is not held back, or
// it is new (begin, end), or its value changed, or it is due again. Half a collection
// interval of slack keeps a collection that ticks a little early from holding a point back
// for a whole extra interval (the receiver's rule).
func (o *gpuOutputs) send(k outputKey, v int64) bool {
	last, ok := o.sent[k]
	if ok && o.policy.every > 0 && last.value == v {
		gap := time.Duration(o.cur - o.prev)
		if gap < o.policy.every && time.Duration(o.cur-last.sent)+gap/2 < o.policy.every {
			last.seen = o.cur
			o.sent[k] = last
			return false
		}
	}
	o.sent[k] = sentFlag{value: v, sent: o.cur, seen: o.cur}
	return true
}

// end forgets the flags the GPU's collection neither sent nor held: a pod that left, a
// flag whose input is missing. Should they come back, they are sent at once.
func (o *gpuOutputs) end() {
	for k, f := range o.sent {
		if f.seen != o.cur {
			delete(o.sent, k)
		}
	}
}

// forget drops the GPUs whose last collection is older than before.
func (s *steadyOutputs) forget(before pcommon.Timestamp) {
	for uuid, o := range s.gpus {
		if o.cur < before {
			delete(s.gpus, uuid)
		}
	}
}
