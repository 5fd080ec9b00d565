package staleness // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/staleness"

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
)

// hasher gives series and resources a 64-bit identity without allocating: this runs for
// every point of every batch. A map's hash does not depend on its order (the sum of each
// attribute's own hash), so a producer that writes the same attributes in another order
// names the same series. A collision between two series of one origin (about 1 in 10^12
// for the few thousand series of a node) would at worst skip one end marker.
type hasher struct {
	buf []byte // reused between hashes
}

// attributes hashes a map, whatever the order of its attributes.
func (h *hasher) attributes(m pcommon.Map) uint64 {
	var sum uint64
	for k, v := range m.All() {
		h.buf = append(h.buf[:0], k...)
		h.buf = append(h.buf, 0)
		h.buf = appendValue(h.buf, v)
		sum += xxhash.Sum64(h.buf)
	}
	return sum
}

// metric hashes what a metric's points share: their resource, scope and metric name.
func (h *hasher) metric(resource uint64, scope, metric string) uint64 {
	h.buf = binary.LittleEndian.AppendUint64(h.buf[:0], resource)
	h.buf = append(h.buf, scope...)
	h.buf = append(h.buf, 0)
	h.buf = append(h.buf, metric...)
	h.buf = append(h.buf, 0)
	return xxhash.Sum64(h.buf)
}

// point hashes one point's series: its metric's hash and its attributes. Most GPU
// metrics' points have no attributes: theirs is a hash of the metric's alone.
func (h *hasher) point(metric uint64, attrs pcommon.Map) uint64 {
	var a uint64
	if attrs.Len() > 0 {
		a = h.attributes(attrs)
	}
	h.buf = binary.LittleEndian.AppendUint64(h.buf[:0], metric)
	h.buf = binary.LittleEndian.AppendUint64(h.buf, a)
	return xxhash.Sum64(h.buf)
}

// appendValue writes a value with its type, so that the string "1" and the int 1 differ.
func appendValue(buf []byte, v pcommon.Value) []byte {
	buf = append(buf, byte(v.Type()))
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return append(buf, v.Str()...)
	case pcommon.ValueTypeInt:
		return binary.LittleEndian.AppendUint64(buf, uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(v.Double()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return append(buf, 1)
		}
		return append(buf, 0)
	default: // maps, slices, bytes: the GPU components write none; correct, if slower
		return append(buf, v.AsString()...)
	}
}
