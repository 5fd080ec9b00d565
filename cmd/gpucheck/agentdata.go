package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Metric keys of agentSnapshot.Values: the receiver's metric name plus the attribute value
// that says what is measured.
const (
	kMemUsage    = "hw.gpu.memory.usage"
	kMemLimit    = "hw.gpu.memory.limit"
	kMemReserved = "nvidia.gpu.memory.reserved"
	kPower       = "hw.power"
	kPowerLimit  = "nvidia.gpu.power.limit{enforced}"
	kTempGPU     = "hw.temperature{gpu}"
	kTempMemory  = "hw.temperature{memory}"
	kClockSM     = "nvidia.gpu.clock.frequency{sm}"
	kClockMemory = "nvidia.gpu.clock.frequency{memory}"
	kMaxSM       = "nvidia.gpu.clock.frequency.max{sm}"
	kMaxMemory   = "nvidia.gpu.clock.frequency.max{memory}"
	kProcMemory  = "nvidia.gpu.process.memory.usage"
)

// agentSnapshot is what the agent reported of one GPU in one collection (the receiver
// stamps every point of a scrape with one time).
type agentSnapshot struct {
	Time time.Time
	// Attrs are the GPU resource's attributes (hw.model, nvidia.gpu.index, …).
	Attrs     map[string]string
	Values    map[string]float64
	MIGs      map[string]*agentMIG
	Processes map[int]*agentProcess
}

type agentMIG struct {
	UUID            string
	GPUInstance     int
	ComputeInstance int
	Profile         string
	Values          map[string]float64
}

type agentProcess struct {
	PID         int
	Name        string
	Type        string // compute | graphics
	MemoryBytes *float64
	GPUInstance *int
}

// agentStore keeps every collection the agent exported, by GPU UUID.
type agentStore struct {
	mu sync.Mutex
	// gpus holds each GPU's snapshots by collection time.
	gpus map[string]map[int64]*agentSnapshot
	// hostValues are the receiver's own series (nvidia.nvml.available, nvidia.gpu.count),
	// last value.
	hostValues map[string]float64
	exports    int
}

func newAgentStore() *agentStore {
	return &agentStore{gpus: map[string]map[int64]*agentSnapshot{}, hostValues: map[string]float64{}}
}

// add files one export's points.
func (s *agentStore) add(md pmetric.Metrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.exports++
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		rm := rms.At(i)
		attrs := stringAttrs(rm.Resource().Attributes())
		kind, gpu := classify(attrs)
		forEachPoint(rm, func(key string, ts time.Time, v float64) {
			if kind == resourceHost {
				s.hostValues[key] = v
				return
			}
			snap := s.snapshot(gpu, ts)
			switch kind {
			case resourceGPU:
				snap.Attrs = attrs
				snap.Values[key] = v
			case resourceMIG:
				m := snap.mig(attrs)
				m.Values[key] = v
			case resourceProcess:
				p := snap.process(attrs)
				if key == kProcMemory {
					p.MemoryBytes = &v
				}
			}
		})
	}
}

type resourceKind int

const (
	resourceHost resourceKind = iota
	resourceGPU
	resourceMIG
	resourceProcess
)

// classify tells a GPU's own resource from its MIG instances', its processes' and the
// receiver's host resource, and names the physical GPU (hw.parent under MIG).
func classify(attrs map[string]string) (resourceKind, string) {
	gpu := attrs["hw.id"]
	if p := attrs["hw.parent"]; p != "" {
		gpu = p
	}
	switch {
	case gpu == "":
		return resourceHost, ""
	case attrs["process.pid"] != "":
		return resourceProcess, gpu
	case attrs["nvidia.mig.uuid"] != "":
		return resourceMIG, gpu
	}
	return resourceGPU, gpu
}

func (s *agentStore) snapshot(gpu string, ts time.Time) *agentSnapshot {
	byTime := s.gpus[gpu]
	if byTime == nil {
		byTime = map[int64]*agentSnapshot{}
		s.gpus[gpu] = byTime
	}
	snap := byTime[ts.UnixNano()]
	if snap == nil {
		snap = &agentSnapshot{Time: ts, Values: map[string]float64{}, MIGs: map[string]*agentMIG{}, Processes: map[int]*agentProcess{}}
		byTime[ts.UnixNano()] = snap
	}
	return snap
}

func (snap *agentSnapshot) mig(attrs map[string]string) *agentMIG {
	uuid := attrs["nvidia.mig.uuid"]
	m := snap.MIGs[uuid]
	if m == nil {
		m = &agentMIG{UUID: uuid, GPUInstance: atoi(attrs["nvidia.mig.gpu_instance_id"]), ComputeInstance: atoi(attrs["nvidia.mig.compute_instance_id"]),
			Profile: attrs["nvidia.mig.profile"], Values: map[string]float64{}}
		snap.MIGs[uuid] = m
	}
	return m
}

func (snap *agentSnapshot) process(attrs map[string]string) *agentProcess {
	pid := atoi(attrs["process.pid"])
	p := snap.Processes[pid]
	if p == nil {
		p = &agentProcess{PID: pid, Name: attrs["process.executable.name"], Type: attrs["nvidia.gpu.process.type"]}
		if gi, ok := attrs["nvidia.mig.gpu_instance_id"]; ok {
			v := atoi(gi)
			p.GPUInstance = &v
		}
		snap.Processes[pid] = p
	}
	return p
}

// timeline returns a GPU's snapshots in time order.
func (s *agentStore) timeline(gpu string) []*agentSnapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*agentSnapshot, 0, len(s.gpus[gpu]))
	for _, snap := range s.gpus[gpu] {
		out = append(out, snap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out
}

func (s *agentStore) gpuUUIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.gpus))
	for u := range s.gpus {
		out = append(out, u)
	}
	slices.Sort(out)
	return out
}

// forEachPoint calls fn with each gauge and sum point of a resource, keyed by metric name
// and, for a metric with attributes, the values of its attributes.
func forEachPoint(rm pmetric.ResourceMetrics, fn func(key string, ts time.Time, v float64)) {
	sms := rm.ScopeMetrics()
	for i := 0; i < sms.Len(); i++ {
		ms := sms.At(i).Metrics()
		for j := 0; j < ms.Len(); j++ {
			m := ms.At(j)
			var dps pmetric.NumberDataPointSlice
			switch m.Type() {
			case pmetric.MetricTypeGauge:
				dps = m.Gauge().DataPoints()
			case pmetric.MetricTypeSum:
				dps = m.Sum().DataPoints()
			default:
				continue
			}
			for k := 0; k < dps.Len(); k++ {
				dp := dps.At(k)
				v := dp.DoubleValue()
				if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
					v = float64(dp.IntValue())
				}
				fn(metricKey(m.Name(), dp.Attributes()), dp.Timestamp().AsTime(), v)
			}
		}
	}
}

func metricKey(name string, attrs pcommon.Map) string {
	if attrs.Len() == 0 {
		return name
	}
	vals := make([]string, 0, attrs.Len())
	keys := make([]string, 0, attrs.Len())
	for k := range attrs.All() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, _ := attrs.Get(k)
		vals = append(vals, v.AsString())
	}
	return name + "{" + strings.Join(vals, ",") + "}"
}

func stringAttrs(m pcommon.Map) map[string]string {
	out := make(map[string]string, m.Len())
	for k, v := range m.All() {
		out[k] = v.AsString()
	}
	return out
}

func atoi(s string) int {
	var n int
	_, _ = fmt.Sscan(s, &n)
	return n
}
