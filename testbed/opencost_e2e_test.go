//go:build e2e

package testbed

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/otelcol-gpu/otelcol-gpu/internal/fakekubelet"
	"github.com/otelcol-gpu/otelcol-gpu/testbed/internal/prom"
)

// OpenCost's queries of dcgm-exporter series, as its Go source formats them (%s filled as
// OpenCost fills them by default: an empty cluster filter, the cluster label cluster_id,
// here a 1m window).
//
//   - v1.112.0, pkg/costmodel/allocation.go, queryFmtGPUsUsageAvg: each container's GPU
//     usage, Allocation.GPUUsageAverage (GPU efficiency is usage over request).
//   - develop, modules/prometheus-source/pkg/prom/metricsquerier.go: QueryGPUsUsageAvg,
//     QueryGPUsUsageMax (the same, per pod UID too) and QueryGPUInfo (which device, model and
//     UUID each container holds, from DCGM_FI_DEV_DEC_UTIL).
//   - develop, modules/prometheus-source/pkg/prom/gpudevicequerier.go: the per-device
//     queries (power, temperature, usage, framebuffer used).
//   - develop, modules/prometheus-source/pkg/prom/gpusaturationquerier.go: framebuffer
//     occupancy, XID changes and the throttle violation counters per container.
const (
	openCostWindow       = "1m"
	openCostClusterLabel = "cluster_id"
	openCostFilter       = ""
	openCostSaturationBy = `container, pod, namespace, device, modelName, UUID, GPU_I_PROFILE, GPU_I_ID, uid`
	openCostDeviceBy     = `device, modelName, UUID, GPU_I_PROFILE, GPU_I_ID`
)

// openCostQueries are OpenCost's queries with their arguments filled in.
var openCostQueries = map[string]string{
	"v1.112.0 queryFmtGPUsUsageAvg": fmt.Sprintf(`avg(avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{container!=""}[%s])) by (container, pod, namespace, %s)`, openCostWindow, openCostClusterLabel),
	"QueryGPUsUsageAvg":             fmt.Sprintf(`avg(avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{container!=""}[%s])) by (container, pod, namespace, uid, %s)`, openCostWindow, openCostClusterLabel),
	"QueryGPUsUsageMax":             fmt.Sprintf(`max(max_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{container!=""}[%s])) by (container, pod, namespace, uid, %s)`, openCostWindow, openCostClusterLabel),
	"QueryGPUInfo":                  fmt.Sprintf(`avg(avg_over_time(DCGM_FI_DEV_DEC_UTIL{container!="",%s}[%s])) by (container, pod, namespace, device, modelName, UUID, uid, %s)`, openCostFilter, openCostWindow, openCostClusterLabel),
	"QueryGPUDeviceUsageAvg":        fmt.Sprintf(`%s(%s_over_time(%s{%s}[%s])) by (%s, %s)`, "avg", "avg", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", openCostFilter, openCostWindow, openCostDeviceBy, openCostClusterLabel),
	"QueryGPUDevicePowerAvg":        fmt.Sprintf(`%s(%s_over_time(%s{%s}[%s])) by (%s, %s)`, "avg", "avg", "DCGM_FI_DEV_POWER_USAGE", openCostFilter, openCostWindow, openCostDeviceBy, openCostClusterLabel),
	"QueryGPUDeviceTempAvg":         fmt.Sprintf(`%s(%s_over_time(%s{%s}[%s])) by (%s, %s)`, "avg", "avg", "DCGM_FI_DEV_GPU_TEMP", openCostFilter, openCostWindow, openCostDeviceBy, openCostClusterLabel),
	"QueryGPUDeviceMemoryUsedAvg":   fmt.Sprintf(`%s(%s_over_time(%s{%s}[%s])) by (%s, %s)`, "avg", "avg", "DCGM_FI_DEV_FB_USED", openCostFilter, openCostWindow, openCostDeviceBy, openCostClusterLabel),
	"QueryGPUMemoryUsedRatioAvg": fmt.Sprintf(`avg(avg_over_time(DCGM_FI_DEV_FB_USED{container!="",%s}[%s])) by (%s, %s) / (avg(avg_over_time(DCGM_FI_DEV_FB_USED{container!="",%s}[%s])) by (%s, %s) + avg(avg_over_time(DCGM_FI_DEV_FB_FREE{container!="",%s}[%s])) by (%s, %s))`,
		openCostFilter, openCostWindow, openCostSaturationBy, openCostClusterLabel,
		openCostFilter, openCostWindow, openCostSaturationBy, openCostClusterLabel,
		openCostFilter, openCostWindow, openCostSaturationBy, openCostClusterLabel),
	"QueryGPUXIDErrorCount": fmt.Sprintf(`sum(changes(DCGM_FI_DEV_XID_ERRORS{container!="",%s}[%s])) by (%s, %s)`, openCostFilter, openCostWindow, openCostSaturationBy, openCostClusterLabel),
	// buildGPUThrottleViolationQuery: one branch per violation counter, joined with "or";
	// OpenCost divides by the window in microseconds.
	"QueryGPUThrottleViolationRatio": openCostViolationQuery(),
}

func openCostViolationQuery() string {
	q := ""
	for _, v := range []struct{ metric, reason string }{
		{"DCGM_FI_DEV_POWER_VIOLATION", "power"}, {"DCGM_FI_DEV_THERMAL_VIOLATION", "thermal"},
		{"DCGM_FI_DEV_SYNC_BOOST_VIOLATION", "sync_boost"}, {"DCGM_FI_DEV_BOARD_LIMIT_VIOLATION", "board_limit"},
	} {
		if q != "" {
			q += " or "
		}
		q += fmt.Sprintf(`label_replace(avg(increase(%s{container!="",%s}[%s])) by (%s, %s) / %g, "reason", "%s", "", "")`,
			v.metric, openCostFilter, openCostWindow, openCostSaturationBy, openCostClusterLabel, 60*1e6, v.reason)
	}
	return q
}

// TestOpenCostGPUQueriesOnCompatibleSeries: OpenCost's GPU allocation and efficiency
// queries, run against a Prometheus fed by the agent's build with configs/dcgm-compat.yaml,
// answer as they would against dcgm-exporter on the same node. The node: a DGX H100 in
// steady training; GPUs 1-7 each held by one pod (ml/train-N, container pytorch), GPU 0
// by none. What dcgm-exporter 4.8 reports for that workload follows from the scenario
// (internal/gpusim's steadyTraining and derive): one answer per pod and none for the GPU
// without one (dcgm-exporter gives its series no container label), each container's
// device nvidiaN, modelName "NVIDIA H100 80GB HBM3" and its GPU's UUID, and the values
// openCostExpected works out.
func TestOpenCostGPUQueriesOnCompatibleSeries(t *testing.T) {
	uuids := simulatedUUIDs(t, "dgxh100")
	dir := fakekubelet.SocketDir(t)
	node := agentNode{kubeletSocket: filepath.Join(dir, "kubelet.sock"), overlays: []string{"dcgm-compat.yaml"}}
	var pods []fakekubelet.Pod
	for i := 1; i < len(uuids); i++ {
		pods = append(pods, fakekubelet.Pod{Namespace: "ml", Name: fmt.Sprintf("train-%d", i), Containers: []fakekubelet.Container{
			{Name: "pytorch", Devices: []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: []string{uuids[i]}}}},
		}})
	}
	startFakeKubelet(t, node.kubeletSocket, pods, []fakekubelet.Devices{{ResourceName: "nvidia.com/gpu", DeviceIDs: uuids}})
	p := prom.Start(t, "")
	startAgentOn(t, p, "e2e-opencost", "dgxh100", "steady-training", node)

	// A whole window of samples (1 s apart) before asking.
	prom.Eventually(t, 150*time.Second, "a minute of samples", func() error {
		s, err := p.Query(`count_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE{gpu="1",pod="train-1"}[1m])`)
		if err != nil {
			return err
		}
		if len(s) != 1 || s[0].Value < 57 {
			return fmt.Errorf("samples in the last minute: %v", s)
		}
		return nil
	})

	perContainer := func(lo, hi float64, extra func(gpu int, l map[string]string) error) func([]prom.Sample) error {
		return func(s []prom.Sample) error {
			if len(s) != len(uuids)-1 {
				return fmt.Errorf("%d answers, want one per pod (%d): %v", len(s), len(uuids)-1, s)
			}
			seen := map[string]bool{}
			for _, x := range s {
				var gpu int
				if _, err := fmt.Sscanf(x.Labels["pod"], "train-%d", &gpu); err != nil || x.Labels["namespace"] != "ml" || x.Labels["container"] != "pytorch" {
					return fmt.Errorf("labels %v: not one of the pods", x.Labels)
				}
				seen[x.Labels["pod"]] = true
				if x.Value < lo || x.Value > hi {
					return fmt.Errorf("%s: %v, want %v-%v", x.Labels["pod"], x.Value, lo, hi)
				}
				if extra != nil {
					if err := extra(gpu, x.Labels); err != nil {
						return err
					}
				}
			}
			if len(seen) != len(uuids)-1 {
				return fmt.Errorf("pods answered: %v", seen)
			}
			return nil
		}
	}
	perDevice := func(lo, hi float64) func([]prom.Sample) error {
		return func(s []prom.Sample) error {
			if len(s) != len(uuids) {
				return fmt.Errorf("%d answers, want one per GPU (%d): %v", len(s), len(uuids), s)
			}
			for _, x := range s {
				var gpu int
				if _, err := fmt.Sscanf(x.Labels["device"], "nvidia%d", &gpu); err != nil || gpu >= len(uuids) || x.Labels["UUID"] != uuids[gpu] || x.Labels["modelName"] != "NVIDIA H100 80GB HBM3" {
					return fmt.Errorf("labels %v: not one of the GPUs", x.Labels)
				}
				if x.Value < lo || x.Value > hi {
					return fmt.Errorf("%s: %v, want %v-%v", x.Labels["device"], x.Value, lo, hi)
				}
			}
			return nil
		}
	}
	deviceOfPod := func(gpu int, l map[string]string) error {
		if l["device"] != fmt.Sprintf("nvidia%d", gpu) || l["UUID"] != uuids[gpu] || l["modelName"] != "NVIDIA H100 80GB HBM3" {
			return fmt.Errorf("%s holds GPU %d (%s), labels %v", l["pod"], gpu, uuids[gpu], l)
		}
		return nil
	}
	e := openCostExpected
	want := map[string]func([]prom.Sample) error{
		"v1.112.0 queryFmtGPUsUsageAvg": perContainer(e.usageAvg[0], e.usageAvg[1], nil),
		"QueryGPUsUsageAvg":             perContainer(e.usageAvg[0], e.usageAvg[1], nil),
		"QueryGPUsUsageMax":             perContainer(e.usageMax[0], e.usageMax[1], nil),
		"QueryGPUInfo":                  perContainer(0, 0, deviceOfPod),
		"QueryGPUDeviceUsageAvg":        perDevice(e.usageAvg[0], e.usageAvg[1]),
		"QueryGPUDevicePowerAvg":        perDevice(e.powerW[0], e.powerW[1]),
		"QueryGPUDeviceTempAvg":         perDevice(e.tempC[0], e.tempC[1]),
		"QueryGPUDeviceMemoryUsedAvg":   perDevice(e.fbUsedMiB[0], e.fbUsedMiB[1]),
		"QueryGPUMemoryUsedRatioAvg":    perContainer(e.fbOccupancy[0], e.fbOccupancy[1], deviceOfPod),
		"QueryGPUXIDErrorCount":         perContainer(0, 0, deviceOfPod),
		"QueryGPUThrottleViolationRatio": func(s []prom.Sample) error {
			byReason := map[string][]prom.Sample{}
			for _, x := range s {
				byReason[x.Labels["reason"]] = append(byReason[x.Labels["reason"]], x)
			}
			for _, reason := range []string{"power", "thermal", "sync_boost", "board_limit"} {
				if err := perContainer(0, 0, deviceOfPod)(byReason[reason]); err != nil {
					return fmt.Errorf("%s: %w", reason, err)
				}
			}
			if len(s) != 4*(len(uuids)-1) {
				return fmt.Errorf("%d answers, want 4 reasons × %d pods", len(s), len(uuids)-1)
			}
			return nil
		},
	}
	for name, q := range openCostQueries {
		t.Run(name, func(t *testing.T) {
			s, err := p.Query(q)
			if err != nil {
				t.Fatal(err)
			}
			if err := want[name](s); err != nil {
				t.Errorf("%s\n%v", q, err)
			}
		})
	}
}

// openCostExpected are dcgm-exporter's answers to OpenCost's queries on the node of
// TestOpenCostGPUQueriesOnCompatibleSeries, worked out from internal/gpusim's
// steady-training scenario over a one-minute window of 1 s samples:
//
//   - utilization u = 88 + 4·wave + 1.5·noise (%), the wave a sine of period 60 s, so its
//     mean over the minute is 0. The simulator's noise is uniform on [-1, 3), not on
//     [-1, 1] as its comment says (noise() scales 53 bits by 2^-52): mean +1, so u's mean
//     is 89.5 % ± 0.7 (the mean of ~60 noise samples: σ = 1.5·1.15/√60), and its peak
//     92 + 1.5·3 at most. GPM's graphics activity, DCGM_FI_PROF_GR_ENGINE_ACTIVE, is u/100
//     averaged over each interval's whole seconds.
//   - power 70 W + u·(0.85·700 - 70) W + 4·noise: 70 + 0.895·525 + 4 = 544 W ± 6.
//   - GPU temperature 33 + u·38 + 0.8·noise °C: 67.8 ± 0.9 (NVML's whole degrees).
//   - framebuffer used (0.78 + 0.002·noise) of 81,920 MiB: 64,061 MiB ± 60; used + free is
//     the total less the driver's 1/234, so used/(used+free) = 0.782·234/233 = 0.785 ± 0.002.
//   - no decoder work, no XID, no time held down.
var openCostExpected = struct {
	usageAvg, usageMax, powerW, tempC, fbUsedMiB, fbOccupancy [2]float64
}{
	usageAvg:    [2]float64{0.888, 0.902},
	usageMax:    [2]float64{0.925, 0.966},
	powerW:      [2]float64{538, 550},
	tempC:       [2]float64{66.9, 68.7},
	fbUsedMiB:   [2]float64{64000, 64120},
	fbOccupancy: [2]float64{0.783, 0.788},
}
