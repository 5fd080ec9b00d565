#!/usr/bin/env bash
# Fails when generated code is not what the generators produce from its sources (mdatagen's
# from metadata.yaml, ocb's from builder-config.yaml and builder-config-agent.yaml, the dashboards and rule files from
# dashboards/*.go, rules/*.go, internal/thresholds and internal/pricing/prices.yaml, the kube-prometheus-stack objects
# from those), i.e. someone edited it by hand or forgot `make generate`. Leaves the
# regenerated files in place so that `git diff` shows the fix.
set -euo pipefail
cd "$(dirname "$0")/.."

generated=(
  receiver/gpureceiver/internal/metadata
  receiver/gpureceiver/documentation.md
  receiver/gpureceiver/generated_component_test.go
  receiver/gpureceiver/generated_package_test.go
  processor/gpuenrichprocessor/internal/metadata
  processor/gpuenrichprocessor/documentation.md
  processor/gpuenrichprocessor/generated_component_test.go
  processor/gpuenrichprocessor/generated_package_test.go
  distribution/main.go
  distribution/main_others.go
  distribution/main_windows.go
  distribution/components.go
  distribution/go.mod
  distribution/agent/main.go
  distribution/agent/main_others.go
  distribution/agent/main_windows.go
  distribution/agent/components.go
  distribution/agent/go.mod
  dashboards
  rules/gpu-alerts.yaml
  rules/gpu-recording.yaml
  rules/gpu-prices.yaml
  deploy/kubernetes/kube-prometheus-stack
  internal/gpuschema/receiver_generated.go
  processor/gatewaylimitsprocessor/internal/contractnames/names_generated.go
)
before=$(mktemp -d)
trap 'rm -rf "$before"' EXIT
for p in "${generated[@]}"; do
  mkdir -p "$before/$(dirname "$p")"
  cp -r "$p" "$before/$p"
done
make --no-print-directory generate >/dev/null
status=0
for p in "${generated[@]}"; do
  if ! diff -r "$before/$p" "$p" >/dev/null; then
    echo "generated code is stale: $p (run 'make generate' and commit the result)" >&2
    diff -r "$before/$p" "$p" | head -20 >&2 || true
    status=1
  fi
done
[[ $status == 0 ]] && echo "generated code is up to date"
exit $status
