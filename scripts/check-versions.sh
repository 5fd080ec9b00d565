#!/usr/bin/env bash
# Every OpenTelemetry Collector module in the ocb manifest and in both go.mod files must be
# on the release line pinned in versions.mk. Prints each offender and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

core=$(sed -n 's/^OTELCOL_CORE_VERSION *:= *//p' versions.mk)
stable=$(sed -n 's/^OTELCOL_STABLE_VERSION *:= *//p' versions.mk)
contrib=$(sed -n 's/^OTELCOL_CONTRIB_VERSION *:= *//p' versions.mk)
k8sattr=$(sed -n 's/^K8SATTRIBUTES_VERSION *:= *//p' versions.mk)

# Lines "module version" from the manifest (gomod entries) and go.mod require blocks.
modules() {
  sed -n 's/^ *- gomod: *\([^ ]*\) \(v[^ ]*\).*/\1 \2/p' builder-config.yaml
  for f in go.mod distribution/go.mod; do
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
exit $bad
