package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"

import (
	"encoding/binary"
	"hash/maphash"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// seriesKey identifies everything Prometheus's translator reads to name and label a
// number data point: its resource's and scope's attributes, the metric's name, unit,
// type, monotonicity and temporality, and the point's attributes. Two 64-bit digests of
// the same bytes under independent seeds: at 2^-128 per pair, a collision between two of
// a node's series (a few thousand) is not a practical concern.
type seriesKey struct{ a, b uint64 }

// keyHasher computes seriesKeys without allocating: what a key covers is written into
// one reused buffer, which is hashed once per digest. maphash (the runtime's AES-based
// hash) is seeded per process, which is all the in-memory label sets need; one hash of a
// buffer costs a fraction of the many small writes into a streaming digest that a key
// is made of.
type keyHasher struct {
	seedA, seedB maphash.Seed
	buf          []byte
}

func newKeyHasher() *keyHasher {
	return &keyHasher{seedA: maphash.MakeSeed(), seedB: maphash.MakeSeed()}
}

func (h *keyHasher) reset() { h.buf = h.buf[:0] }

func (h *keyHasher) sum() seriesKey {
	return seriesKey{maphash.Bytes(h.seedA, h.buf), maphash.Bytes(h.seedB, h.buf)}
}

func (h *keyHasher) uint64(v uint64) { h.buf = binary.LittleEndian.AppendUint64(h.buf, v) }

// string writes s with its length first, so that ("ab", "c") and ("a", "bc") differ.
func (h *keyHasher) string(s string) {
	h.uint64(uint64(len(s)))
	h.buf = append(h.buf, s...)
}

func (h *keyHasher) key(k seriesKey) {
	h.uint64(k.a)
	h.uint64(k.b)
}

// attributes writes a map in its iteration order: the same attributes in another order
// only make another key (a translation more), never a wrong series.
func (h *keyHasher) attributes(m pcommon.Map) {
	h.uint64(uint64(m.Len()))
	for k, v := range m.All() {
		h.string(k)
		h.uint64(uint64(v.Type()))
		switch v.Type() {
		case pcommon.ValueTypeStr:
			h.string(v.Str())
		case pcommon.ValueTypeInt:
			h.uint64(uint64(v.Int()))
		case pcommon.ValueTypeDouble:
			h.uint64(math.Float64bits(v.Double()))
		case pcommon.ValueTypeBool:
			if v.Bool() {
				h.uint64(1)
			} else {
				h.uint64(0)
			}
		default: // bytes, maps, slices: rare as labels; their string form is exact
			h.string(v.AsString())
		}
	}
}

// resourceKey covers the resource's attributes and the scope.
func (h *keyHasher) resourceKey(res pcommon.Resource, scope pcommon.InstrumentationScope) seriesKey {
	h.reset()
	h.attributes(res.Attributes())
	h.string(scope.Name())
	h.string(scope.Version())
	h.attributes(scope.Attributes())
	return h.sum()
}

// metricKey adds what of the metric decides its series' name.
func (h *keyHasher) metricKey(resource seriesKey, m pmetric.Metric) seriesKey {
	h.reset()
	h.key(resource)
	h.string(m.Name())
	h.string(m.Unit())
	h.uint64(uint64(m.Type()))
	if m.Type() == pmetric.MetricTypeSum {
		h.uint64(uint64(m.Sum().AggregationTemporality()))
		if m.Sum().IsMonotonic() {
			h.uint64(1)
		} else {
			h.uint64(0)
		}
	}
	return h.sum()
}

// pointKey adds the point's attributes. A point without any is its metric's only series:
// the metric's key is its key (no metric key is a series key of its own).
func (h *keyHasher) pointKey(metric seriesKey, attrs pcommon.Map) seriesKey {
	if attrs.Len() == 0 {
		return metric
	}
	h.reset()
	h.key(metric)
	h.attributes(attrs)
	return h.sum()
}
