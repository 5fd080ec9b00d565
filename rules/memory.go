package rules

import "github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"

// migParents is one series per MIG-enabled GPU, labelled hw_id = the GPU's UUID (its
// instances' hw_parent): "unless on (host_name, hw_id)" it leaves the GPU as a whole out,
// so that framebuffer alerts fire on its instances only.
const migParents = `label_replace(
  group by (host_name, hw_parent) (hw_gpu_memory_limit_bytes{nvidia_mig_uuid!=""}),
  "hw_id", "$1", "hw_parent", "(.+)"
)`

// correctedECC is the corrected ECC error counter since the driver loaded.
const correctedECC = `hw_errors_total{error_type="corrected",nvidia_gpu_ecc_counter_type="volatile"}`

func memory() Group {
	return Group{Name: "gpu-memory", Rules: []Rule{
		{
			Alert: "GPUMemoryHigh",
			Expr: `  hw_gpu_memory_utilization_ratio > ` + num(thresholds.MemoryHighRatio) + `
unless on (host_name, hw_id)
` + indent(migParents, "  "),
			For:         "10m",
			Severity:    "warning",
			Summary:     migAt + " has " + valuePercent + " of its framebuffer in use.",
			Description: "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}{{ with $labels.nvidia_mig_profile }}, MIG {{ . }} of GPU {{ $labels.hw_parent }}{{ end }}, {{ $labels.hw_model }})" + onNodeUsedBy + " has had more than " + percent(thresholds.MemoryHighRatio) + " of its framebuffer allocated for 10 minutes (now " + valuePercent + "). New allocations may fail with out-of-memory.",
		},
		{
			Alert:   "GPUMemoryExhaustionPredicted",
			Comment: "The trend of the last hour reaches the total within an hour, use has kept growing over the last 10 minutes for 15 minutes, and it grew by at least " + percent(thresholds.MemoryGrowthMinShare) + " of the total over the last 30 minutes: a model that loads once (a step up, then flat) does not fire it, nor does noise extrapolated from a few minutes of data. Value: the framebuffer use predicted an hour from now, in bytes.",
			Expr: `  (
      predict_linear(hw_gpu_memory_usage_bytes[1h], 3600) > hw_gpu_memory_limit_bytes
    and
      deriv(hw_gpu_memory_usage_bytes[10m]) > 0
    and
      hw_gpu_memory_usage_bytes - hw_gpu_memory_usage_bytes offset 30m > ` + num(thresholds.MemoryGrowthMinShare) + ` * hw_gpu_memory_limit_bytes
  )
unless on (host_name, hw_id)
` + indent(migParents, "  "),
			For:         "15m",
			Severity:    "warning",
			Summary:     migAt + " will run out of framebuffer within the hour.",
			Description: "Framebuffer use of GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}{{ with $labels.nvidia_mig_profile }}, MIG {{ . }} of GPU {{ $labels.hw_parent }}{{ end }}, {{ $labels.hw_model }})" + onNodeUsedBy + " keeps growing; at the trend of the last hour it reaches {{ $value | humanize1024 }}B in an hour, more than the GPU has.",
		},
		{
			Alert:   "GPUMemoryLeakSuspected",
			Comment: "The processor sets the flag per GPU and per pod on a GPU. One alert per pod whose framebuffer leaks; the whole GPU (or MIG instance) only when no pod on it is flagged, and never a MIG-enabled GPU as a whole.",
			Expr: `  max by (host_name, hw_id, hw_parent, nvidia_gpu_index, hw_model, nvidia_mig_profile, k8s_namespace_name, k8s_pod_name) (
    nvidia_gpu_memory_leak_suspected{k8s_pod_name!=""} == 1
  )
or
  (
      max by (host_name, hw_id, hw_parent, nvidia_gpu_index, hw_model, nvidia_mig_profile) (
        nvidia_gpu_memory_leak_suspected{k8s_pod_name=""} == 1
      )
    unless on (host_name, hw_id)
      nvidia_gpu_memory_leak_suspected{k8s_pod_name!=""} == 1
    unless on (host_name, hw_id)
` + indent(migParents, "      ") + `
  )`,
			For:         "15m",
			Severity:    "warning",
			Summary:     "Framebuffer leak suspected on GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}{{ with $labels.nvidia_mig_profile }}, MIG {{ . }}{{ end }}) on {{ $labels.host_name }}{{ with $labels.k8s_pod_name }} in pod {{ $labels.k8s_namespace_name }}/{{ . }}{{ end }}.",
			Description: "Framebuffer use {{ with $labels.k8s_pod_name }}of pod {{ $labels.k8s_namespace_name }}/{{ . }} {{ end }}on GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}{{ with $labels.nvidia_mig_profile }}, MIG {{ . }} of GPU {{ $labels.hw_parent }}{{ end }}, {{ $labels.hw_model }}) on node {{ $labels.host_name }} has grown steadily while its utilization stayed flat, for more than 15 minutes past the processor's leak window. The process will run out of memory if this continues.",
		},
	}}
}

func memoryErrors() Group {
	return Group{Name: "gpu-memory-errors", Rules: []Rule{
		{
			Alert:       "GPUUncorrectableECCErrors",
			Expr:        `increase(hw_errors_total{error_type="uncorrected",nvidia_gpu_ecc_counter_type="volatile"}[` + window() + `]) > 0`,
			Severity:    "critical",
			Summary:     "Uncorrectable ECC errors on " + gpuAt + ".",
			Description: gpuModel + onNodeUsedBy + " reported " + valueCount + " uncorrectable ECC error(s) in the last " + windowProse() + ". The data of the running job may be corrupt; the GPU needs a reset and may need a row remap or replacement.",
		},
		{
			Alert:       "GPURowRemapFailed",
			Expr:        `nvidia_gpu_memory_remap_failed == 1`,
			For:         "1m",
			Severity:    "critical",
			Summary:     "Row remapping failed on " + gpuAt + ".",
			Description: "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}, {{ $labels.hw_model }}, PCI {{ $labels.nvidia_gpu_pci_bus_id }})" + onNodeUsedBy + " could not remap a faulty memory row: it has no spare rows left in that bank and needs service (RMA). Drain the node.",
		},
		{
			Alert:       "GPURowRemapPending",
			Expr:        `nvidia_gpu_memory_remap_pending == 1`,
			For:         "1m",
			Severity:    "warning",
			Summary:     gpuAt + " needs a reset to apply a row remap.",
			Description: gpuModel + onNodeUsedBy + " has a memory row remap pending; it takes effect at the next GPU reset. Until then the faulty row is still in use. Drain the GPU and reset it.",
		},
		{
			Alert:       "GPURetiredPagesPending",
			Expr:        `nvidia_gpu_memory_retired_pages_pending == 1`,
			For:         "1m",
			Severity:    "warning",
			Summary:     gpuAt + " needs a reset to retire memory pages.",
			Description: gpuModel + onNodeUsedBy + " has memory pages waiting to be retired; retirement takes effect at the next GPU reset (or driver reload). Drain the GPU and reset it.",
		},
		{
			Alert:   "GPUCorrectableECCErrorsRising",
			Comment: "Predictive: more than " + num(thresholds.CorrectedECCErrors6h) + " corrected errors in the last 6 hours, at more than twice the rate of the day before. Corrected errors that accelerate often precede uncorrectable ones. Value: corrected errors in the last 6 hours.",
			Expr: `  increase(` + correctedECC + `[6h]) > ` + num(thresholds.CorrectedECCErrors6h) + `
and
  increase(` + correctedECC + `[6h])
> 2 * (
      increase(` + correctedECC + `[1d] offset 6h) / 4
    or
      increase(` + correctedECC + `[6h]) * 0
  )`,
			For:         "30m",
			Severity:    "warning",
			Summary:     "Corrected ECC errors are rising on " + gpuAt + ".",
			Description: gpuModel + onNodeUsedBy + " corrected " + valueCount + " ECC errors in the last 6 hours, more than twice its rate of the day before. Memory is degrading; plan a reset (row remap) or a replacement before errors become uncorrectable.",
		},
	}}
}
