package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"

import (
	"hash/maphash"
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// A series is identified by a 64-bit hash of what makes it a Prometheus series once the
// exporter has translated it: the metric's name, unit and type (they make the Prometheus
// name), every resource attribute (the exporter promotes them to labels) and the point's
// attributes. The hash is seeded per process (hash/maphash), so a client cannot craft
// colliding series to slip past its budget.
type hasher struct {
	seed maphash.Seed
}

func newHasher() hasher { return hasher{seed: maphash.MakeSeed()} }

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// combine hashes a pair, in order.
func combine(a, b uint64) uint64 {
	return mix(a ^ (b*0x9e3779b97f4a7c15 + 0x632be59bd9b4e019))
}

// metric hashes what makes a metric's Prometheus name.
func (h hasher) metric(m pmetric.Metric) uint64 {
	typ := uint64(m.Type())
	if m.Type() == pmetric.MetricTypeSum && m.Sum().IsMonotonic() {
		typ |= 1 << 8 // a _total suffix
	}
	return combine(combine(maphash.String(h.seed, m.Name()), maphash.String(h.seed, m.Unit())), typ)
}

// attributes hashes an attribute map regardless of its order (sum of the pairs' hashes),
// values by their string form, as they become label values. ok is false when a key is
// longer than maxKey.
func (h hasher) attributes(attrs pcommon.Map, maxKey int) (sum uint64, ok bool) {
	ok = true
	var buf [32]byte
	attrs.Range(func(k string, v pcommon.Value) bool {
		if len(k) > maxKey {
			ok = false
			return false
		}
		var vh uint64
		switch v.Type() {
		case pcommon.ValueTypeStr:
			vh = maphash.String(h.seed, v.Str())
		case pcommon.ValueTypeInt:
			vh = maphash.Bytes(h.seed, strconv.AppendInt(buf[:0], v.Int(), 10))
		case pcommon.ValueTypeDouble:
			f := v.Double()
			if math.IsNaN(f) || math.IsInf(f, 0) {
				vh = maphash.String(h.seed, v.AsString())
			} else {
				vh = maphash.Bytes(h.seed, strconv.AppendFloat(buf[:0], f, 'g', -1, 64))
			}
		case pcommon.ValueTypeBool:
			vh = maphash.Bytes(h.seed, strconv.AppendBool(buf[:0], v.Bool()))
		default: // maps, slices, bytes, empty: rare
			vh = maphash.String(h.seed, v.AsString())
		}
		sum += combine(maphash.String(h.seed, k), vh)
		return true
	})
	return mix(sum + uint64(attrs.Len())), ok
}
