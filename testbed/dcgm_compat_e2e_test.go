//go:build e2e

package testbed

import (
	"fmt"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// dcgmLabels are the labels of dcgm-exporter's series that dashboards and alerts use.
var dcgmLabels = []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION", "job", "instance"}

// TestDCGMCompatibility: with configs/dcgm-compat.yaml, what dashboards, alerts and HPA
// rules written for dcgm-exporter query returns data with dcgm-exporter's names, labels
// and units.
func TestDCGMCompatibility(t *testing.T) {
	uuids := simulatedUUIDs(t, "dgxh100")
	node := fakeNode(t, uuids)
	node.overlays = []string{"dcgm-compat.yaml"}
	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-dcgm", "dgxh100", "shared-gpu", node)

	queries := map[string]func([]prom.Sample) error{
		// dcgm-exporter's own Grafana dashboard (all eight panels).
		`DCGM_FI_DEV_GPU_TEMP{instance=~".*", gpu=~".*"}`:            each(8, between("°C", 20, 100)),
		`avg(DCGM_FI_DEV_GPU_TEMP{instance=~".*", gpu=~".*"})`:       each(1, between("°C", 20, 100)),
		`DCGM_FI_DEV_POWER_USAGE{instance=~".*", gpu=~".*"}`:         each(8, between("W", 50, 700)),
		`sum(DCGM_FI_DEV_POWER_USAGE{instance=~".*", gpu=~".*"})`:    each(1, between("W", 400, 5600)),
		`DCGM_FI_DEV_SM_CLOCK{instance=~".*", gpu=~".*"} * 1000000`:  each(8, between("Hz", 1e8, 3e9)),
		`DCGM_FI_DEV_GPU_UTIL{instance=~".*", gpu=~".*"}`:            each(8, between("%", 50, 100)),
		`DCGM_FI_DEV_FB_USED{instance=~".*", gpu=~".*"}`:             each(8, between("MiB", 1000, 81920)),
		`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{instance=~".*", gpu=~".*"}`: each(8, between("ratio", 0, 1)),
		// The classic alert expressions (they fire or not; here they must evaluate on data).
		`DCGM_FI_DEV_GPU_TEMP > 0`: each(8, between("°C", 20, 100)),
		`DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)`: each(8, between("ratio", 0.5, 1)),
		`DCGM_FI_DEV_GPU_UTIL > 0`: each(8, between("%", 50, 100)),
		// Counters keep their names (no _total) and dcgm-exporter's units (mJ).
		`rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[1m]) / 1000`: each(8, between("W", 50, 700)),
	}
	for q, check := range queries {
		prom.Eventually(t, 60*time.Second, q, func() error {
			s, err := p.Query(q)
			if err != nil {
				return err
			}
			return check(s)
		})
	}

	t.Run("series carry dcgm-exporter's labels, pods included", func(t *testing.T) {
		s, err := p.Query(`DCGM_FI_DEV_GPU_UTIL{Hostname="e2e-dcgm"}`)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range s {
			for _, l := range dcgmLabels {
				if x.Labels[l] == "" {
					t.Errorf("series %v lacks %s", x.Labels, l)
				}
			}
			if x.Labels["device"] != "nvidia"+x.Labels["gpu"] || x.Labels["job"] != "dcgm-exporter" {
				t.Errorf("series %v: device/job not as dcgm-exporter's", x.Labels)
			}
			if x.Labels["gpu"] != "0" && (x.Labels["pod"] == "" || x.Labels["namespace"] != "ml" || x.Labels["container"] != "pytorch") {
				t.Errorf("GPU %s: pod labels %v", x.Labels["gpu"], x.Labels)
			}
		}
		native, err := p.Query(`count({__name__=~"hw_.*|nvidia_.*", job="dcgm-exporter"})`)
		if err != nil {
			t.Fatal(err)
		}
		if len(native) != 0 {
			t.Errorf("the compatibility pipeline leaked native series: %v", native)
		}
	})
}

func each(n int, check func(prom.Sample) error) func([]prom.Sample) error {
	return func(s []prom.Sample) error {
		if len(s) != n {
			return fmt.Errorf("%d series, want %d", len(s), n)
		}
		for _, x := range s {
			if err := check(x); err != nil {
				return err
			}
		}
		return nil
	}
}

func between(unit string, lo, hi float64) func(prom.Sample) error {
	return func(x prom.Sample) error {
		if x.Value < lo || x.Value > hi {
			return fmt.Errorf("%v = %v %s, want %v–%v", x.Labels, x.Value, unit, lo, hi)
		}
		return nil
	}
}
