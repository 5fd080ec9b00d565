// Package agentsim simulates a fleet of otelcol-gpu node agents sending OTLP/gRPC to a
// gateway, for load tests of the gateway tier. The payload is real: one agent's output, taken
// from the gpu receiver (simulated backend) and the gpu_enrich processor run in process.
// Each simulated agent sends its own copy, with its own host name and GPU UUIDs, on its own
// gRPC connection.
package agentsim // import "github.com/otelcol-gpu/otelcol-gpu/testbed/internal/agentsim"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"

	"github.com/otelcol-gpu/otelcol-gpu/internal/pdatawalk"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
)

// Payload runs the gpu receiver on a simulated machine and gpu_enrich (kubelet and process
// attribution off: no node to read them from) in process, scraping every second, and
// returns the output of the scrape number `scrapes` (later scrapes carry the derived
// signals that need history).
func Payload(ctx context.Context, system, scenario string, scrapes int) (pmetric.Metrics, error) {
	rf, pf := gpureceiver.NewFactory(), gpuenrichprocessor.NewFactory()
	rc := rf.CreateDefaultConfig().(*gpureceiver.Config)
	rc.Backend = gpureceiver.BackendSimulated
	rc.Simulated.System, rc.Simulated.Scenario, rc.Simulated.Seed = system, scenario, 1
	rc.CollectionInterval = time.Second
	rc.HostName = "template-node"
	if err := rc.Validate(); err != nil {
		return pmetric.Metrics{}, err
	}
	pc := pf.CreateDefaultConfig().(*gpuenrichprocessor.Config)
	pc.Kubelet.Enabled = false
	pc.Processes.Enabled = false

	sink := new(consumertest.MetricsSink)
	p, err := pf.CreateMetrics(ctx, processortest.NewNopSettings(pf.Type()), pc, sink)
	if err != nil {
		return pmetric.Metrics{}, err
	}
	r, err := rf.CreateMetrics(ctx, receivertest.NewNopSettings(rf.Type()), rc, p)
	if err != nil {
		return pmetric.Metrics{}, err
	}
	host := componenttest.NewNopHost()
	if err := p.Start(ctx, host); err != nil {
		return pmetric.Metrics{}, err
	}
	if err := r.Start(ctx, host); err != nil {
		_ = p.Shutdown(ctx)
		return pmetric.Metrics{}, err
	}
	deadline := time.Now().Add(time.Duration(scrapes)*time.Second + 30*time.Second)
	for sink.DataPointCount() == 0 || len(sink.AllMetrics()) < scrapes {
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	errs := errors.Join(r.Shutdown(ctx), p.Shutdown(ctx))
	all := sink.AllMetrics()
	if len(all) < scrapes {
		return pmetric.Metrics{}, errors.Join(errs, fmt.Errorf("%d scrapes in time, want %d", len(all), scrapes))
	}
	out := pmetric.NewMetrics()
	all[scrapes-1].CopyTo(out)
	return out, errs
}

// Composition counts a payload's metrics by type and its samples as Prometheus stores them
// after remote-write. Only types remote-write turns into a known number of float samples
// are accepted: gauges, cumulative sums (one sample per point), explicit-bucket histograms
// (a bucket per bound, +Inf, _sum when present, _count) and summaries (quantiles, _sum,
// _count). Exponential histograms (native histograms) and delta sums (dropped by the
// exporter) are errors, so a payload change cannot silently skew the count.
func Composition(md pmetric.Metrics) (samples int, byType map[string]int, err error) {
	byType = map[string]int{}
	forEachMetric(md, func(_ pcommon.Resource, m pmetric.Metric) {
		byType[m.Type().String()]++
		switch m.Type() {
		case pmetric.MetricTypeGauge:
			samples += m.Gauge().DataPoints().Len()
		case pmetric.MetricTypeSum:
			if m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
				err = errors.Join(err, fmt.Errorf("%s: delta sum (remote-write drops it)", m.Name()))
			}
			samples += m.Sum().DataPoints().Len()
		case pmetric.MetricTypeHistogram:
			for i := range m.Histogram().DataPoints().Len() {
				dp := m.Histogram().DataPoints().At(i)
				samples += dp.ExplicitBounds().Len() + 1 + 1
				if dp.HasSum() {
					samples++
				}
			}
		case pmetric.MetricTypeSummary:
			for i := range m.Summary().DataPoints().Len() {
				samples += m.Summary().DataPoints().At(i).QuantileValues().Len() + 2
			}
		default:
			err = errors.Join(err, fmt.Errorf("%s: %s, whose samples this count does not model", m.Name(), m.Type()))
		}
	})
	return samples, byType, err
}

// Series is the number of distinct series a payload of gauges and sums becomes: the metric
// name with the points' attributes and the resource attributes promoted to labels (those
// whose key is in promoted, or starts with a promoted "prefix.*"). Two points with one
// series in one payload would collide in Prometheus (duplicate sample for timestamp).
func Series(md pmetric.Metrics, promoted []string) int {
	promote := func(k string) bool {
		for _, p := range promoted {
			if p == k || (strings.HasSuffix(p, ".*") && strings.HasPrefix(k, strings.TrimSuffix(p, "*"))) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	forEachMetric(md, func(res pcommon.Resource, m pmetric.Metric) {
		var labels []string
		res.Attributes().Range(func(k string, v pcommon.Value) bool {
			if promote(k) {
				labels = append(labels, k+"="+v.AsString())
			}
			return true
		})
		pdatawalk.EachPointOf(m, func(dp pmetric.NumberDataPoint) {
			l := append([]string(nil), labels...)
			dp.Attributes().Range(func(k string, v pcommon.Value) bool {
				l = append(l, k+"="+v.AsString())
				return true
			})
			sort.Strings(l)
			seen[m.Name()+"{"+strings.Join(l, ",")+"}"] = true
		})
	})
	return len(seen)
}

func forEachMetric(md pmetric.Metrics, f func(pcommon.Resource, pmetric.Metric)) {
	for i := range md.ResourceMetrics().Len() {
		rm := md.ResourceMetrics().At(i)
		for j := range rm.ScopeMetrics().Len() {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := range ms.Len() {
				f(rm.Resource(), ms.At(k))
			}
		}
	}
}

// HostName is the host.name of agent i.
func HostName(i int) string { return fmt.Sprintf("load-node-%04d", i) }

var uuidRE = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)

// uniqueUUIDs rewrites every UUID in s (GPU-…, MIG-…, pod UIDs) to one of agent i's: the
// first 4 hex digits of the last group become i, so UUIDs stay well-formed and distinct
// across agents and within one.
func uniqueUUIDs(s string, i int) string {
	return uuidRE.ReplaceAllStringFunc(s, func(u string) string {
		return u[:24] + fmt.Sprintf("%04x", i&0xffff) + u[28:]
	})
}

// ForAgent is agent i's copy of the payload: host.name is HostName(i) and every UUID-like
// attribute value (resource or point) is made agent i's own; everything else is kept.
func ForAgent(tmpl pmetric.Metrics, i int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	tmpl.CopyTo(md)
	rewrite := func(attrs pcommon.Map) {
		attrs.Range(func(k string, v pcommon.Value) bool {
			if v.Type() == pcommon.ValueTypeStr && uuidRE.MatchString(v.Str()) {
				v.SetStr(uniqueUUIDs(v.Str(), i))
			}
			return true
		})
	}
	for r := range md.ResourceMetrics().Len() {
		res := md.ResourceMetrics().At(r).Resource()
		res.Attributes().PutStr("host.name", HostName(i))
		rewrite(res.Attributes())
	}
	forEachMetric(md, func(_ pcommon.Resource, m pmetric.Metric) {
		pdatawalk.EachPointOf(m, func(dp pmetric.NumberDataPoint) { rewrite(dp.Attributes()) })
	})
	return md
}

// point is one number point of an agent's payload and how its value moves.
type point struct {
	dp        pmetric.NumberDataPoint
	monotonic bool // a cumulative counter: grows every send
	gauge     bool // a gauge (not a sum): jitters
	baseF     float64
	baseI     int64
	isInt     bool
}

// Config describes a fleet.
type Config struct {
	Endpoint    string        // gateway OTLP/gRPC host:port
	Agents      int           // number of simulated nodes
	Interval    time.Duration // each agent sends once per interval
	Timeout     time.Duration // per Export call (the otlp_grpc exporter's default is 5 s)
	Compression string        // "gzip" (what configs/agent-to-gateway.yaml sends) or "none"
	Payload     pmetric.Metrics
	// DialOptions reach the gateway as configs/agent-to-gateway.yaml does (TLS and the
	// agents' token); nil dials in plain text.
	DialOptions []grpc.DialOption
	// SamplesPerSend is what one send delivers to Prometheus (Composition of Payload).
	SamplesPerSend int
}

// Stats are a fleet's counters since it started.
type Stats struct {
	Sends         int64 // Export calls made
	SendErrors    int64 // Export calls that returned an error (refused, timed out, ...)
	Partial       int64 // points the gateway reported rejected in a partial success
	Attempted     int64 // samples offered: SamplesPerSend × Sends
	Failed        int64 // samples of Export calls that failed
	Missed        int64 // sends skipped because the previous one was still running
	MaxLatency    time.Duration
	TotalLatency  time.Duration
	FirstError    string
	ErrorsByClass map[string]int64
}

// Fleet is a running set of simulated agents.
type Fleet struct {
	cfg    Config
	cancel context.CancelFunc
	wg     sync.WaitGroup
	conns  []*grpc.ClientConn

	sends, sendErrors, partial, missed atomic.Int64
	perAgentSent, perAgentFailed       []atomic.Int64

	mu         sync.Mutex
	maxLat     time.Duration
	totalLat   time.Duration
	firstError string
	errClass   map[string]int64
}

// Start builds every agent's payload, opens one gRPC connection per agent (as real nodes
// do) and starts the agents, their first sends spread uniformly over one interval.
func Start(cfg Config) (*Fleet, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	f := &Fleet{
		cfg:            cfg,
		perAgentSent:   make([]atomic.Int64, cfg.Agents),
		perAgentFailed: make([]atomic.Int64, cfg.Agents),
		errClass:       map[string]int64{},
	}
	var callOpts []grpc.CallOption
	if cfg.Compression == "gzip" {
		callOpts = append(callOpts, grpc.UseCompressor(gzip.Name))
	}
	type agent struct {
		md     pmetric.Metrics
		points []point
		client pmetricotlp.GRPCClient
	}
	agents := make([]agent, cfg.Agents)
	for i := range agents {
		dial := cfg.DialOptions
		if dial == nil {
			dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
		}
		// Each agent from an address of its own, as each node (pod) has one: the gateway
		// counts its per-client limits by address when agents share a token.
		dial = append(slices.Clip(dial), grpc.WithContextDialer(DialFrom(SourceAddress(i))))
		cc, err := grpc.NewClient(cfg.Endpoint, dial...)
		if err != nil {
			f.closeConns()
			return nil, err
		}
		f.conns = append(f.conns, cc)
		md := ForAgent(cfg.Payload, i)
		agents[i] = agent{md: md, points: pointsOf(md), client: pmetricotlp.NewGRPCClient(cc)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	start := time.Now()
	for i := range agents {
		a := agents[i]
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			next := start.Add(time.Duration(int64(cfg.Interval) * int64(i) / int64(cfg.Agents)))
			for n := 0; ; n++ {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				now := time.Now()
				advance(a.points, n, start, now)
				f.send(i, a.client, a.md, callOpts)
				next = next.Add(cfg.Interval)
				// An agent whose previous send outlasted the interval skips the sends it
				// missed (a real agent would queue them); they are counted, not offered.
				for time.Now().After(next) {
					f.missed.Add(1)
					next = next.Add(cfg.Interval)
				}
			}
		}()
	}
	return f, nil
}

func (f *Fleet) send(i int, client pmetricotlp.GRPCClient, md pmetric.Metrics, opts []grpc.CallOption) {
	// Not the agents' context: a send under way when the fleet stops runs to its end (or
	// its timeout), so every attempted sample has a known outcome.
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
	defer cancel()
	t0 := time.Now()
	resp, err := client.Export(ctx, pmetricotlp.NewExportRequestFromMetrics(md), opts...)
	lat := time.Since(t0)
	f.sends.Add(1)
	f.perAgentSent[i].Add(int64(f.cfg.SamplesPerSend))
	if err == nil {
		if r := resp.PartialSuccess().RejectedDataPoints(); r > 0 {
			f.partial.Add(r)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.maxLat = max(f.maxLat, lat)
	f.totalLat += lat
	if err != nil {
		f.sendErrors.Add(1)
		f.perAgentFailed[i].Add(int64(f.cfg.SamplesPerSend))
		msg := err.Error()
		if f.firstError == "" {
			f.firstError = msg
		}
		class := msg
		if k := strings.Index(class, " desc = "); k >= 0 {
			class = class[:k]
		}
		f.errClass[class]++
	}
}

// Stop stops the agents and waits for the sends under way; then closes the connections.
func (f *Fleet) Stop() {
	f.cancel()
	f.wg.Wait()
	f.closeConns()
}

func (f *Fleet) closeConns() {
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.conns = nil
}

// Stats is a snapshot of the fleet's counters.
func (f *Fleet) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := Stats{
		Sends: f.sends.Load(), SendErrors: f.sendErrors.Load(), Partial: f.partial.Load(), Missed: f.missed.Load(),
		MaxLatency: f.maxLat, TotalLatency: f.totalLat, FirstError: f.firstError, ErrorsByClass: map[string]int64{},
	}
	for k, v := range f.errClass {
		s.ErrorsByClass[k] = v
	}
	for i := range f.perAgentSent {
		s.Attempted += f.perAgentSent[i].Load()
		s.Failed += f.perAgentFailed[i].Load()
	}
	return s
}

// AgentSamples are the samples agent i has offered and those of its failed sends.
func (f *Fleet) AgentSamples(i int) (attempted, failed int64) {
	return f.perAgentSent[i].Load(), f.perAgentFailed[i].Load()
}

func pointsOf(md pmetric.Metrics) []point {
	var pts []point
	forEachMetric(md, func(_ pcommon.Resource, m pmetric.Metric) {
		mono := m.Type() == pmetric.MetricTypeSum && m.Sum().IsMonotonic()
		gauge := m.Type() == pmetric.MetricTypeGauge
		pdatawalk.EachPointOf(m, func(dp pmetric.NumberDataPoint) {
			p := point{dp: dp, monotonic: mono, gauge: gauge}
			if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
				p.isInt, p.baseI = true, dp.IntValue()
			} else {
				p.baseF = dp.DoubleValue()
			}
			pts = append(pts, p)
		})
	})
	return pts
}

// advance stamps send n's points with now and moves their values a little: counters grow,
// float gauges jitter by up to 1 %, large integer up-down values (bytes) by up to 0.1 %;
// states, limits and small integers (0/1 flags) stay as the receiver produced them.
func advance(pts []point, n int, start, now time.Time) {
	ts, st := pcommon.NewTimestampFromTime(now), pcommon.NewTimestampFromTime(start)
	for j := range pts {
		p := &pts[j]
		p.dp.SetTimestamp(ts)
		if p.monotonic {
			p.dp.SetStartTimestamp(st)
		}
		wobble := math.Sin(float64(n) + float64(j))
		switch {
		case p.monotonic && p.isInt:
			p.dp.SetIntValue(p.baseI + int64(n)*max(1, p.baseI/1000))
		case p.monotonic:
			p.dp.SetDoubleValue(p.baseF + float64(n)*max(1, math.Abs(p.baseF)/1000))
		case p.isInt && (p.baseI > 1000 || p.baseI < -1000):
			p.dp.SetIntValue(p.baseI + int64(float64(p.baseI)*0.001*wobble))
		case !p.isInt && p.gauge:
			p.dp.SetDoubleValue(p.baseF * (1 + 0.01*wobble))
		}
	}
}

// SourceAddress is agent i's loopback address, 127.1.x.y (Linux routes all of 127/8 to the
// loopback interface, so any of them can be bound without configuration).
func SourceAddress(i int) net.IP {
	return net.IPv4(127, 1, byte(i/250), byte(i%250+1))
}

// DialFrom dials TCP from source (for grpc.WithContextDialer).
func DialFrom(source net.IP) func(context.Context, string) (net.Conn, error) {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: source}}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	}
}
