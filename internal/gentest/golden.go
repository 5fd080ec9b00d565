package gentest

import (
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/pmetrictest"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// GoldenMetrics compares md with the golden file at path, or rewrites the file first when
// update is set (a test's -update flag; review the diff). Order and timestamps are ignored
// (the golden writer sorts and normalises them); values must match exactly.
func GoldenMetrics(t *testing.T, path string, update bool, md pmetric.Metrics) {
	t.Helper()
	if update {
		if err := golden.WriteMetrics(t, path, md); err != nil {
			t.Fatal(err)
		}
	}
	want, err := golden.ReadMetrics(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pmetrictest.CompareMetrics(want, md,
		pmetrictest.IgnoreResourceMetricsOrder(), pmetrictest.IgnoreMetricsOrder(),
		pmetrictest.IgnoreMetricDataPointsOrder(), pmetrictest.IgnoreTimestamp(),
		pmetrictest.IgnoreStartTimestamp()); err != nil {
		t.Errorf("%s: %v (run the test with -update to rewrite it, then review the diff)", path, err)
	}
}
