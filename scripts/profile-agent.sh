#!/usr/bin/env bash
# profile-agent.sh: run the node agent as shipped (configs/agent.yaml, the agent build,
# the Go runtime's settings of deploy/systemd/otelcol-gpu.env.example) on simulated 8-GPU
# nodes into a real Prometheus 3, take a CPU profile of it and print what it cost. This is
# how docs/benchmarks.md's pprof tables and the compression comparison were taken; make
# bench-pipelines gives the side-by-side figures.
#
#   scripts/profile-agent.sh OUT.pprof [--config OVERLAY ...]
#   e.g. scripts/profile-agent.sh /tmp/otlp.pprof --config deploy/config-overlays/prometheus-otlp.yaml
#   then go tool pprof -top -cum /tmp/otlp.pprof
#
# Environment: NODES (8: receivers of 8 simulated H100s each, one host name per receiver,
# as 8 nodes' agents), INTERVAL (1s), WARMUP (15 s before the window), WINDOW (40 s),
# AGENT (distribution/agent/otelcol-gpu-agent; make build), PROMETHEUS (bin/prometheus;
# make deps), GOMAXPROCS, GOMEMLIMIT and GOGC (the shipped ones, from
# deploy/systemd/otelcol-gpu.env.example), PROCESSORS (the pipeline's processors, default
# "memory_limiter, gpu_enrich, batch": the shipped ones less k8s_attributes), KEEP (set: keep the logs), PORT_OFFSET (0),
# PROFILE (yes; no: only measure the CPU over the window, OUT.pprof is not written: Go's
# CPU profiler adds 14-15 % to the agent's CPU at 64 GPUs x 1 s, its writer waking ten
# times a second, so compare only figures taken the same way). Listens on 127.0.0.1 ports 19090
# (Prometheus), 11777 (pprof), 13999 and 18999, each plus PORT_OFFSET: two runs with
# different offsets at the same time compare two builds under the same load on the
# machine, which a VM's drift between runs otherwise hides (docs/benchmarks.md).
set -euo pipefail

out=${1:?usage: $0 OUT.pprof [--config OVERLAY ...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
nodes=${NODES:-8} interval=${INTERVAL:-1s} warmup=${WARMUP:-15} window=${WINDOW:-40}
agent=${AGENT:-$root/distribution/agent/otelcol-gpu-agent}
offset=${PORT_OFFSET:-0}
prometheus_port=$((19090 + offset)) pprof_port=$((11777 + offset))
health_port=$((13999 + offset)) telemetry_port=$((18999 + offset))
prometheus=${PROMETHEUS:-$root/bin/prometheus}
for bin in "$agent" "$prometheus"; do
	[[ -x $bin ]] || { echo "$bin is missing: run make build deps" >&2; exit 1; }
done

work=$(mktemp -d)
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	if [[ -n ${KEEP:-} ]]; then echo "logs and configuration kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

printf 'global: {}\n' >"$work/prometheus.yml"
"$prometheus" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
	--web.listen-address=127.0.0.1:$prometheus_port --web.enable-remote-write-receiver \
	--web.enable-otlp-receiver >"$work/prometheus.log" 2>&1 &
pids+=($!)

# The receivers and the pprof extension, merged over the shipped agent configuration;
# k8s_attributes is left out, as in make bench-pipelines: it needs an API server.
{
	echo "receivers:"
	for i in $(seq 0 $((nodes - 1))); do
		printf '  gpu/%d:\n    backend: simulated\n    collection_interval: %s\n    host_name: bench-node-%d\n' "$i" "$interval" "$i"
		printf '    simulated: {system: dgxh100, scenario: shared-gpu, seed: %d}\n' $((i + 1))
	done
	echo "extensions:"
	echo "  pprof: {endpoint: 127.0.0.1:$pprof_port}"
	echo "service:"
	echo "  extensions: [health_check, pprof]"
	echo "  pipelines:"
	echo "    metrics:"
	echo "      receivers: [$(seq -s, -f 'gpu/%g' 0 $((nodes - 1)))]"
	echo "      processors: [${PROCESSORS:-memory_limiter, gpu_enrich, batch}]"
} >"$work/receivers.yaml"
mkdir -p "$work/empty"

# The Go runtime's settings as shipped (the systemd unit's environment file), each
# overridden by the caller's environment where set, e.g. GOGC=100 for an A/B.
runtime_env=()
for k in GOMAXPROCS GOMEMLIMIT GOGC; do
	v=${!k:-$(sed -n "s/^$k=//p" "$root/deploy/systemd/otelcol-gpu.env.example")}
	runtime_env+=("$k=$v")
done

# No kubelet, /proc or pod logs: attribution finds nothing, as on a node without pods.
env PROMETHEUS_REMOTE_WRITE_URL=http://127.0.0.1:$prometheus_port/api/v1/write \
	PROMETHEUS_OTLP_URL=http://127.0.0.1:$prometheus_port/api/v1/otlp/v1/metrics \
	OTELCOL_GPU_KUBELET_SOCKET="unix://$work/empty/kubelet.sock" \
	OTELCOL_GPU_PROC_ROOT="$work/empty" OTELCOL_GPU_POD_LOGS_DIR="$work/empty" \
	OTELCOL_GPU_HEALTH_ENDPOINT=127.0.0.1:$health_port OTELCOL_GPU_TELEMETRY_PORT=$telemetry_port \
	"${runtime_env[@]}" \
	"$agent" --config "$root/configs/agent.yaml" "$@" --config "$work/receivers.yaml" >"$work/agent.log" 2>&1 &
agent_pid=$!
pids+=("$agent_pid")

sleep "$warmup"
if ! kill -0 "$agent_pid" 2>/dev/null || ! grep -q "Everything is ready" "$work/agent.log"; then
	cat "$work/agent.log" >&2
	echo "the agent did not start" >&2
	exit 1
fi
ticks() { awk '{print $14 + $15}' "/proc/$agent_pid/stat"; }
written() { awk '/^wchar/ {print $2}' "/proc/$agent_pid/io"; }
t0=$(ticks) w0=$(written)
if [[ ${PROFILE:-yes} == no ]]; then
	sleep "$window"
else
	curl -sf -o "$out" "http://127.0.0.1:$pprof_port/debug/pprof/profile?seconds=$window"
fi
t1=$(ticks) w1=$(written)

hz=$(getconf CLK_TCK)
gpus=$((nodes * 8))
awk -v t=$((t1 - t0)) -v hz="$hz" -v g="$gpus" -v w="$window" -v b=$((w1 - w0)) 'BEGIN {
	ms = t * 1000 / hz
	printf "agent CPU over %d s: %.0f ms = %.1f ms per GPU-minute (%d GPUs); %.0f bytes written per s\n", w, ms, ms / g / (w / 60), g, b / w
}'
grep -E 'VmRSS|RssAnon|RssFile' "/proc/$agent_pid/status" | tr -s ' \t\n' ' '
echo
[[ ${PROFILE:-yes} == no ]] || echo "profile: $out"
