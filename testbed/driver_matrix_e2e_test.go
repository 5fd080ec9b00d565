//go:build e2e

package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/proc"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// matrixRow is one system on one driver release, run by the shipped agent.
type matrixRow struct {
	host, system, scenario, driver string
	gpus                           int
}

func (r matrixRow) start(t *testing.T, p *prom.Server, node agentNode) *proc.Process {
	t.Helper()
	node.sets = append(node.sets, "receivers::gpu::simulated::driver_version="+r.driver)
	return startAgentOn(t, p, r.host, r.system, r.scenario, node)
}

// labelValues is the set of values of label over the query's series.
func labelValues(p *prom.Server, query, label string) ([]string, error) {
	s, err := p.Query(query)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, x := range s {
		seen[x.Labels[label]] = true
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out, nil
}

// TestDriverMatrixLandsInPrometheus runs the shipped agent on the systems and driver
// branches it meets in the field - H100 on R535 and R580, A100 split by MIG on R550, L4 on
// R550, B200 on R580, an H100 vGPU guest - into one Prometheus, and checks what each row is
// about, as a user would query it.
func TestDriverMatrixLandsInPrometheus(t *testing.T) {
	rows := []matrixRow{
		{"m-h100-r535", "dgxh100", "shared-gpu", "535.230.02", 8},
		{"m-h100-r580", "dgxh100", "shared-gpu", "580.95.05", 8},
		{"m-a100-mig-r550", "dgxa100", "mig-mixed", "550.127.05", 8},
		{"m-l4-r550", "l4", "steady-training", "550.127.05", 4},
		{"m-b200-r580", "dgxb200", "steady-training", "580.95.05", 8},
		{"m-vgpu-r550", "vgpu-h100", "steady-training", "550.127.05", 1},
	}
	p := prom.Start(t, "")
	for _, r := range rows {
		r.start(t, p, agentNode{})
	}

	t.Run("every GPU of every row reports its health, memory and driver", func(t *testing.T) {
		for _, r := range rows {
			prom.Eventually(t, 90*time.Second, r.host, func() error {
				s, err := p.Query(fmt.Sprintf(`hw_status{host_name=%q,hw_state="ok"} == 1 and on(hw_id) hw_gpu_memory_limit_bytes{host_name=%q,nvidia_mig_uuid=""}`, r.host, r.host))
				if err != nil {
					return err
				}
				if len(s) != r.gpus {
					return fmt.Errorf("%d healthy GPUs with their memory, want %d", len(s), r.gpus)
				}
				for _, x := range s {
					if x.Labels["hw_driver_version"] != r.driver {
						return fmt.Errorf("driver %q, want %q", x.Labels["hw_driver_version"], r.driver)
					}
				}
				return nil
			})
		}
	})

	t.Run("PCIe bytes before R555 and after", func(t *testing.T) {
		for _, host := range []string{"m-h100-r535", "m-h100-r580", "m-l4-r550"} {
			prom.Eventually(t, 90*time.Second, host, func() error {
				s, err := p.Query(fmt.Sprintf(`rate(hw_gpu_io_bytes_total{host_name=%q,network_io_direction="receive"}[30s]) > 1e8`, host))
				if err != nil {
					return err
				}
				if len(s) == 0 {
					return fmt.Errorf("no PCIe traffic")
				}
				return nil
			})
		}
	})

	t.Run("MIG profiles named as the device plugin names them", func(t *testing.T) {
		prom.Eventually(t, 90*time.Second, "profiles", func() error {
			got, err := labelValues(p, `hw_gpu_memory_usage_bytes{host_name="m-a100-mig-r550",nvidia_mig_uuid!=""}`, "nvidia_mig_profile")
			if err != nil {
				return err
			}
			want := []string{"1c.3g.20gb", "1g.10gb", "1g.5gb", "1g.5gb+me", "2g.10gb", "4g.20gb", "7g.40gb"}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				return fmt.Errorf("profiles %v, want %v", got, want)
			}
			return nil
		})
	})

	t.Run("NVLink errors on Blackwell", func(t *testing.T) {
		prom.Eventually(t, 90*time.Second, "B200 NVLink errors", func() error {
			s, err := p.Query(`nvidia_gpu_nvlink_errors_total{host_name="m-b200-r580"}`)
			if err != nil {
				return err
			}
			if len(s) != 8 {
				return fmt.Errorf("%d GPUs with NVLink error counters, want 8", len(s))
			}
			return nil
		})
	})

	t.Run("the L4's encoders, and 0 on GPUs without NVENC", func(t *testing.T) {
		prom.Eventually(t, 90*time.Second, "encoder utilization", func() error {
			for host, want := range map[string]int{"m-l4-r550": 4, "m-h100-r580": 8} {
				s, err := p.Query(fmt.Sprintf(`hw_gpu_utilization_ratio{host_name=%q,hw_gpu_task="encoder"}`, host))
				if err != nil {
					return err
				}
				if len(s) != want {
					return fmt.Errorf("%s: %d encoder series, want %d", host, len(s), want)
				}
			}
			return nil
		})
	})

	t.Run("the vGPU guest: no power or temperature made up", func(t *testing.T) {
		prom.Eventually(t, 60*time.Second, "vGPU utilization", func() error {
			s, err := p.Query(`hw_gpu_utilization_ratio{host_name="m-vgpu-r550",hw_gpu_task="general"}`)
			if err != nil {
				return err
			}
			if len(s) != 1 {
				return fmt.Errorf("%d utilization series, want 1", len(s))
			}
			return nil
		})
		for _, metric := range []string{"hw_power_watts", "hw_temperature_celsius", "hw_energy_joules_total"} {
			if s, err := p.Query(fmt.Sprintf(`%s{host_name="m-vgpu-r550"}`, metric)); err != nil || len(s) != 0 {
				t.Errorf("%s on the vGPU guest: %v, %v; want none", metric, s, err)
			}
		}
	})

	t.Run("process series on the shared GPU, on both branches", func(t *testing.T) {
		for _, host := range []string{"m-h100-r535", "m-h100-r580"} {
			prom.Eventually(t, 60*time.Second, host, func() error {
				got, err := labelValues(p, fmt.Sprintf(`nvidia_gpu_process_memory_usage_bytes{host_name=%q,nvidia_gpu_index="0"}`, host), "process_executable_name")
				if err != nil {
					return err
				}
				if strings.Join(got, " ") != "python3 tritonserver" {
					return fmt.Errorf("processes of GPU 0: %v", got)
				}
				return nil
			})
		}
	})
}

// TestAgentInItsOwnPIDNamespaceSaysProcessesAreHidden: on a current driver, an agent in a
// PID namespace of its own (a DaemonSet without hostPID) is shown no other container's
// process. Run so (unshare --pid), the agent reports nvidia.gpu.processes.hidden on its
// busy GPUs and names the cause in its log; run as the shipped DaemonSet runs it (in the
// host's PID namespace, as this test itself), it reports every process.
func TestAgentInItsOwnPIDNamespaceSaysProcessesAreHidden(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a new PID namespace needs CAP_SYS_ADMIN (CI runs as root)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatalf("unshare (util-linux, essential on Debian): %v", err)
	}
	p := prom.Start(t, "")
	hostPID := matrixRow{"pidns-host", "dgxh100", "steady-training", "580.95.05", 8}
	hostPID.start(t, p, agentNode{})
	ownPID := matrixRow{"pidns-own", "dgxh100", "steady-training", "580.95.05", 8}
	own := agentNode{binary: unshare, flags: []string{"--pid", "--fork", "--kill-child", proc.AgentBinary(t)}}
	agent := ownPID.start(t, p, own)

	prom.Eventually(t, 90*time.Second, "hidden processes in the agent's own namespace", func() error {
		s, err := p.Query(`nvidia_gpu_processes_hidden{host_name="pidns-own"} == 1`)
		if err != nil {
			return err
		}
		if len(s) != 8 {
			return fmt.Errorf("%d GPUs say their processes are hidden, want 8", len(s))
		}
		return nil
	})
	prom.Eventually(t, 60*time.Second, "processes with hostPID", func() error {
		s, err := p.Query(`nvidia_gpu_process_memory_usage_bytes{host_name="pidns-host"}`)
		if err != nil {
			return err
		}
		if len(s) != 8 {
			return fmt.Errorf("%d process series, want one per GPU", len(s))
		}
		return nil
	})
	if out := agent.Output(); !strings.Contains(out, "NVML lists no process") || !strings.Contains(out, "hostPID: true") {
		t.Errorf("the agent in its own PID namespace does not say why its GPUs show no process:\n%s", out)
	}
	for query, want := range map[string]int{
		`nvidia_gpu_process_memory_usage_bytes{host_name="pidns-own"}`: 0,
		`nvidia_gpu_processes_hidden{host_name="pidns-host"}`:          0,
	} {
		if s, err := p.Query(query); err != nil || len(s) != want {
			t.Errorf("%s: %d series (%v), want %d", query, len(s), err, want)
		}
	}
}
