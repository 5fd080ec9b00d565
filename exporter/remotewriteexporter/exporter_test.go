package remotewriteexporter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang/snappy"
	"github.com/prometheus/prometheus/prompb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configmiddleware"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/extension/extensioncapabilities"
	"go.opentelemetry.io/collector/extension/extensiontest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter/internal/metadata"
	"github.com/otelcol-gpu/otelcol-gpu/extension/drainextension"
)

// receivedRequests is a remote-write endpoint that decodes what it is sent.
type receivedRequests struct {
	mu       sync.Mutex
	requests []prompb.WriteRequest
	headers  []http.Header
	status   func(n int) (int, http.Header) // the answer to the n-th request (from 0)
}

func (r *receivedRequests) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	compressed, _ := io.ReadAll(req.Body)
	raw, err := snappy.Decode(nil, compressed)
	if err != nil {
		http.Error(w, "not snappy: "+err.Error(), http.StatusBadRequest)
		return
	}
	var wr prompb.WriteRequest
	if err := wr.Unmarshal(raw); err != nil {
		http.Error(w, "not a WriteRequest: "+err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	n := len(r.requests)
	r.requests = append(r.requests, wr)
	r.headers = append(r.headers, req.Header.Clone())
	r.mu.Unlock()
	code, h := http.StatusNoContent, http.Header{}
	if r.status != nil {
		code, h = r.status(n)
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	_, _ = w.Write([]byte("answer body"))
}

func startedExporter(t *testing.T, cfg *Config) *rwExporter {
	t.Helper()
	set := exportertest.NewNopSettings(metadata.Type)
	e := newExporter(cfg, set.TelemetrySettings, set.BuildInfo, time.Now)
	require.NoError(t, e.start(context.Background(), componenttest.NewNopHost()))
	return e
}

func TestARequestIsSnappyProtobufWithRemoteWriteHeaders(t *testing.T) {
	endpoint := &receivedRequests{}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	cfg := testConfig()
	cfg.ClientConfig.Endpoint = srv.URL + "/api/v1/write"
	e := startedExporter(t, cfg)

	require.NoError(t, e.push(context.Background(), gpuBatch("GPU-1", time.Now(), 1)))
	require.Len(t, endpoint.requests, 1)
	assert.Len(t, endpoint.requests[0].Timeseries, 3)
	h := endpoint.headers[0]
	assert.Equal(t, "snappy", h.Get("Content-Encoding"))
	assert.Equal(t, "application/x-protobuf", h.Get("Content-Type"))
	assert.Equal(t, "0.1.0", h.Get("X-Prometheus-Remote-Write-Version"))
}

func TestABigBatchIsSentAsSeveralRequestsInOrder(t *testing.T) {
	endpoint := &receivedRequests{}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	cfg := testConfig()
	cfg.ClientConfig.Endpoint = srv.URL
	cfg.MaxSeriesPerRequest = 2
	e := startedExporter(t, cfg)

	md := pmetric.NewMetrics()
	for _, uuid := range []string{"GPU-1", "GPU-2", "GPU-3"} {
		gpuBatch(uuid, time.Now(), 1).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	require.NoError(t, e.push(context.Background(), md))
	require.Len(t, endpoint.requests, 5, "9 series, 2 per request")
	var gpus []string
	for _, r := range endpoint.requests {
		assert.LessOrEqual(t, len(r.Timeseries), 2)
		for _, s := range r.Timeseries {
			for _, l := range s.Labels {
				if l.Name == "hw_id" && (len(gpus) == 0 || gpus[len(gpus)-1] != l.Value) {
					gpus = append(gpus, l.Value)
				}
			}
		}
	}
	assert.Equal(t, []string{"GPU-1", "GPU-2", "GPU-3"}, gpus, "the batch's order is kept")
}

func TestRefusalsAreRetriedOnlyWhenRetryingCanHelp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		code      int
		header    http.Header
		permanent bool
	}{
		{"server error", http.StatusInternalServerError, nil, false},
		{"unavailable with Retry-After", http.StatusServiceUnavailable, http.Header{"Retry-After": {"7"}}, false},
		{"too many requests", http.StatusTooManyRequests, nil, false},
		{"bad request (out of order, bad labels)", http.StatusBadRequest, nil, true},
		{"unauthorized", http.StatusUnauthorized, nil, true},
		{"unsupported media type (a remote-write 2.0-only receiver)", http.StatusUnsupportedMediaType, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			endpoint := &receivedRequests{status: func(int) (int, http.Header) { return tc.code, tc.header }}
			srv := httptest.NewServer(endpoint)
			defer srv.Close()
			cfg := testConfig()
			cfg.ClientConfig.Endpoint = srv.URL
			e := startedExporter(t, cfg)

			batch, _, err := e.translator.translate(context.Background(), gpuBatch("GPU-1", time.Now(), 1))
			require.NoError(t, err)
			err = e.send(context.Background(), batch.request(0, batch.len()), batch.len())
			require.Error(t, err)
			assert.Equal(t, tc.permanent, consumererror.IsPermanent(err), "%v", err)
			assert.Contains(t, err.Error(), "answer body", "the endpoint's reason is in the error")
			assert.Contains(t, err.Error(), "3 series")
			var throttled *retryAfterError
			assert.Equal(t, tc.header != nil, errors.As(err, &throttled))
		})
	}
}

// retryingConfig retries quickly, for a test.
func retryingConfig(url string) *Config {
	cfg := testConfig()
	cfg.ClientConfig.Endpoint = url
	cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 20 * time.Millisecond
	cfg.RetryConfig.MaxElapsedTime = 0
	return cfg
}

func TestABackendThatComesBackGetsTheBatch(t *testing.T) {
	endpoint := &receivedRequests{status: func(n int) (int, http.Header) {
		if n < 3 {
			return http.StatusServiceUnavailable, nil
		}
		return http.StatusNoContent, nil
	}}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	e := startedExporter(t, retryingConfig(srv.URL))

	require.NoError(t, e.push(context.Background(), gpuBatch("GPU-1", time.Now(), 1)))
	require.Len(t, endpoint.requests, 4, "three refusals, then delivered")
	assert.Equal(t, endpoint.requests[0], endpoint.requests[3], "the same request, retried")
}

func TestARefusedBatchIsNotRetried(t *testing.T) {
	endpoint := &receivedRequests{status: func(int) (int, http.Header) { return http.StatusBadRequest, nil }}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	e := startedExporter(t, retryingConfig(srv.URL))

	err := e.push(context.Background(), gpuBatch("GPU-1", time.Now(), 1))
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err))
	assert.Len(t, endpoint.requests, 1)
}

func TestARefusedRequestDoesNotCostTheBatchsOtherRequests(t *testing.T) {
	endpoint := &receivedRequests{status: func(n int) (int, http.Header) {
		if n == 1 {
			return http.StatusBadRequest, nil
		}
		return http.StatusNoContent, nil
	}}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	cfg := retryingConfig(srv.URL)
	cfg.MaxSeriesPerRequest = 2
	e := startedExporter(t, cfg)

	md := pmetric.NewMetrics()
	for _, uuid := range []string{"GPU-1", "GPU-2", "GPU-3"} {
		gpuBatch(uuid, time.Now(), 1).ResourceMetrics().MoveAndAppendTo(md.ResourceMetrics())
	}
	err := e.push(context.Background(), md)
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err), "not retried: %v", err)
	assert.Contains(t, err.Error(), "400 Bad Request")
	assert.Len(t, endpoint.requests, 5, "the four other requests of the batch were sent")
}

func TestRetryAfterSetsTheWait(t *testing.T) {
	endpoint := &receivedRequests{status: func(n int) (int, http.Header) {
		if n == 0 {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}
		}
		return http.StatusNoContent, nil
	}}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	e := startedExporter(t, retryingConfig(srv.URL))

	start := time.Now()
	require.NoError(t, e.push(context.Background(), gpuBatch("GPU-1", time.Now(), 1)))
	assert.GreaterOrEqual(t, time.Since(start), time.Second, "the 10 ms backoff gave way to Retry-After: 1")
	assert.Len(t, endpoint.requests, 2)
}

func TestRetriesEndAtMaxElapsedTimeOrWhenTheContextEnds(t *testing.T) {
	endpoint := &receivedRequests{status: func(int) (int, http.Header) { return http.StatusBadGateway, nil }}
	srv := httptest.NewServer(endpoint)
	defer srv.Close()

	cfg := retryingConfig(srv.URL)
	cfg.RetryConfig.MaxElapsedTime = 200 * time.Millisecond
	e := startedExporter(t, cfg)
	err := e.push(context.Background(), gpuBatch("GPU-1", time.Now(), 1))
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
	assert.Contains(t, err.Error(), "max_elapsed_time")
	assert.Greater(t, len(endpoint.requests), 2)

	e = startedExporter(t, retryingConfig(srv.URL))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err = e.push(ctx, gpuBatch("GPU-1", time.Now(), 1))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestAnUnreachableEndpointIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	cfg := testConfig()
	cfg.ClientConfig.Endpoint = url
	e := startedExporter(t, cfg)
	batch, _, err := e.translator.translate(context.Background(), gpuBatch("GPU-1", time.Now(), 1))
	require.NoError(t, err)
	err = e.send(context.Background(), batch.request(0, batch.len()), batch.len())
	require.Error(t, err)
	assert.False(t, consumererror.IsPermanent(err))
}

func TestRetryAfterIsReadAsSecondsOrADate(t *testing.T) {
	d, ok := retryAfter("7")
	assert.True(t, ok)
	assert.Equal(t, 7*time.Second, d)
	d, ok = retryAfter(time.Now().Add(time.Minute).UTC().Format(http.TimeFormat))
	assert.True(t, ok)
	assert.InDelta(t, time.Minute.Seconds(), d.Seconds(), 2)
	_, ok = retryAfter("soon")
	assert.False(t, ok)
}

// hostWith is a host that offers the given extensions to the exporter's HTTP client.
type hostWith map[component.ID]component.Component

func (h hostWith) GetExtensions() map[component.ID]component.Component { return h }

// TestAStopDuringAnOutageEndsAtTheFlushTimeout: the backend is down and the exporter
// waits a minute between retries; shutdown begins and the drain extension's flush timeout
// passes. The exporter stops waiting at once, its next attempt is refused and counted by
// the drain, and the batch is dropped for good, instead of the stopping collector sitting
// out its backoff past the supervisor's grace period.
func TestAStopDuringAnOutageEndsAtTheFlushTimeout(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // connections refused, as from a Prometheus that is down

	core, logs := observer.New(zap.InfoLevel)
	drainSet := extensiontest.NewNopSettings(drainextension.NewFactory().Type())
	drainSet.Logger = zap.New(core)
	drainCfg := drainextension.NewFactory().CreateDefaultConfig().(*drainextension.Config)
	drainCfg.FlushTimeout = 200 * time.Millisecond
	drain, err := drainextension.NewFactory().Create(context.Background(), drainSet, drainCfg)
	require.NoError(t, err)
	drainID := component.NewID(drainextension.NewFactory().Type())

	cfg := retryingConfig(url)
	cfg.RetryConfig.InitialInterval = time.Minute
	cfg.RetryConfig.MaxInterval = time.Minute
	cfg.ClientConfig.Middlewares = []configmiddleware.Config{{ID: drainID}}
	set := exportertest.NewNopSettings(metadata.Type)
	e := newExporter(cfg, set.TelemetrySettings, set.BuildInfo, time.Now)
	require.NoError(t, e.start(context.Background(), hostWith{drainID: drain}))

	pushed := make(chan error, 1)
	go func() { pushed <- e.push(context.Background(), gpuBatch("GPU-1", time.Now(), 1)) }()
	time.Sleep(100 * time.Millisecond) // the first attempt failed; the exporter waits
	require.NoError(t, drain.(extensioncapabilities.PipelineWatcher).NotReady())

	select {
	case err = <-pushed:
	case <-time.After(20 * time.Second):
		t.Fatal("the exporter still waits for its next retry long after the flush timeout passed")
	}
	require.Error(t, err)
	assert.True(t, consumererror.IsPermanent(err), "dropped for good, not retried: %v", err)
	assert.Contains(t, err.Error(), "flush timeout")

	require.NoError(t, drain.Shutdown(context.Background()))
	assert.Equal(t, 1, logs.FilterMessage("Shutdown: 3 samples in 1 requests dropped after the flush timeout (200ms)").Len(),
		"the drain counted the refused request: %v", logs.All())
}
