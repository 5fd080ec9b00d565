package drainextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/drainextension"

import (
	"errors"
	"net/http"
	"strings"

	"github.com/golang/snappy"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the remote-write protocols (prometheus/prompb): where the series are in
// a request, and where the samples and native histograms are in a series.
type rwFields struct {
	timeseries, samples, histograms protowire.Number
}

var (
	rw1 = rwFields{timeseries: 1, samples: 2, histograms: 4} // prometheus.WriteRequest
	rw2 = rwFields{timeseries: 5, samples: 2, histograms: 3} // io.prometheus.write.v2.Request
)

// countSamples counts the samples and histogram points of a snappy-compressed
// remote-write 1.0 or 2.0 request body; ok is false for anything else.
func countSamples(h http.Header, body []byte) (n int, ok bool) {
	if !strings.EqualFold(h.Get("Content-Encoding"), "snappy") {
		return 0, false
	}
	fields := rw1
	ct := h.Get("Content-Type")
	switch {
	case strings.Contains(ct, "io.prometheus.write.v2.Request"):
		fields = rw2
	case strings.HasPrefix(ct, "application/x-protobuf"):
	default:
		return 0, false
	}
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return 0, false
	}
	n, err = countIn(raw, fields)
	return n, err == nil
}

// countIn walks the request's wire format without decoding labels or values: refused
// requests are counted at shutdown, and this needs no generated types.
func countIn(req []byte, f rwFields) (int, error) {
	n := 0
	err := eachField(req, func(num protowire.Number, series []byte) error {
		if num != f.timeseries {
			return nil
		}
		return eachField(series, func(num protowire.Number, _ []byte) error {
			if num == f.samples || num == f.histograms {
				n++
			}
			return nil
		})
	})
	return n, err
}

var errMalformed = errors.New("malformed protobuf")

// eachField calls fn with every length-delimited field of msg and skips the others.
func eachField(msg []byte, fn func(protowire.Number, []byte) error) error {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, msg)
			if n < 0 {
				return errMalformed
			}
			msg = msg[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			return errMalformed
		}
		msg = msg[n:]
		if err := fn(num, v); err != nil {
			return err
		}
	}
	return nil
}
