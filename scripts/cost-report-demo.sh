#!/usr/bin/env bash
# `make cost-report-demo`: the chargeback report on the demo. It runs what `make run` runs
# (eight simulated H100s, attributed to pods by the fake kubelet, served on
# 127.0.0.1:9400/metrics), has Prometheus 3 (bin/prometheus, `make deps`) scrape it with
# rules/gpu-recording.yaml and the prices of internal/pricing/prices.example.yaml (rendered
# by `rules/gen -prices`), waits COST_DEMO_MINUTES whole minutes (5), then runs
# gpu-cost-report over exactly those minutes and prints its CSV (also in
# .run/cost-demo/report.csv). A few minutes of a demo make small figures: a GPU-hour is
# an hour of one GPU.
#
# Settings: COST_DEMO_MINUTES (5), COST_DEMO_PROMETHEUS (127.0.0.1:9491, where Prometheus
# listens), COST_DEMO_ARGS (gpu-cost-report flags; default --by namespace: the demo has no
# workloads, k8s_attributes is not in its pipeline, and no Slurm jobs). The demo
# collector's ports are make run's (9400, 8888, 13133): stop `make run` first.
set -euo pipefail
cd "$(dirname "$0")/.."

MINUTES=${COST_DEMO_MINUTES:-5}
PROM_ADDR=${COST_DEMO_PROMETHEUS:-127.0.0.1:9491}
read -r -a REPORT_ARGS <<<"${COST_DEMO_ARGS:---by namespace}"
BIN=$PWD/bin
DIR=$PWD/.run/cost-demo
say() { echo "cost-report-demo: $*" >&2; }

for b in "$BIN/prometheus" "$BIN/fake-kubelet" "$BIN/gpu-cost-report" distribution/otelcol-gpu; do
	[[ -x $b ]] || { say "$b not found: \`make deps\` builds Prometheus, \`make cost-report-demo\` the rest"; exit 2; }
done
rm -rf "$DIR"
mkdir -p "$DIR/rules"
go run ./rules/gen -prices internal/pricing/prices.example.yaml -out "$DIR/rules"
cp rules/gpu-recording.yaml "$DIR/rules/"
cat >"$DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 5s
  evaluation_interval: 15s
rule_files: [$DIR/rules/gpu-recording.yaml, $DIR/rules/gpu-prices.yaml]
scrape_configs:
  - job_name: otelcol-gpu-demo
    static_configs: [{targets: ["127.0.0.1:9400"]}]
EOF

pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM
"$BIN/fake-kubelet" --socket "$DIR/kubelet.sock" --pods cmd/fake-kubelet/pods-demo.yaml --simulated dgxh100:1 >"$DIR/fake-kubelet.log" 2>&1 &
pids+=($!)
OTELCOL_GPU_DEMO_DIR=$DIR distribution/otelcol-gpu --config configs/demo.yaml >"$DIR/collector.log" 2>&1 &
pids+=($!)
"$BIN/prometheus" --config.file="$DIR/prometheus.yml" --storage.tsdb.path="$DIR/data" \
	--web.listen-address="$PROM_ADDR" --log.level=warn >"$DIR/prometheus.log" 2>&1 &
pids+=($!)

for _ in $(seq 60); do
	curl -sf "http://$PROM_ADDR/-/ready" >/dev/null && curl -sf http://127.0.0.1:13133/ >/dev/null && break
	sleep 1
done
curl -sf "http://$PROM_ADDR/-/ready" >/dev/null || { say "Prometheus did not start: $DIR/prometheus.log"; exit 1; }
curl -sf http://127.0.0.1:13133/ >/dev/null || { say "the demo collector did not start: $DIR/collector.log"; exit 1; }

# The period: whole minutes, from the first whole minute at least 30 s after the first
# scrape (the funnel rules have data by then).
now=$(date -u +%s)
start=$(((now + 30 + 59) / 60 * 60))
end=$((start + MINUTES * 60))
say "Prometheus on http://$PROM_ADDR scrapes the demo; reporting $(date -u -d "@$start" +%H:%M) to $(date -u -d "@$end" +%H:%M) UTC, in $(((end + 20 - now + 59) / 60)) minutes"
sleep $((end + 20 - now)) # the last minute's rule evaluation

"$BIN/gpu-cost-report" --prometheus "http://$PROM_ADDR" \
	--start "$(date -u -d "@$start" +%Y-%m-%dT%H:%M:%SZ)" --end "$(date -u -d "@$end" +%Y-%m-%dT%H:%M:%SZ)" \
	"${REPORT_ARGS[@]}" --out "$DIR/report.csv"
cat "$DIR/report.csv"
