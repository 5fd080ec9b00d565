package drainextension

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	writev2 "github.com/prometheus/prometheus/prompb/io/prometheus/write/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	clocktesting "k8s.io/utils/clock/testing"
)

const flushTimeout = 20 * time.Second

// harness is a drain on a fake clock in front of a real HTTP server.
type harness struct {
	drain    *drain
	clock    *clocktesting.FakeClock
	logs     *observer.ObservedLogs
	client   *http.Client
	url      string
	received atomic.Int64 // requests that reached the server
}

func newHarness(t *testing.T, cfg *Config, handler http.HandlerFunc) *harness {
	t.Helper()
	h := &harness{clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))}
	core, logs := observer.New(zap.DebugLevel)
	h.logs = logs
	h.drain = newDrain(cfg, zap.New(core), h.clock)
	if handler == nil {
		handler = func(http.ResponseWriter, *http.Request) {}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.received.Add(1)
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	wrap, err := h.drain.GetHTTPRoundTripper(context.Background())
	require.NoError(t, err)
	rt, err := wrap(context.Background(), http.DefaultTransport)
	require.NoError(t, err)
	h.client = &http.Client{Transport: rt}
	return h
}

// send posts a remote-write 1.0 request with the given number of samples.
func (h *harness) send(t *testing.T, samples int) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(rw1Body(t, samples)))
	require.NoError(t, err)
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	resp, err := h.client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func rw1Body(t *testing.T, samples int) []byte {
	t.Helper()
	var wr prompb.WriteRequest
	// Two series, the samples shared between them, one label each.
	for s := range 2 {
		ts := prompb.TimeSeries{Labels: []prompb.Label{{Name: "__name__", Value: []string{"a", "b"}[s]}}}
		for i := s; i < samples; i += 2 {
			ts.Samples = append(ts.Samples, prompb.Sample{Value: float64(i), Timestamp: int64(i)})
		}
		wr.Timeseries = append(wr.Timeseries, ts)
	}
	raw, err := wr.Marshal()
	require.NoError(t, err)
	return snappy.Encode(nil, raw)
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

func messages(logs *observer.ObservedLogs) string {
	var b strings.Builder
	for _, e := range logs.All() {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

// TestRequestsPassUntilTheDeadline: before shutdown, and during the flush timeout after it
// began, every request reaches the backend and its answer comes back unchanged (a 503
// stays a 503, so the exporter keeps retrying while there is time).
func TestRequestsPassUntilTheDeadline(t *testing.T) {
	status := atomic.Int64{}
	status.Store(http.StatusNoContent)
	h := newHarness(t, &Config{FlushTimeout: flushTimeout}, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(int(status.Load()))
	})
	assert.Equal(t, http.StatusNoContent, h.send(t, 10).StatusCode, "before shutdown")

	require.NoError(t, h.drain.NotReady())
	h.clock.Step(flushTimeout - time.Millisecond)
	assert.Equal(t, http.StatusNoContent, h.send(t, 10).StatusCode, "just before the deadline")
	status.Store(http.StatusServiceUnavailable)
	assert.Equal(t, http.StatusServiceUnavailable, h.send(t, 10).StatusCode, "a backend failure within the flush timeout")
	assert.EqualValues(t, 3, h.received.Load())

	require.NoError(t, h.drain.Shutdown(context.Background()))
	assert.Contains(t, messages(h.logs), "Shutdown: everything buffered was sent within the flush timeout")
	assert.NotContains(t, messages(h.logs), "dropped")
}

// TestRequestsAfterTheDeadlineAreRefusedAndCounted: once the flush timeout has passed,
// requests never reach the backend; each is answered at once with 400 (which exporters
// do not retry) and a body saying why, and shutdown logs how many requests and samples
// were dropped.
func TestRequestsAfterTheDeadlineAreRefusedAndCounted(t *testing.T) {
	h := newHarness(t, &Config{FlushTimeout: flushTimeout}, nil)
	require.NoError(t, h.drain.NotReady())
	h.clock.Step(flushTimeout)
	assert.Contains(t, messages(h.logs), "Flush timeout passed during shutdown")

	for _, n := range []int{7, 5} {
		resp := h.send(t, n)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Contains(t, body(t, resp), "flush timeout (20s, extension drain) has passed; dropped")
	}
	// A request that is not remote-write counts as a request, its samples unknown.
	resp, err := h.client.Post(h.url, "application/json", strings.NewReader(`{}`))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Zero(t, h.received.Load(), "no request may reach the backend after the deadline")

	require.NoError(t, h.drain.Shutdown(context.Background()))
	dropped := h.logs.FilterMessageSnippet("dropped after the flush timeout").All()
	require.Len(t, dropped, 1, messages(h.logs))
	assert.Equal(t, "Shutdown: 12 samples in 3 requests dropped after the flush timeout (20s)", dropped[0].Message)
	assert.Equal(t, zap.ErrorLevel, dropped[0].Level)
	fields := dropped[0].ContextMap()
	assert.EqualValues(t, 3, fields["requests"])
	assert.EqualValues(t, 12, fields["samples"])
	assert.EqualValues(t, 1, fields["requests_not_counted"])
}

// TestOnDiskSaysTheDataStays: with a write-ahead log behind the exporter (on_disk), the
// refusal and the summary say the data stays on disk rather than calling it dropped.
func TestOnDiskSaysTheDataStays(t *testing.T) {
	h := newHarness(t, &Config{FlushTimeout: flushTimeout, OnDisk: true}, nil)
	require.NoError(t, h.drain.NotReady())
	h.clock.Step(flushTimeout)
	resp := h.send(t, 4)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, body(t, resp), "kept on disk for the restart")
	require.NoError(t, h.drain.Shutdown(context.Background()))
	log := messages(h.logs)
	assert.Contains(t, log, "Shutdown: 1 send attempts refused after the flush timeout (20s); what they carried stays on disk and is sent after the restart")
	assert.NotContains(t, log, "dropped")
}

// TestRequestInFlightAtTheDeadlineIsCancelled: a request waiting on a hung backend when the
// deadline passes is cancelled and answered 400 at once instead of waiting out the HTTP
// timeout; its samples are counted.
func TestRequestInFlightAtTheDeadlineIsCancelled(t *testing.T) {
	arrived, unblock := make(chan struct{}), make(chan struct{})
	h := newHarness(t, &Config{FlushTimeout: flushTimeout}, func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices a closed connection only after the body
		close(arrived)
		select { // hung until the client gives up
		case <-r.Context().Done():
		case <-unblock:
		}
	})
	t.Cleanup(func() { close(unblock) })
	require.NoError(t, h.drain.NotReady())
	done := make(chan *http.Response, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(rw1Body(t, 9)))
		req.Header.Set("Content-Encoding", "snappy")
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := h.client.Do(req)
		if err != nil {
			t.Error(err)
			close(done)
			return
		}
		done <- resp
	}()
	<-arrived
	h.clock.Step(flushTimeout)
	select {
	case resp := <-done:
		require.NotNil(t, resp)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	case <-time.After(10 * time.Second):
		t.Fatal("the request in flight was not cancelled at the deadline")
	}
	require.NoError(t, h.drain.Shutdown(context.Background()))
	assert.Contains(t, messages(h.logs), "Shutdown: 9 samples in 1 requests dropped")
}

// TestConcurrentSendersAcrossTheDeadline: many exporters' requests at once while the
// deadline passes: each gets exactly one answer, the backend's or the refusal, and the
// refusals are counted exactly (run with -race).
func TestConcurrentSendersAcrossTheDeadline(t *testing.T) {
	h := newHarness(t, &Config{FlushTimeout: flushTimeout}, nil)
	require.NoError(t, h.drain.NotReady())
	const senders, each = 8, 25
	var wg sync.WaitGroup
	var passed, refused atomic.Int64
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				if s == 0 && i == each/2 {
					h.clock.Step(flushTimeout)
				}
				req, _ := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(rw1Body(t, 2)))
				req.Header.Set("Content-Encoding", "snappy")
				req.Header.Set("Content-Type", "application/x-protobuf")
				resp, err := h.client.Do(req)
				if !assert.NoError(t, err) {
					return
				}
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
					passed.Add(1)
				case http.StatusBadRequest:
					refused.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, h.drain.Shutdown(context.Background()))
	assert.Positive(t, refused.Load())
	assert.EqualValues(t, senders*each, passed.Load()+refused.Load())
	// A request in flight at the deadline reached the backend and is refused as well.
	assert.GreaterOrEqual(t, h.received.Load(), passed.Load())
	assert.Equal(t, refused.Load(), h.drain.refusedRequests.Load())
	assert.Equal(t, 2*refused.Load(), h.drain.refusedSamples.Load())
}

// TestShutdownWithoutStartOrNotReady: a collector that fails before its pipelines run
// shuts extensions down without NotReady (or even Start): nothing is logged as dropped,
// no timer is left behind, and a late NotReady starts none.
func TestShutdownWithoutStartOrNotReady(t *testing.T) {
	h := newHarness(t, &Config{FlushTimeout: flushTimeout}, nil)
	require.NoError(t, h.drain.Shutdown(context.Background()))
	require.NoError(t, h.drain.NotReady())
	assert.False(t, h.clock.HasWaiters(), "a timer started after shutdown")
	assert.Empty(t, h.logs.All())
	// Twice is harmless too.
	require.NoError(t, h.drain.Shutdown(context.Background()))
}

// TestNotReadyTwiceKeepsTheFirstDeadline: the deadline counts from the first NotReady.
func TestNotReadyTwiceKeepsTheFirstDeadline(t *testing.T) {
	h := newHarness(t, &Config{FlushTimeout: flushTimeout}, nil)
	require.NoError(t, h.drain.NotReady())
	h.clock.Step(flushTimeout / 2)
	require.NoError(t, h.drain.NotReady())
	h.clock.Step(flushTimeout / 2)
	assert.Equal(t, http.StatusBadRequest, h.send(t, 1).StatusCode)
	require.NoError(t, h.drain.Shutdown(context.Background()))
}

// TestCountSamples: remote-write 1.0 and 2.0 bodies are counted (samples and native
// histogram points), anything else is not.
func TestCountSamples(t *testing.T) {
	rw1 := http.Header{"Content-Encoding": {"snappy"}, "Content-Type": {"application/x-protobuf"}}
	n, ok := countSamples(rw1, rw1Body(t, 11))
	assert.True(t, ok)
	assert.Equal(t, 11, n)

	v1 := prompb.WriteRequest{Timeseries: []prompb.TimeSeries{{
		Labels:     []prompb.Label{{Name: "__name__", Value: "h"}},
		Histograms: []prompb.Histogram{{Timestamp: 1}, {Timestamp: 2}},
		Exemplars:  []prompb.Exemplar{{Value: 1}},
	}}}
	raw, err := v1.Marshal()
	require.NoError(t, err)
	n, ok = countSamples(rw1, snappy.Encode(nil, raw))
	assert.True(t, ok)
	assert.Equal(t, 2, n, "histogram points count, exemplars do not")

	v2 := writev2.Request{
		Symbols: []string{"", "__name__", "a"},
		Timeseries: []writev2.TimeSeries{
			{LabelsRefs: []uint32{1, 2}, Samples: []writev2.Sample{{Value: 1, Timestamp: 1}, {Value: 2, Timestamp: 2}, {Value: 3, Timestamp: 3}}},
			{LabelsRefs: []uint32{1, 2}, Histograms: []writev2.Histogram{{Timestamp: 4}}},
		},
	}
	raw, err = v2.Marshal()
	require.NoError(t, err)
	rw2 := http.Header{"Content-Encoding": {"snappy"}, "Content-Type": {"application/x-protobuf;proto=io.prometheus.write.v2.Request"}}
	n, ok = countSamples(rw2, snappy.Encode(nil, raw))
	assert.True(t, ok)
	assert.Equal(t, 4, n)

	for name, c := range map[string]struct {
		h    http.Header
		body []byte
	}{
		"not snappy":       {http.Header{"Content-Type": {"application/x-protobuf"}}, raw},
		"corrupt snappy":   {rw1, []byte("not snappy at all")},
		"not protobuf":     {rw1, snappy.Encode(nil, []byte{0xff, 0xff, 0xff})},
		"OTLP":             {http.Header{"Content-Encoding": {"snappy"}, "Content-Type": {"application/json"}}, snappy.Encode(nil, []byte("{}"))},
		"truncated series": {rw1, snappy.Encode(nil, []byte{0x0a, 0x10, 0x12})},
	} {
		_, ok := countSamples(c.h, c.body)
		assert.False(t, ok, name)
	}
}

// TestConfig: the shipped default is 20 s, a file sets both fields, and a zero or negative
// flush timeout is refused with a message that says what to do.
func TestConfig(t *testing.T) {
	def := NewFactory().CreateDefaultConfig().(*Config)
	assert.Equal(t, 20*time.Second, def.FlushTimeout)
	assert.False(t, def.OnDisk)
	require.NoError(t, def.Validate())

	cm, err := confmaptest.LoadConf(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	for name, want := range map[string]*Config{
		"drain":          {FlushTimeout: 20 * time.Second},
		"drain/wal":      {FlushTimeout: 5 * time.Second, OnDisk: true},
		"drain/zero":     {},
		"drain/negative": {FlushTimeout: -time.Second},
	} {
		sub, err := cm.Sub(name)
		require.NoError(t, err)
		cfg := NewFactory().CreateDefaultConfig()
		require.NoError(t, sub.Unmarshal(cfg), name)
		assert.Equal(t, want, cfg, name)
		err = cfg.(*Config).Validate()
		if want.FlushTimeout > 0 {
			assert.NoError(t, err, name)
		} else {
			assert.ErrorContains(t, err, "flush_timeout must be positive", name)
		}
	}
}
