package rules

import "github.com/otelcol-gpu/otelcol-gpu/internal/thresholds"

func xid() Group {
	return Group{Name: "gpu-xid", Rules: []Rule{
		{
			Alert:   "GPUXidErrorFatal",
			Comment: "The counter is per XID code and exists only once that code occurred since the agent started: a series that appears counts as new errors, unless the same GPU and code were there " + windowProse() + " ago (the series only changed its pod labels).",
			Expr: `  increase(nvidia_gpu_xid_errors_total{nvidia_gpu_xid=~"` + xidRegex(thresholds.XIDFatal) + `"}[` + window() + `]) > 0
or
  (
      nvidia_gpu_xid_errors_total{nvidia_gpu_xid=~"` + xidRegex(thresholds.XIDFatal) + `"}
    unless on (host_name, hw_id, nvidia_gpu_xid)
      nvidia_gpu_xid_errors_total offset ` + window() + `
  )`,
			Severity:    "critical",
			Summary:     "Fatal XID {{ $labels.nvidia_gpu_xid }} on " + gpuAt + ".",
			Description: "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}, {{ $labels.hw_model }}, PCI {{ $labels.nvidia_gpu_pci_bus_id }}, driver {{ $labels.hw_driver_version }})" + onNodeUsedBy + " reported XID {{ $labels.nvidia_gpu_xid }} (" + valueCount + " in the last " + windowProse() + "). This XID means the GPU (or its memory) is no longer trustworthy: the job on it has most likely failed and the GPU needs a reset or service.",
		},
		{
			Alert: "GPUXidError",
			Expr: `  increase(nvidia_gpu_xid_errors_total{nvidia_gpu_xid!~"` + xidRegex(thresholds.XIDFatal) + `"}[` + window() + `]) > 0
or
  (
      nvidia_gpu_xid_errors_total{nvidia_gpu_xid!~"` + xidRegex(thresholds.XIDFatal) + `"}
    unless on (host_name, hw_id, nvidia_gpu_xid)
      nvidia_gpu_xid_errors_total offset ` + window() + `
  )`,
			Severity:    "warning",
			Summary:     "XID {{ $labels.nvidia_gpu_xid }} on " + gpuAt + ".",
			Description: "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}, {{ $labels.hw_model }}, driver {{ $labels.hw_driver_version }})" + onNodeUsedBy + " reported XID {{ $labels.nvidia_gpu_xid }} (" + valueCount + " in the last " + windowProse() + "). Look the code up in the runbook: most are application faults (13, 31, 43), some are hardware (" + xidList(thresholds.XIDSevere) + " are severe).",
		},
	}}
}

func health() Group {
	return Group{Name: "gpu-health", Rules: []Rule{
		{
			Alert:       "GPUFailed",
			Comment:     "failed: lost, fallen off the bus, row-remap failure, or a fatal XID in the last " + windowProse() + ". A lost GPU keeps reporting failed.",
			Expr:        `hw_status{hw_state="failed"} == 1`,
			For:         "1m",
			Severity:    "critical",
			Summary:     gpuAt + " has failed.",
			Description: "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}, {{ $labels.hw_model }}, PCI {{ $labels.nvidia_gpu_pci_bus_id }})" + onNodeUsedBy + " reports health \"failed\": it is lost (fell off the bus), a row remap failed, or it had a fatal XID in the last " + windowProse() + ". Workloads on it are failing; cordon the node.",
		},
		{
			Alert:       "GPUDegraded",
			Comment:     "degraded: uncorrected ECC errors, pending row remap or page retirement, or a severe XID in the last " + windowProse() + ".",
			Expr:        `hw_status{hw_state="degraded"} == 1`,
			For:         "5m",
			Severity:    "warning",
			Summary:     gpuAt + " is degraded.",
			Description: gpuModel + onNodeUsedBy + " has reported health \"degraded\" for 5 minutes: uncorrected ECC errors, a pending row remap or page retirement, or a severe XID.",
		},
		{
			Alert:       "GPUMissing",
			Comment:     "Fewer GPUs than the same node had a day ago. Value: the number missing.",
			Expr:        `(nvidia_gpu_count offset 1d) - nvidia_gpu_count > 0`,
			For:         "10m",
			Severity:    "warning",
			Summary:     "Node {{ $labels.host_name }} has " + valueCount + " GPU(s) fewer than a day ago.",
			Description: "The agent on node {{ $labels.host_name }} reads " + valueCount + " GPU(s) fewer than it did 24 hours ago. A GPU fell off the bus, was not found after a reboot or driver reload, or the agent's device filter changed. The GPUTelemetryStale alert names the GPU when it disappeared within the last hour.",
		},
	}}
}

func agent() Group {
	return Group{Name: "gpu-agent", Rules: []Rule{
		{
			Alert:   "GPUAgentDown",
			Comment: "The node sent telemetry within the last hour but none now (a series is gone 5 minutes after its last sample). Resolves itself an hour after the node went silent, and fires on purpose for removed nodes too: see the runbook.",
			Expr: `  group by (host_name) (present_over_time(nvidia_nvml_available[1h]))
unless on (host_name)
  nvidia_nvml_available`,
			For:         "5m",
			Severity:    "warning",
			Summary:     "No GPU telemetry from node {{ $labels.host_name }}.",
			Description: "The otelcol-gpu agent on node {{ $labels.host_name }} has sent nothing for more than 10 minutes: the agent is down, cannot reach Prometheus (remote-write), or the node is gone. GPU alerts for this node cannot fire meanwhile.",
		},
		{
			Alert:   "GPUTelemetryStale",
			Comment: "A GPU that reported within the last hour no longer does, while the agent on its node still reports (GPUAgentDown covers a silent agent).",
			Expr: `  group by (host_name, hw_id, nvidia_gpu_index, hw_model) (
    present_over_time(hw_status{nvidia_mig_uuid=""}[1h])
  )
unless on (host_name, hw_id)
  hw_status
and on (host_name)
  nvidia_nvml_available == 1`,
			For:         "5m",
			Severity:    "warning",
			Summary:     "GPU {{ $labels.nvidia_gpu_index }} ({{ $labels.hw_id }}) on {{ $labels.host_name }} stopped reporting.",
			Description: gpuModel + " on node {{ $labels.host_name }} reported within the last hour but has sent no series for 5 minutes after they ended (gpu_enrich ends a gone GPU's series at once; 10 minutes where nothing ended them, by Prometheus's lookback), while the agent on the node still reports. The agent no longer finds or reads this GPU.",
		},
		{
			Alert:       "GPUNVMLUnavailable",
			Expr:        `nvidia_nvml_available == 0`,
			For:         "5m",
			Severity:    "warning",
			Summary:     "NVML is unavailable on node {{ $labels.host_name }}: no GPU metrics.",
			Description: "The otelcol-gpu agent on node {{ $labels.host_name }} runs but has not been able to initialise NVML for 5 minutes (driver not loaded, libnvidia-ml not mounted into the agent, or a driver/library version mismatch). No GPU of this node is monitored.",
		},
		{
			Alert:       "GPUAttributionStale",
			Comment:     "The processor refreshes its kubelet snapshot every 10 s by default; " + num(thresholds.AttributionStaleSeconds) + " s old means the kubelet pod-resources API has not answered for that long.",
			Expr:        `nvidia_gpu_attribution_age_seconds > ` + num(thresholds.AttributionStaleSeconds),
			For:         "5m",
			Severity:    "warning",
			Summary:     "GPU-to-pod attribution on node {{ $labels.host_name }} is {{ $value | humanizeDuration }} old.",
			Description: "The otelcol-gpu agent on node {{ $labels.host_name }} has not been able to read the kubelet pod-resources API for {{ $value | humanizeDuration }}. GPU metrics still flow, but pod labels, per-pod series and idle-while-allocated may be missing or out of date.",
		},
	}}
}
