package gpuenrichprocessor

import (
	"flag"
	"path/filepath"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gentest"
	"github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor/internal/metadata"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// derivedOnly keeps what the processor added: its own scope on each resource, and the
// per-pod resources it created (with the attributes it set). The receiver's metrics have
// golden files of their own.
func derivedOnly(md pmetric.Metrics) pmetric.Metrics {
	out := pmetric.NewMetrics()
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		var keep pmetric.ScopeMetricsSlice
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			sm := rm.ScopeMetrics().At(j)
			if sm.Scope().Name() != metadata.ScopeName {
				continue
			}
			if keep == (pmetric.ScopeMetricsSlice{}) {
				dst := out.ResourceMetrics().AppendEmpty()
				rm.Resource().CopyTo(dst.Resource())
				keep = dst.ScopeMetrics()
			}
			sm.CopyTo(keep.AppendEmpty())
		}
	}
	return out
}

// TestDerivedSignalsGolden runs each scenario through the processor (with the pods of
// sharedSources) for two minutes of simulated time and compares every derived signal and
// attribution with the golden files. `go test -run TestDerivedSignalsGolden -update`
// rewrites them; review the diff.
func TestDerivedSignalsGolden(t *testing.T) {
	for _, scenario := range []string{"steady-training", "idle", "memory-leak", "thermal-throttle", "power-capped", "shared-gpu", "mig"} {
		t.Run(scenario, func(t *testing.T) {
			h := newHarness(t, "dgxh100", scenario, testConfig(), sharedSources)
			md := derivedOnly(h.run(12, 10*time.Second))
			path := filepath.Join("testdata", "golden", scenario+".yaml")
			gentest.GoldenMetrics(t, path, *update, md)
		})
	}
}
