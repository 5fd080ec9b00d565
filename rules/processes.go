package rules

// processes watches the bound gpu_enrich keeps on per-process series.
func processes() Group {
	return Group{Name: "gpu-processes", Rules: []Rule{
		{
			Alert:   "GPUProcessSeriesFolded",
			Comment: "nvidia_gpu_processes_folded_total (per node) grows by the processes gpu_enrich sums into a GPU's \"(other)\" series at every collection while some GPU has more distinct process series (owner, executable, type) than processes.max_per_gpu. Folding in every 10-minute window for 30 minutes: a workload that does it for good, not a burst of short-lived processes.",
			Expr:    `increase(nvidia_gpu_processes_folded_total[10m]) > 0`,
			For:     "30m",
			// Not a fault: per-pod and per-job series still count every process.
			Severity:    "info",
			Summary:     "Node {{ $labels.host_name }} sums GPU processes into \"(other)\".",
			Description: "For 30 minutes the otelcol-gpu agent on node {{ $labels.host_name }} has seen a GPU with more kinds of process (owner, executable and type) than its processes.max_per_gpu bound allows series, and summed the smallest into that GPU's process_executable_name=\"(other)\" series, without owner. Per-pod and per-job series still count every process; only the per-process panels lose those names. Raise gpu_enrich's processes.max_per_gpu, or accept it.",
		},
	}}
}
