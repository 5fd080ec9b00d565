#!/usr/bin/env bash
# Every OpenTelemetry Collector module in the ocb manifests (the distribution's, the node
# agent's and the pipelines benchmark's tools/otelcol-scrape) and in the go.mod files must be
# on the release line pinned in versions.mk. Prints each offender and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

core=$(sed -n 's/^OTELCOL_CORE_VERSION *:= *//p' versions.mk)
stable=$(sed -n 's/^OTELCOL_STABLE_VERSION *:= *//p' versions.mk)
contrib=$(sed -n 's/^OTELCOL_CONTRIB_VERSION *:= *//p' versions.mk)
k8sattr=$(sed -n 's/^K8SATTRIBUTES_VERSION *:= *//p' versions.mk)

# Lines "module version" from the manifest (gomod entries) and go.mod require blocks.
modules() {
  sed -n 's/^ *- gomod: *\([^ ]*\) \(v[^ ]*\).*/\1 \2/p' builder-config.yaml builder-config-agent.yaml tools/otelcol-scrape/builder-config.yaml
  for f in go.mod distribution/go.mod distribution/agent/go.mod; do
    go mod edit -json "$f" | python3 -c 'import json,sys; [print(r["Path"], r["Version"]) for r in json.load(sys.stdin).get("Require") or []]'
  done
}

bad=0
while read -r mod ver; do
  case "$mod" in
    github.com/open-telemetry/opentelemetry-collector-contrib/processor/k8sattributesprocessor)
      want="v$k8sattr" ;;
    github.com/open-telemetry/opentelemetry-collector-contrib/*)
      want="v$contrib" ;;
    go.opentelemetry.io/collector|go.opentelemetry.io/collector/*)
      # Stable modules are v1.x, the others v0.x; both come from one core release.
      if [[ "$ver" == v1.* ]]; then want="v$stable"; else want="v$core"; fi ;;
    *) continue ;;
  esac
  if [[ "$ver" != "$want" ]]; then
    echo "version drift: $mod $ver (want $want, see versions.mk)" >&2
    bad=1
  fi
done < <(modules)

[[ $bad == 0 ]] && echo "collector modules: all on v$core / v$stable (contrib v$contrib)"

# The testbed's kube-apiserver and etcd are built from tools modules: their go.mod must name
# the versions of versions.mk (the stamps of `make deps` are keyed by those), and every
# Kubernetes staging repository must be replaced by the release of the same minor and patch.
kube=$(sed -n 's/^KUBERNETES_VERSION *:= *//p' versions.mk)
etcd=$(sed -n 's/^ETCD_VERSION *:= *//p' versions.mk)
require_of() { # go.mod module -> version
  go mod edit -json "$1" | python3 -c 'import json,sys; m=sys.argv[1]; [print(r["Version"]) for r in json.load(sys.stdin).get("Require") or [] if r["Path"]==m]' "$2"
}
got=$(require_of tools/kube/go.mod k8s.io/kubernetes)
if [[ "$got" != "v$kube" ]]; then
  echo "version drift: tools/kube/go.mod requires k8s.io/kubernetes $got (want v$kube, see versions.mk)" >&2
  bad=1
fi
staging="v0.${kube#1.}"
while read -r old new ver; do
  if [[ "$old" != "$new" || "$ver" != "$staging" ]]; then
    echo "version drift: tools/kube/go.mod replaces $old with $new $ver (want $old $staging)" >&2
    bad=1
  fi
done < <(go mod edit -json tools/kube/go.mod | python3 -c 'import json,sys; [print(r["Old"]["Path"], r["New"]["Path"], r["New"].get("Version","")) for r in json.load(sys.stdin).get("Replace") or []]')
got=$(require_of tools/etcd/go.mod go.etcd.io/etcd/server/v3)
if [[ "$got" != "v$etcd" ]]; then
  echo "version drift: tools/etcd/go.mod requires go.etcd.io/etcd/server/v3 $got (want v$etcd, see versions.mk)" >&2
  bad=1
fi
[[ $bad == 0 ]] && echo "testbed tools: kube-apiserver v$kube (staging $staging), etcd v$etcd"
# Staying current is the defence we have against known vulnerabilities (the vulnerability
# database cannot be reached from here): say when the module proxy serves a newer collector
# line than the pinned one. A report, not a failure: versions.mk says why the pin holds,
# and moving the line is a change of its own (make generate, then the tests).
newest() { # module -> its newest release the proxy lists ("" when it cannot be asked)
  (cd / && GOFLAGS= go list -m -versions "$1" 2>/dev/null) | tr ' ' '\n' | grep -E '^v[0-9]+\.[0-9]+\.[0-9]+$' | sort -V | tail -1
}
for pair in "go.opentelemetry.io/collector/receiver/otlpreceiver v$core" \
            "github.com/open-telemetry/opentelemetry-collector-contrib/processor/transformprocessor v$contrib"; do
  read -r mod pinned <<<"$pair"
  latest=$(newest "$mod" || true)
  if [[ -z "$latest" ]]; then
    echo "newer collector line: cannot ask the module proxy about $mod (offline?)"
  elif [[ "$(printf '%s\n%s\n' "$pinned" "$latest" | sort -V | tail -1)" != "$pinned" ]]; then
    echo "newer collector line: the proxy serves $mod $latest, pinned $pinned (versions.mk says why; move when it builds)"
  else
    echo "collector line: $mod $pinned is the newest the proxy serves"
  fi
done
exit $bad
