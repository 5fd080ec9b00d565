//go:build e2e

package testbed

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
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
		// Fields alerts commonly add: memory headroom, ECC, the power limit, the last XID
		// (0: none yet, with dcgm-exporter's err_code label).
		`DCGM_FI_DEV_FB_TOTAL - DCGM_FI_DEV_FB_USED - DCGM_FI_DEV_FB_FREE - DCGM_FI_DEV_FB_RESERVED`: each(8, between("MiB", -2, 2)),
		`DCGM_FI_DEV_ECC_DBE_VOL_TOTAL + DCGM_FI_DEV_ECC_DBE_AGG_TOTAL`:                              each(8, between("errors", 0, 0)),
		`DCGM_FI_DEV_POWER_USAGE / DCGM_FI_DEV_POWER_MGMT_LIMIT`:                                     each(8, between("ratio", 0.05, 1)),
		`DCGM_FI_DEV_XID_ERRORS{err_code="0",err_msg="No Error"}`:                                    each(8, between("XID", 0, 0)),
		// A liveness series for absent(up{job="dcgm-exporter"}) and up == 0 alerts.
		`up{job="dcgm-exporter",Hostname="e2e-dcgm"}`: each(1, between("up", 1, 1)),
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
		if n, err := p.Query(`count({job="dcgm-exporter",Hostname="e2e-dcgm"})`); err == nil && len(n) == 1 {
			t.Logf("compatible series of an H100 node (8 GPUs, default set): %v", n[0].Value)
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

// dcgmField is one field of dcgm-exporter's shipped CSV files (etc/default-counters.csv and
// etc/dcp-metrics-included.csv, active and commented-out rows, as of 4.5.3-4.8.2, and the
// PCIe throughput rows of earlier releases), with the range a simulated DGX H100 in
// training must show in dcgm-exporter's unit.
type dcgmField struct {
	name   string
	lo, hi float64
}

// dcgmCSVFields are the fields NVML can give (the rest are listed, with the reason, in
// docs/migrating-from-dcgm-exporter.md and kept in step with the overlay by TestEveryDCGMCSVFieldIsAccountedFor).
var dcgmCSVFields = []dcgmField{
	{"DCGM_FI_DEV_SM_CLOCK", 300, 2000},               // MHz
	{"DCGM_FI_DEV_MEM_CLOCK", 1000, 3500},             // MHz
	{"DCGM_FI_DEV_MEMORY_TEMP", 20, 100},              // °C
	{"DCGM_FI_DEV_GPU_TEMP", 20, 100},                 // °C
	{"DCGM_FI_DEV_POWER_USAGE", 50, 700},              // W
	{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 1, 1e12}, // mJ
	{"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", 1e4, 1e8},      // KB/s
	{"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", 1e4, 1e8},      // KB/s
	{"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", 0, 1e6},
	{"DCGM_FI_DEV_MEM_COPY_UTIL", 0, 100},          // %
	{"DCGM_FI_DEV_DEC_UTIL", 0, 100},               // %
	{"DCGM_FI_DEV_XID_ERRORS", 0, 0},               // the last XID: none
	{"DCGM_FI_DEV_POWER_VIOLATION", 0, 1e12},       // ns
	{"DCGM_FI_DEV_THERMAL_VIOLATION", 0, 1e12},     // ns
	{"DCGM_FI_DEV_SYNC_BOOST_VIOLATION", 0, 1e12},  // ns
	{"DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", 0, 1e12}, // ns
	{"DCGM_FI_DEV_LOW_UTIL_VIOLATION", 0, 1e12},    // ns
	{"DCGM_FI_DEV_RELIABILITY_VIOLATION", 0, 1e12}, // ns
	{"DCGM_FI_DEV_FB_FREE", 0, 81920},              // MiB
	{"DCGM_FI_DEV_FB_USED", 1000, 81920},           // MiB
	{"DCGM_FI_DEV_FB_RESERVED", 1, 1000},           // MiB
	{"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", 0, 1e6},
	{"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 0, 1e6},
	{"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", 0, 1e6},
	{"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", 0, 1e6},
	{"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 0, 1e6},
	{"DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 0, 1e6},
	{"DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 0, 1e6},
	{"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", 100, 1e6}, // MB/s, both directions
	{"DCGM_FI_DEV_NVLINK_BANDWIDTH_L0", 1, 1e15},     // bytes
	{"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", 0, 1e6},
	{"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 0, 1e6},
	{"DCGM_FI_DEV_ROW_REMAP_FAILURE", 0, 0},
	{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.5, 1}, // ratios
	{"DCGM_FI_PROF_SM_ACTIVE", 0.5, 1},
	{"DCGM_FI_PROF_SM_OCCUPANCY", 0.1, 1},
	{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", 0.1, 1},
	{"DCGM_FI_PROF_DRAM_ACTIVE", 0.1, 1},
	{"DCGM_FI_PROF_PIPE_FP64_ACTIVE", 0, 1},
	{"DCGM_FI_PROF_PIPE_FP32_ACTIVE", 0, 1},
	{"DCGM_FI_PROF_PIPE_FP16_ACTIVE", 0, 1},
	{"DCGM_FI_PROF_PCIE_TX_BYTES", 1e7, 1e11}, // bytes/s
	{"DCGM_FI_PROF_PCIE_RX_BYTES", 1e7, 1e11}, // bytes/s
}

// dcgmCommonExtraFields are fields users add beyond the CSVs' rows (dcgm_fields.h names and
// units): limits, totals and link state.
var dcgmCommonExtraFields = []dcgmField{
	{"DCGM_FI_DEV_FB_TOTAL", 80000, 82000},     // MiB
	{"DCGM_FI_DEV_POWER_MGMT_LIMIT", 700, 700}, // W
	{"DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 700, 700},
	{"DCGM_FI_DEV_POWER_MGMT_LIMIT_MIN", 100, 700},
	{"DCGM_FI_DEV_POWER_MGMT_LIMIT_MAX", 700, 700},
	{"DCGM_FI_DEV_POWER_MGMT_LIMIT_DEF", 700, 700},
	{"DCGM_FI_DEV_MAX_SM_CLOCK", 1980, 1980}, // MHz
	{"DCGM_FI_DEV_MAX_MEM_CLOCK", 2619, 2619},
	{"DCGM_FI_DEV_SLOWDOWN_TEMP", 50, 120}, // °C
	{"DCGM_FI_DEV_SHUTDOWN_TEMP", 50, 120},
	{"DCGM_FI_DEV_GPU_MAX_OP_TEMP", 50, 120},
	{"DCGM_FI_DEV_MEM_MAX_OP_TEMP", 50, 120},
	{"DCGM_FI_DEV_PSTATE", 0, 15},
	{"DCGM_FI_DEV_PCIE_LINK_GEN", 1, 6},
	{"DCGM_FI_DEV_PCIE_MAX_LINK_GEN", 1, 6},
	{"DCGM_FI_DEV_PCIE_LINK_WIDTH", 1, 16},
	{"DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", 1, 16},
	{"DCGM_FI_DEV_ROW_REMAP_PENDING", 0, 0},
	{"DCGM_FI_PROF_NVLINK_TX_BYTES", 1e7, 1e12}, // bytes/s
	{"DCGM_FI_PROF_NVLINK_RX_BYTES", 1e7, 1e12},
}

// TestDCGMCompatibilityEveryField: with every receiver metric on (the full overlay), every
// CSV field NVML can give lands with dcgm-exporter's name, one series per GPU, in its
// unit; the overlay's switches give the labels a GPU Operator install scraped without
// honorLabels has (job nvidia-dcgm-exporter, exported_pod/namespace/container),
// --replace-blanks-in-model-name's modelName, and the inventory labels (a simulated H100
// keeps no separate power InfoROM object, so DCGM_FI_DEV_POWER_INFOROM_VER is absent).
// On a MIG node each instance has its own series of the fields it reports
// (GPU_I_ID, GPU_I_PROFILE) and per-GPU sums count nothing twice.
func TestDCGMCompatibilityEveryField(t *testing.T) {
	uuids := simulatedUUIDs(t, "dgxh100")
	node := fakeNode(t, uuids)
	// full.yaml for the NVLink error totals, link 0's bytes and the inventory labels; it
	// may come before or after the overlay (TestDCGMCompatOverlayInAnyOrderAndGeneration).
	node.overlays = []string{"../deploy/config-overlays/full.yaml", "dcgm-compat.yaml"}
	node.env = []string{"OTELCOL_GPU_DCGM_JOB=nvidia-dcgm-exporter", "OTELCOL_GPU_DCGM_POD_LABEL_PREFIX=exported_", "OTELCOL_GPU_DCGM_REPLACE_BLANKS_IN_MODEL_NAME=true"}
	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-dcgm-all", "dgxh100", "steady-training", node)
	startAgentOn(t, p, "e2e-dcgm-mig", "dgxh100", "mig", agentNode{overlays: []string{"dcgm-compat.yaml"}})
	startAgentOn(t, p, "e2e-dcgm-xid", "dgxh100", "xid-storm", agentNode{overlays: []string{"dcgm-compat.yaml"}})

	sel := `{Hostname="e2e-dcgm-all",job="nvidia-dcgm-exporter"}`
	for _, f := range append(append([]dcgmField(nil), dcgmCSVFields...), dcgmCommonExtraFields...) {
		prom.Eventually(t, 60*time.Second, f.name, func() error {
			s, err := p.Query(f.name + sel)
			if err != nil {
				return err
			}
			return each(8, between(f.name, f.lo, f.hi))(s)
		})
	}

	if n, err := p.Query(`count(` + sel + `)`); err == nil && len(n) == 1 {
		t.Logf("compatible series of an H100 node (8 GPUs, every field): %v", n[0].Value)
	}

	t.Run("labels as a GPU Operator install scraped without honorLabels has them", func(t *testing.T) {
		s, err := p.Query(`DCGM_FI_DEV_GPU_UTIL` + sel)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range s {
			if x.Labels["gpu"] == "0" {
				continue // time-sliced between two pods: no single pod
			}
			if x.Labels["exported_pod"] != "train-"+x.Labels["gpu"] || x.Labels["exported_namespace"] != "ml" || x.Labels["exported_container"] != "pytorch" {
				t.Errorf("GPU %s: %v", x.Labels["gpu"], x.Labels)
			}
			for _, l := range []string{"DCGM_FI_NVML_VERSION", "DCGM_FI_DEV_BRAND", "DCGM_FI_DEV_SERIAL", "DCGM_FI_DEV_OEM_INFOROM_VER",
				"DCGM_FI_DEV_ECC_INFOROM_VER", "DCGM_FI_DEV_INFOROM_IMAGE_VER", "DCGM_FI_DEV_VBIOS_VERSION"} {
				if x.Labels[l] == "" {
					t.Errorf("GPU %s lacks the inventory label %s: %v", x.Labels["gpu"], l, x.Labels)
				}
			}
			if x.Labels["modelName"] != "NVIDIA-H100-80GB-HBM3" {
				t.Errorf("GPU %s: modelName %q, want the blanks replaced", x.Labels["gpu"], x.Labels["modelName"])
			}
			if x.Labels["pod"] != "" || x.Labels["namespace"] != "" || x.Labels["container"] != "" {
				t.Errorf("GPU %s: unprefixed pod labels too: %v", x.Labels["gpu"], x.Labels)
			}
		}
		if up, err := p.Query(`up{job="nvidia-dcgm-exporter",Hostname="e2e-dcgm-all"} == 1`); err != nil || len(up) != 1 {
			t.Errorf("liveness under the configured job: %v %v", up, err)
		}
		if xid, err := p.Query(`DCGM_FI_DEV_XID_ERRORS` + sel); err != nil || len(xid) != 8 || xid[0].Labels["err_code"] != "0" {
			t.Errorf("DCGM_FI_DEV_XID_ERRORS carries err_code: %v %v", xid, err)
		}
	})

	t.Run("the last XID as dcgm-exporter's gauge, with err_code and err_msg", func(t *testing.T) {
		want := map[string]struct {
			code float64
			msg  string
		}{"0": {13, "Graphics Engine Exception"}, "1": {31, "GPU memory page fault"}, "2": {94, "Contained ECC error"},
			// GPU 3's XID 43 at 5 s, then 45 at 20 s: the gauge follows the newer code.
			"3": {45, "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda"}}
		prom.Eventually(t, 60*time.Second, "last XIDs", func() error {
			s, err := p.Query(`DCGM_FI_DEV_XID_ERRORS{Hostname="e2e-dcgm-xid"} > 0`)
			if err != nil {
				return err
			}
			if len(s) != len(want) {
				return fmt.Errorf("%d GPUs with an XID, want %d: %v", len(s), len(want), s)
			}
			for _, x := range s {
				w := want[x.Labels["gpu"]]
				if x.Value != w.code || x.Labels["err_code"] != fmt.Sprint(w.code) || x.Labels["err_msg"] != w.msg {
					return fmt.Errorf("GPU %s: %v = %v, want %v", x.Labels["gpu"], x.Labels, x.Value, w)
				}
			}
			return nil
		})
		// The GPUs without an XID say so, and the series of a GPU's earlier code ended (0
		// before its first XID; GPU 3's 43 once 45 came, with 43's err_msg, or the end
		// would not match the series it ends): one series per GPU, not one per code it
		// ever had.
		answers(t, p, `DCGM_FI_DEV_XID_ERRORS{Hostname="e2e-dcgm-xid",err_code="0",err_msg="No Error"} == 0`, 4, 60*time.Second)
		answers(t, p, `DCGM_FI_DEV_XID_ERRORS{Hostname="e2e-dcgm-xid"}`, 8, 60*time.Second)
	})

	t.Run("MIG in dcgm-exporter's shape", func(t *testing.T) {
		mig := `{Hostname="e2e-dcgm-mig"}`
		// GPU 0 has four instances, GPU 1 seven, the other six GPUs are whole.
		fb := answers(t, p, `DCGM_FI_DEV_FB_USED`+mig, 4+7+6, 60*time.Second)
		instances := map[string]int{}
		for _, x := range fb {
			if id := x.Labels["GPU_I_ID"]; id != "" {
				instances[x.Labels["gpu"]]++
				if x.Labels["GPU_I_PROFILE"] == "" || x.Labels["device"] != "nvidia"+x.Labels["gpu"] || !strings.HasPrefix(x.Labels["UUID"], "GPU-") {
					t.Errorf("instance series %v: not labelled as dcgm-exporter labels a GPU instance", x.Labels)
				}
			} else if x.Labels["gpu"] == "0" || x.Labels["gpu"] == "1" {
				t.Errorf("a MIG-enabled GPU has a whole-GPU framebuffer series too, which sums count twice: %v", x.Labels)
			}
		}
		if instances["0"] != 4 || instances["1"] != 7 {
			t.Errorf("instances per GPU: %v", instances)
		}
		// Per-GPU sums are the instances' own: the same as the native instance series.
		for _, gpu := range []string{"0", "1"} {
			compat := answers(t, p, `sum(DCGM_FI_DEV_FB_USED{Hostname="e2e-dcgm-mig",gpu="`+gpu+`"})`, 1, 60*time.Second)
			native := answers(t, p, `sum(hw_gpu_memory_usage_bytes{host_name="e2e-dcgm-mig",nvidia_gpu_index="`+gpu+`",nvidia_mig_uuid!="",process_pid=""}) / 1048576`, 1, 60*time.Second)
			// dcgm-exporter's FB_USED is whole MiB per instance: up to 1 MiB each.
			if d := compat[0].Value - native[0].Value; d < -float64(instances[gpu]) || d > float64(instances[gpu]) {
				t.Errorf("GPU %s: compatible FB_USED sums to %v MiB, its instances use %v", gpu, compat[0].Value, native[0].Value)
			}
		}
		// Per-instance activity where the GPU has GPM (Hopper); device-wide fields once per GPU.
		answers(t, p, `DCGM_FI_PROF_GR_ENGINE_ACTIVE{Hostname="e2e-dcgm-mig",GPU_I_ID!=""}`, 4+7, 60*time.Second)
		answers(t, p, `DCGM_FI_DEV_POWER_USAGE`+mig, 8, 60*time.Second)
		answers(t, p, `DCGM_FI_DEV_GPU_TEMP{Hostname="e2e-dcgm-mig",GPU_I_ID=""}`, 8, 60*time.Second)
	})
}

// TestDCGMCompatibilityOnABareHost: the bare-host overlay with the compatibility overlay
// polls no kubelet (neither pipeline's gpu_enrich dials the socket) and still writes the
// dcgm-exporter series.
func TestDCGMCompatibilityOnABareHost(t *testing.T) {
	dir := fakekubelet.SocketDir(t)
	socket := filepath.Join(dir, "kubelet.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = c.Close()
		}
	}()

	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-dcgm-bare", "dgxh100", "steady-training", agentNode{
		kubeletSocket: socket,
		overlays:      []string{"../deploy/config-overlays/bare-host.yaml", "dcgm-compat.yaml"},
	})
	answers(t, p, `DCGM_FI_DEV_GPU_UTIL{Hostname="e2e-dcgm-bare"}`, 8, 60*time.Second)
	answers(t, p, `hw_gpu_utilization_ratio{host_name="e2e-dcgm-bare",hw_gpu_task="general"}`, 8, 60*time.Second)
	time.Sleep(5 * time.Second) // five more refresh intervals of a kubelet client, were there one
	if n := dials.Load(); n != 0 {
		t.Errorf("the agent dialled the kubelet socket %d times on a bare host", n)
	}
}
