//go:build e2e

package testbed

import (
	"fmt"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// TestScenariosLandInPrometheus runs one agent per scenario into one Prometheus and checks
// the series each scenario is about.
func TestScenariosLandInPrometheus(t *testing.T) {
	p := prom.Start(t, "")
	startAgent(t, p, "e2e-hot", "dgxh100", "thermal-throttle")
	startAgent(t, p, "e2e-xid", "dgxh100", "xid-storm")
	startAgent(t, p, "e2e-mig", "dgxa100", "mig")
	startAgent(t, p, "e2e-shared", "dgxh200", "shared-gpu")

	t.Run("thermal-throttle: the hot GPUs only are throttled for a thermal cause", func(t *testing.T) {
		// gpu_enrich folds the clock-event reasons into nvidia_gpu_throttled{cause} by default.
		prom.Eventually(t, 60*time.Second, "throttle series", func() error {
			s, err := p.Query(`nvidia_gpu_throttled{host_name="e2e-hot",nvidia_gpu_throttle_cause="thermal"} == 1`)
			if err != nil {
				return err
			}
			got := map[string]bool{}
			for _, x := range s {
				got[x.Labels["nvidia_gpu_index"]] = true
			}
			if len(got) != 2 || !got["2"] || !got["5"] {
				return fmt.Errorf("thermally throttled GPUs %v, want 2 and 5", got)
			}
			return nil
		})
	})

	t.Run("xid-storm: the XID counters increase", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "XID increase", func() error {
			s, err := p.Query(`increase(nvidia_gpu_xid_errors_total{host_name="e2e-xid",nvidia_gpu_xid="13"}[1m]) > 0`)
			if err != nil {
				return err
			}
			if len(s) != 1 || s[0].Labels["nvidia_gpu_index"] != "0" || s[0].Labels["hw_id"] == "" {
				return fmt.Errorf("XID 13 increase: %v, want one series for GPU 0", s)
			}
			return nil
		})
		prom.Eventually(t, 30*time.Second, "XID 94 degrades GPU 2", func() error {
			s, err := p.Query(`hw_status{host_name="e2e-xid",hw_state="degraded"} == 1`)
			if err != nil {
				return err
			}
			if len(s) != 1 || s[0].Labels["nvidia_gpu_index"] != "2" {
				return fmt.Errorf("degraded GPUs %v, want GPU 2", s)
			}
			return nil
		})
	})

	t.Run("mig: every MIG instance has its own series", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "MIG series", func() error {
			s, err := p.Query(`hw_gpu_memory_usage_bytes{host_name="e2e-mig",nvidia_mig_uuid!=""}`)
			if err != nil {
				return err
			}
			if len(s) != 11 {
				return fmt.Errorf("%d MIG instance series, want 11", len(s))
			}
			for _, x := range s {
				for _, l := range []string{"hw_parent", "nvidia_mig_profile", "nvidia_mig_gpu_instance_id", "hw_model"} {
					if x.Labels[l] == "" {
						return fmt.Errorf("MIG series %v lacks %s", x.Labels, l)
					}
				}
			}
			return nil
		})
	})

	t.Run("shared-gpu: processes on GPU 0 have a series per executable, without PID", func(t *testing.T) {
		// No kubelet or cgroups here: the three processes have no owner, so the two python3
		// processes share one series (their memory summed) and tritonserver has its own.
		prom.Eventually(t, 60*time.Second, "per-process series", func() error {
			s, err := p.Query(`nvidia_gpu_process_memory_usage_bytes{host_name="e2e-shared",nvidia_gpu_index="0"}`)
			if err != nil {
				return err
			}
			values := map[string]float64{}
			for _, x := range s {
				if x.Labels["process_pid"] != "" {
					return fmt.Errorf("process series labelled with a PID by default: %v", x.Labels)
				}
				values[x.Labels["process_executable_name"]] = x.Value
			}
			if len(values) != 2 || values["python3"] <= values["tritonserver"] || values["tritonserver"] <= 0 {
				return fmt.Errorf("processes on GPU 0: %v, want python3 (two processes, 70 %% of the memory) above tritonserver (30 %%)", values)
			}
			return nil
		})
	})
}
