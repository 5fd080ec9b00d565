package drainextension // import "github.com/otelcol-gpu/otelcol-gpu/extension/drainextension"

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// roundTripper passes requests to next until the deadline, then answers them itself.
type roundTripper struct {
	drain *drain
	next  http.RoundTripper
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	d := rt.drain
	if d.expired.Err() != nil {
		return d.refuse(req), nil
	}
	// A request still waiting on a hung backend when the deadline passes is cancelled, so
	// the exporter does not sit out its whole HTTP timeout.
	ctx, cancel := context.WithCancel(req.Context())
	stopWatching := context.AfterFunc(d.expired, cancel)
	release := func() { stopWatching(); cancel() }
	resp, err := rt.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		if d.expired.Err() != nil {
			// The transport consumed the body; GetBody (set for the in-memory bodies
			// exporters send) gives a copy to count.
			var body io.ReadCloser
			if req.GetBody != nil {
				body, _ = req.GetBody()
			}
			d.count(req.Header, body)
			return d.response(req), nil
		}
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// refuse counts what req carried and answers it with a status the exporters do not retry.
func (d *drain) refuse(req *http.Request) *http.Response {
	d.count(req.Header, req.Body) // a RoundTripper closes the body, whatever happens
	return d.response(req)
}

// count adds one refused request and the samples its body (nil: unknown) carried.
func (d *drain) count(h http.Header, body io.ReadCloser) {
	d.refusedRequests.Add(1)
	samples, ok := 0, false
	if body != nil {
		raw, err := io.ReadAll(body)
		_ = body.Close()
		if err == nil {
			samples, ok = countSamples(h, raw)
		}
	}
	if ok {
		d.refusedSamples.Add(int64(samples))
	} else {
		d.uncounted.Add(1)
	}
}

// response is the 400 answer; its body is what the exporter logs as the error.
func (d *drain) response(req *http.Request) *http.Response {
	fate := "dropped"
	if d.cfg.OnDisk {
		fate = "kept on disk for the restart"
	}
	msg := fmt.Sprintf("not sent: the collector is shutting down and its flush timeout (%s, extension drain) has passed; %s", d.cfg.FlushTimeout, fate)
	return &http.Response{
		Status:        "400 Bad Request",
		StatusCode:    http.StatusBadRequest,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(msg)),
		ContentLength: int64(len(msg)),
		Request:       req,
	}
}

// releasingBody stops watching the deadline once the caller is done with the response.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
