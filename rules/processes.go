package rules

// processes watches whether the agent can see a GPU's processes at all, and the bound
// gpu_enrich keeps on per-process series.
func processes() Group {
	return Group{Name: "gpu-processes", Rules: []Rule{
		{
			Alert:       "GPUProcessesHidden",
			Comment:     "The receiver sets nvidia_gpu_processes_hidden to 1 on a GPU whose framebuffer is in use while NVML lists no process on it: since driver 535.113 the driver shows the agent only the processes of its own PID namespace. The series exists only while that is so.",
			Expr:        `nvidia_gpu_processes_hidden == 1`,
			For:         "15m",
			Severity:    "warning",
			Summary:     "The agent on {{ $labels.host_name }} cannot see the processes on GPU {{ $labels.nvidia_gpu_index }}.",
			Description: gpuModel + " on node {{ $labels.host_name }} has had memory in use for 15 minutes while NVML lists no process on it to the otelcol-gpu agent: its per-process, per-pod and per-job series are missing, not zero, and a shared GPU cannot be split between its users. Drivers from 535.113 on list only the processes of the caller's PID namespace: run the agent with hostPID: true (the shipped DaemonSet does); the agent's log names the likely cause.",
		},
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
