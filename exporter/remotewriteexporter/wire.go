package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"time"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/storage"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Protobuf tags (field number << 3 | wire type 2, length-delimited) of prompb's messages.
const (
	tagWriteRequestTimeseries = 1<<3 | 2
	tagTimeSeriesSamples      = 2<<3 | 2
)

// encodedBatch is one batch's series in remote-write 1.0's encoding, built while it is
// translated. A WriteRequest carrying only series is nothing but their timeseries fields
// one after another, so the request for series [from, to) is a slice of the batch's
// encoding; and a remembered series' labels are copied as the bytes they were encoded to
// the first time, instead of being sized and marshalled again at every collection. What
// prompb encodes (labels, samples, histograms) is encoded by prompb; only the fields'
// tags and lengths around them are written here. Byte for byte prompb's own Marshal of
// the same WriteRequest (tested).
//
// encodedBatch is the storage.AppenderV2 that Prometheus's translator writes into, and
// where remembered series are appended directly.
type encodedBatch struct {
	wire []byte // the batch's WriteRequest
	ends []int  // ends[i]: where series i's field ends in wire
	// labels[i] is series i's labels as encoded, for the memory of label sets. Each is
	// an allocation of its own (a remembered one is shared with the memory), never a
	// part of wire, which the next batch overwrites.
	labels [][]byte
}

func (b *encodedBatch) reset() {
	clear(b.labels) // drop references to label sets the memory may have forgotten
	b.wire, b.ends, b.labels = b.wire[:0], b.ends[:0], b.labels[:0]
}

// len is the number of series in the batch.
func (b *encodedBatch) len() int { return len(b.ends) }

// request is the encoded WriteRequest of series [from, to); valid until the next batch.
func (b *encodedBatch) request(from, to int) []byte {
	start := 0
	if from > 0 {
		start = b.ends[from-1]
	}
	return b.wire[start:b.ends[to-1]]
}

// Append takes a series from Prometheus's translator.
func (b *encodedBatch) Append(_ storage.SeriesRef, ls labels.Labels, _, t int64, v float64, h *histogram.Histogram, fh *histogram.FloatHistogram, _ storage.AppendV2Options) (storage.SeriesRef, error) {
	ts := prompb.TimeSeries{Labels: make([]prompb.Label, 0, ls.Len())}
	ls.Range(func(l labels.Label) { ts.Labels = append(ts.Labels, prompb.Label{Name: l.Name, Value: l.Value}) })
	encodedLabels := marshalled(&ts)
	switch {
	case fh != nil:
		ts.Histograms = []prompb.Histogram{prompb.FromFloatHistogram(t, fh)}
	case h != nil:
		ts.Histograms = []prompb.Histogram{prompb.FromIntHistogram(t, h)}
	}
	if ts.Histograms != nil {
		b.wire = appendField(b.wire, tagWriteRequestTimeseries, &ts)
	} else {
		b.wire = appendSeries(b.wire, encodedLabels, prompb.Sample{Timestamp: t, Value: v})
	}
	b.ends = append(b.ends, len(b.wire))
	b.labels = append(b.labels, encodedLabels)
	return 0, nil
}

// appendRemembered adds a number point of a series whose labels are remembered, valued
// as Prometheus's translator values it: a point flagged "no recorded value" is a
// staleness marker.
func (b *encodedBatch) appendRemembered(encodedLabels []byte, pt pmetric.NumberDataPoint) {
	var v float64
	switch pt.ValueType() {
	case pmetric.NumberDataPointValueTypeInt:
		v = float64(pt.IntValue())
	case pmetric.NumberDataPointValueTypeDouble:
		v = pt.DoubleValue()
	}
	if pt.Flags().NoRecordedValue() {
		v = math.Float64frombits(value.StaleNaN)
	}
	b.wire = appendSeries(b.wire, encodedLabels, prompb.Sample{Timestamp: int64(pt.Timestamp()) / int64(time.Millisecond), Value: v})
	b.ends = append(b.ends, len(b.wire))
	b.labels = append(b.labels, encodedLabels)
}

// Commit and Rollback: the exporter sends or drops the batch itself.
func (*encodedBatch) Commit() error   { return nil }
func (*encodedBatch) Rollback() error { return nil }

// appendSeries appends a WriteRequest's timeseries field for one sample of a series
// whose labels are already encoded (a TimeSeries' label fields, as marshalled by prompb).
func appendSeries(wire, encodedLabels []byte, s prompb.Sample) []byte {
	sampleSize := s.Size()
	size := len(encodedLabels) + 1 + uvarintSize(sampleSize) + sampleSize
	wire = append(wire, tagWriteRequestTimeseries)
	wire = binary.AppendUvarint(wire, uint64(size))
	wire = append(wire, encodedLabels...)
	wire = append(wire, tagTimeSeriesSamples)
	wire = binary.AppendUvarint(wire, uint64(sampleSize))
	// Not through appendMarshalled: as an interface the sample would escape to the heap,
	// an allocation per series.
	n := len(wire)
	wire = slices.Grow(wire, sampleSize)[:n+sampleSize]
	_, _ = s.MarshalToSizedBuffer(wire[n:])
	return wire
}

// protoMessage is what prompb's generated messages offer.
type protoMessage interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// appendField appends m as a length-delimited field with the given tag.
func appendField(wire []byte, tag byte, m protoMessage) []byte {
	size := m.Size()
	wire = append(wire, tag)
	wire = binary.AppendUvarint(wire, uint64(size))
	return appendMarshalled(wire, m, size)
}

// appendMarshalled appends m's encoding (size bytes, as m.Size() said).
func appendMarshalled(wire []byte, m protoMessage, size int) []byte {
	n := len(wire)
	wire = slices.Grow(wire, size)[:n+size]
	// prompb's messages fail to marshal only into a buffer too small, which this is not.
	_, _ = m.MarshalToSizedBuffer(wire[n:])
	return wire
}

// marshalled is m's encoding in an allocation of its own.
func marshalled(m protoMessage) []byte {
	return appendMarshalled(nil, m, m.Size())
}

// uvarintSize is the length of v as a protobuf varint.
func uvarintSize(v int) int { return (bits.Len64(uint64(v)|1) + 6) / 7 }
