package gpuschema

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gentest"
)

func TestCommittedFileIsGenerated(t *testing.T) {
	gentest.Committed(t, ".", FileName, func() (map[string][]byte, error) {
		raw, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(Source)))
		if err != nil {
			return nil, err
		}
		src, err := Render(raw)
		return map[string][]byte{FileName: src}, err
	}, "make generate")
}

func TestGoName(t *testing.T) {
	for in, want := range map[string]string{"hw.gpu.utilization": "HwGpuUtilization", "nvidia.gpu.clock_event.reason": "NvidiaGpuClockEventReason", "high.critical": "HighCritical", "hw.id": "HwID", "nvidia.mig.uuid": "NvidiaMigUUID", "process.pid": "ProcessPID"} {
		if got := goName(in); got != want {
			t.Errorf("goName(%q) = %q, want %q", in, got, want)
		}
	}
}
