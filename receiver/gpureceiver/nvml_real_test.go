package gpureceiver

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// TestRealLibraryMissing drives the real go-nvml library (not a mock) at a library path
// that does not exist: Init fails with ERROR_LIBRARY_NOT_FOUND, and since any further NVML
// call would kill the process with a linker error, this test surviving its scrapes and
// shutdown is the assertion that nothing else is called.
func TestRealLibraryMissing(t *testing.T) {
	cfg := createDefaultConfig().(*Config)
	cfg.NVML.LibraryPath = filepath.Join(t.TempDir(), "libnvidia-ml.so.1")
	cfg.NVML.InitRetry = InitRetryConfig{InitialInterval: time.Millisecond, MaxInterval: time.Millisecond}
	lib, err := openLibrary(cfg, time.Now)
	require.NoError(t, err)

	s := newGPUScraper(cfg, receivertest.NewNopSettings(metadata.Type), lib, time.Now)
	require.NoError(t, s.start(context.Background(), componenttest.NewNopHost()), "a missing driver does not fail Start")
	for range 3 {
		time.Sleep(2 * time.Millisecond)
		md, err := s.scrape(context.Background())
		require.NoError(t, err)
		assert.Empty(t, gpuResources(md))
		assert.Equal(t, 0.0, pointValue(t, hostResource(t, md), "nvidia.nvml.available", nil))
	}
	failures := s.session.InitFailures()
	assert.Equal(t, int64(4), failures[nvml.ERROR_LIBRARY_NOT_FOUND], "Start and every scrape retried Init")
	require.NoError(t, s.shutdown(context.Background()))
}
