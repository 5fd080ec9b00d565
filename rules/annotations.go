package rules

import (
	"math"
	"strconv"
	"strings"

	"github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"
)

const alertsHeader = `Alerting rules for otelcol-gpu (Prometheus 2.x rule file; promtool 2.42 syntax).

The series come from otelcol-gpu through remote-write: no job/instance labels. Every GPU
series carries host_name, hw_id (GPU UUID, or the MIG UUID for a MIG instance, with
hw_parent = the GPU's UUID), nvidia_gpu_index, hw_model, hw_driver_version,
nvidia_gpu_pci_bus_id and, when one pod holds the GPU, k8s_namespace_name, k8s_pod_name,
k8s_container_name. Host-level self-metrics (nvidia_nvml_available, nvidia_gpu_count,
nvidia_gpu_attribution_*, nvidia_gpu_devices_*, nvidia_gpu_processes_folded_total) carry
host_name only. Every rule reads only series the agent sends by default (without
deploy/config-overlays/full.yaml).

Conventions used below:
- Joins on (host_name, hw_id) only go through set operators (and/unless) or an aggregated
  side, never a one-to-one match: when the pod on a GPU changes, the series with the old
  pod labels and the new one can both answer for a while. gpu_enrich ends the old one with
  a stale marker within one collection interval (end_series, on by default), but an agent
  that stops or restarts ends nothing, and Prometheus then keeps answering with a series'
  last sample for its 5-minute lookback.
- A MIG-enabled GPU reports its framebuffer both as a whole (hw_id = GPU UUID) and per
  MIG instance (nvidia_mig_uuid set). Framebuffer alerts fire on the instances, never on
  their parent as well.
- The alert GPUWorkloadUtilizationDeviation needs the recording rules of
  gpu-recording.yaml, GPUIdleCostHigh those and gpu-prices.yaml (with a GPU price set);
  every other alert stands alone.

Runbook: rules/runbook.md (one section per alert; the anchor is the lower-cased name).`

const recordingHeader = `Recording rules for otelcol-gpu (Prometheus 2.x rule file; promtool 2.42 syntax).
Naming: level:metric:operations. Levels: namespace_pod_gpu (a pod on one GPU or MIG
instance), namespace_pod, namespace, hw_model, node_resource (host_name and
nvidia_gpu_resource_name), cluster_resource (nvidia_gpu_resource_name), cluster (no label),
slurm_job_gpu (a Slurm job on one GPU or MIG instance), slurm_job (slurm_job_id, or
slurm_job_sluid for Slurm 26.05+ SLUIDs: a job has one of the two), and for the allocation
funnel and costs namespace_workload_pod_gpu, namespace_workload (the namespace and
k8s_attributes' deployment, statefulset, daemonset, job and cronjob names),
namespace_workload_model and slurm_job_model (plus hw_model, the level prices apply to),
node (host_name), node_pool (k8s_node_pool). Funnel and cost series keep a cluster label
where the series carry one.

"Hours" and "kWh" series hold the total over the trailing hour. To total a longer period,
sample them once an hour: sum_over_time(namespace:gpu_allocated_hours:sum[30d:1h]).

A pod counts as holding a GPU (or MIG instance) while the agent writes a per-pod series
for it: nvidia_gpu_pod_energy_joules_total (every pod on a whole GPU), else
nvidia_gpu_pod_memory_usage_bytes (MIG instances), else nvidia_gpu_pod_utilization_ratio.
A MIG instance and a time-slicing replica count as one device each. Allocation per
resource name includes DRA drivers (nvidia_gpu_resource_name="gpu.nvidia.com").

A Slurm job counts as on a GPU while the agent writes a per-job series for it
(nvidia_gpu_job_*): while one of its processes runs there.

The funnel (gpus_total, gpus_allocated, gpus_active, gpus_effective, gpus_idle; GPU-hours
gpu_hours_*:sum1h) counts GPUs by share instead: a MIG instance is its compute slices over
its GPU's, a GPU shared by several pods or jobs is split between them by their
utilization. Costs (gpu_cost_*) price those GPU-hours per GPU model with the series of
gpu-prices.yaml (internal/pricing/prices.yaml); with no price set they are empty.`

const pricesHeader = `GPU and energy prices for otelcol-gpu's cost recording rules (Prometheus 2.x rule
file; promtool 2.42 syntax), written from internal/pricing/prices.yaml: edit that file,
regenerate, reload. Load it with gpu-recording.yaml; the cost rules there multiply
GPU-hours and kWh by these series. With no price set only cluster:gpu_price_configured:config
is written, 0, and every cost rule is empty.`

// Annotation fragments (Prometheus templates) that say where an alert is.
const (
	// gpuAt names the GPU, its node and, when one pod holds it alone, the pod.
	gpuAt = "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}) on {{ $labels.host_name }}" + podInParens
	// migAt is gpuAt for what may be a MIG instance.
	migAt       = "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}{{ with $labels.nvidia_mig_profile }}, MIG {{ . }}{{ end }}) on {{ $labels.host_name }}" + podInParens
	podInParens = "{{ with $labels.k8s_pod_name }} (pod {{ $labels.k8s_namespace_name }}/{{ . }}){{ end }}"
	// gpuModel and onNodeUsedBy start a description.
	gpuModel     = "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}, {{ $labels.hw_model }})"
	onNodeUsedBy = " on node {{ $labels.host_name }}{{ with $labels.k8s_pod_name }}, used by pod {{ $labels.k8s_namespace_name }}/{{ . }},{{ end }}"
	// The alert's value.
	valuePercent = "{{ $value | humanizePercentage }}"
	valueCount   = "{{ $value | printf \"%.0f\" }}"
)

// num writes a threshold as PromQL and prose do: 0.9, 85, 300.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// percent writes a ratio as a percentage: 0.9 is "90 %".
func percent(v float64) string { return num(math.Round(v*1e6)/1e4) + " %" }

// window is the XID health window as a PromQL duration (10m); windowProse says it in words.
func window() string { return windowMinutes() + "m" }

func windowProse() string { return windowMinutes() + " minutes" }

func windowMinutes() string { return strconv.Itoa(int(thresholds.XIDHealthWindow.Minutes())) }

// xidRegex matches the XID codes of a class: 48|64|79.
func xidRegex(class thresholds.XIDClass) string { return strings.Join(xidCodes(class), "|") }

// xidList lists them in prose: 63, 74, 92, 94.
func xidList(class thresholds.XIDClass) string { return strings.Join(xidCodes(class), ", ") }

func xidCodes(class thresholds.XIDClass) []string {
	var out []string
	for _, c := range thresholds.XIDs(class) {
		out = append(out, strconv.FormatUint(c, 10))
	}
	return out
}
