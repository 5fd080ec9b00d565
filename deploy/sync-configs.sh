#!/usr/bin/env bash
# Copies the collector configs into the places that package them, because kustomize and
# Helm only read files inside their own directory. configs/ and deploy/config-overlays/
# stay the one source of truth; deploy/test fails when a copy is stale.
#
#   deploy/sync-configs.sh          write the copies
#   deploy/sync-configs.sh --check  exit 1 and list the stale copies, write nothing
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
[[ "${1:-}" == "--check" ]] && check=true

# source → copy
copies=(
  "configs/agent.yaml                               deploy/kubernetes/base/agent.yaml"
  "configs/agent-to-gateway.yaml                    deploy/kubernetes/agent-to-gateway/agent-to-gateway.yaml"
  "configs/gateway.yaml                             deploy/kubernetes/gateway/gateway.yaml"
  "configs/agent.yaml                               deploy/helm/otelcol-gpu/files/agent.yaml"
  "configs/agent-to-gateway.yaml                    deploy/helm/otelcol-gpu/files/agent-to-gateway.yaml"
  "configs/gateway.yaml                             deploy/helm/otelcol-gpu/files/gateway.yaml"
)
# The remote-write overlays ride in every remote-writing workload's ConfigMap (kustomize
# components then only add a --config), and in the chart.
for overlay in remote-write-auth-basic remote-write-auth-bearer remote-write-tls remote-write-wal; do
  for dir in deploy/kubernetes/base deploy/kubernetes/gateway deploy/helm/otelcol-gpu/files; do
    # The chart writes its TLS settings from values (remoteWrite.tls) instead.
    [[ $overlay == remote-write-tls && $dir == deploy/helm/* ]] && continue
    src=deploy/config-overlays/$overlay.yaml
    # The gateway's bearer overlay keeps its agents' authenticator in the extension list;
    # under the agent's file name, so that one kustomize component serves both.
    [[ $overlay == remote-write-auth-bearer && $dir == deploy/kubernetes/gateway ]] && src=deploy/config-overlays/remote-write-auth-bearer-gateway.yaml
    copies+=("$src $dir/$overlay.yaml")
  done
done
copies+=("deploy/config-overlays/remote-write-auth-bearer-gateway.yaml deploy/helm/otelcol-gpu/files/remote-write-auth-bearer-gateway.yaml")
# Per-agent identity on the gateway (gateway.agentIdentity in the chart; kustomize's
# components/gateway-agent-identity only adds the --config), and the extension list for it
# with the gateway's bearer auth on remote-write.
for overlay in gateway-agent-identity gateway-agent-identity-remote-write-bearer; do
  for dir in deploy/kubernetes/gateway deploy/helm/otelcol-gpu/files; do
    copies+=("deploy/config-overlays/$overlay.yaml $dir/$overlay.yaml")
  done
done
# The node pool on the agents (components/node-pool merges it into the agent ConfigMap;
# agent.nodePoolLabel in the chart).
copies+=("deploy/config-overlays/node-pool.yaml deploy/kubernetes/components/node-pool/node-pool.yaml")
copies+=("deploy/config-overlays/node-pool.yaml deploy/helm/otelcol-gpu/files/node-pool.yaml")

stale=0
for pair in "${copies[@]}"; do
  read -r src dst <<<"$pair"
  if ! cmp -s "$src" "$dst" 2>/dev/null; then
    if $check; then
      echo "stale: $dst (copy of $src)"
      stale=1
    else
      mkdir -p "$(dirname "$dst")"
      cp "$src" "$dst"
      echo "wrote $dst"
    fi
  fi
done

# The OpenTelemetry Operator's CR carries the agent config inline under spec.config.
operator=deploy/kubernetes/operator/otelcol-gpu.yaml
rendered=$(mktemp)
trap 'rm -f "$rendered"' EXIT
{
  sed -n '1,/^  # @@AGENT_CONFIG@@$/p' deploy/kubernetes/operator/otelcol-gpu.yaml.in | sed '$d'
  sed 's/^\(.\)/    \1/' configs/agent.yaml
  sed -n '/^  # @@AGENT_CONFIG@@$/,$p' deploy/kubernetes/operator/otelcol-gpu.yaml.in | sed '1d'
} >"$rendered"
if ! cmp -s "$rendered" "$operator" 2>/dev/null; then
  if $check; then
    echo "stale: $operator (generated from $operator.in and configs/agent.yaml)"
    stale=1
  else
    cp "$rendered" "$operator"
    echo "wrote $operator"
  fi
fi

if $check && ((stale)); then
  echo "run deploy/sync-configs.sh" >&2
  exit 1
fi
