package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.uber.org/zap"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/podresources"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/staleness"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/tracking"
)

// forgetAfter drops the state of GPUs and their users not seen for this long.
const forgetAfter = 30 * time.Minute

type gpuEnrichProcessor struct {
	cfg     *Config
	logger  *zap.Logger
	now     func() time.Time
	src     sources
	tracker *tracking.Tracker
	// startTime is the start of the processor's cumulative series.
	startTime pcommon.Timestamp

	// mu serialises batches: the metrics builder is not safe for concurrent use.
	mu    sync.Mutex
	mb    *metadata.MetricsBuilder
	stale *staleness.Tracker
	// steady holds back unchanged flags at short collection intervals (steady.go).
	steady *steadyOutputs
	// userResource is scratch space for a per-pod or per-job resource (deriveUsers).
	userResource pcommon.Resource
	// unmappedExample is the last unmapped device logged, so it is logged once.
	unmappedExample string
	// unlistedLogged are the resource names outside kubelet.resource_names whose GPUs were
	// logged: once per name, not every refresh.
	unlistedLogged map[string]bool
	// folded counts the processes summed into "(other)" series since start.
	folded int64
	// executableNames bounds the executable names per GPU over time.
	executableNames *executableNames
	// exited counts the processes dropped since start because they had exited before
	// their cgroup was read.
	exited int64
}

func newProcessor(cfg *Config, set processor.Settings, now func() time.Time, src sources) *gpuEnrichProcessor {
	start := pcommon.NewTimestampFromTime(now())
	return &gpuEnrichProcessor{
		cfg:       cfg,
		logger:    set.Logger,
		now:       now,
		src:       src,
		tracker:   tracking.New(max(cfg.Idle.Window, cfg.Leak.Window)),
		startTime: start,
		mb:        metadata.NewMetricsBuilder(cfg.MetricsBuilderConfig, set, metadata.WithStartTime(start)),
		stale:     staleness.New(steadySeries(cfg), gpuschema.SteadyResendMax),
		steady:    newSteadyOutputs(cfg),

		userResource:    pcommon.NewResource(),
		unlistedLogged:  map[string]bool{},
		executableNames: newExecutableNames(cfg.Processes.MaxExecutableNamesPerGPU, cfg.Processes.ExecutableNamesWindow),
	}
}

func (p *gpuEnrichProcessor) start(ctx context.Context, _ component.Host) error {
	// Only an invalid configuration fails here; a kubelet or API server that is down is
	// retried in the background while metrics flow unattributed.
	if p.src.pods != nil {
		if err := p.src.pods.Start(ctx); err != nil {
			return err
		}
	}
	if p.src.kube != nil {
		return p.src.kube.Start(ctx)
	}
	return nil
}

func (p *gpuEnrichProcessor) shutdown(context.Context) error {
	var err error
	if p.src.kube != nil {
		err = p.src.kube.Shutdown()
	}
	if p.src.pods != nil {
		if e := p.src.pods.Shutdown(); err == nil {
			err = e
		}
	}
	if p.src.pids != nil {
		p.src.pids.Close()
	}
	return err
}

// processMetrics attributes and derives, in place. It never fails a batch: whatever cannot
// be attributed flows on without owner attributes.
func (p *gpuEnrichProcessor) processMetrics(_ context.Context, md pmetric.Metrics) (pmetric.Metrics, error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	b := classify(md)
	var snap *podresources.Snapshot
	var status podresources.Status
	if p.src.pods != nil {
		snap, status = p.src.pods.Snapshot()
	}
	alloc := p.resolveAllocation(snap, b)
	if exited := p.associate(b, alloc); len(exited) > 0 {
		md.ResourceMetrics().RemoveIf(func(rm pmetric.ResourceMetrics) bool { return exited[rm] })
		p.exited += int64(len(exited))
	}

	users := pmetric.NewResourceMetricsSlice()
	latest := pcommon.NewTimestampFromTime(p.now())
	if len(b.gpus) > 0 {
		latest = 0
	}
	p.steady.beginBatch()
	for _, g := range b.gpus {
		ts := g.ts
		if ts == 0 {
			ts = pcommon.NewTimestampFromTime(p.now())
		}
		latest = max(latest, ts)
		flags := p.steady.begin(g, ts)
		p.deriveGPU(g, ts, flags)
		p.deriveUsers(g, ts, users, flags)
		flags.end()
	}
	users.MoveAndAppendTo(md.ResourceMetrics())
	p.folded += int64(p.foldProcessSeries(md, b))
	if b.hasHost {
		p.recordAttributionHealth(b.host, snap, status, alloc)
	}
	if p.cfg.EndSeries {
		p.stale.EndMissing(md, latest)
	}
	if !p.cfg.Descriptions {
		dropDescriptions(md)
	}
	p.tracker.Forget(p.now().Add(-forgetAfter))
	p.steady.forget(pcommon.NewTimestampFromTime(p.now().Add(-forgetAfter)))
	return md, nil
}

// emitInto moves what was recorded since the last emit into rm, in the processor's scope.
func (p *gpuEnrichProcessor) emitInto(rm pmetric.ResourceMetrics) {
	out := p.mb.Emit()
	if out.ResourceMetrics().Len() > 0 {
		out.ResourceMetrics().At(0).ScopeMetrics().MoveAndAppendTo(rm.ScopeMetrics())
	}
}

// dropDescriptions empties every metric's description, the received and the derived alike.
func dropDescriptions(md pmetric.Metrics) {
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		pdatawalk.EachMetric(md.ResourceMetrics().At(i), func(m pmetric.Metric) { m.SetDescription("") })
	}
}
