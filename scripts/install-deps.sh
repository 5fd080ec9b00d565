#!/usr/bin/env bash
# Installs what the tests need and a fresh Debian machine lacks: gcc for cgo, and Debian's
# Prometheus 2.42 and promtool (no service is started), the testbed's compatibility row for
# users on older Prometheus. Everything else is built from the Go module proxy by the
# Makefile into ./bin (`make deps`: Prometheus 3, Alertmanager, kube-apiserver, etcd,
# VictoriaMetrics; `make tools`: ocb, mdatagen). Idempotent: does nothing when all is there.
set -euo pipefail

need=()
command -v gcc >/dev/null || need+=(gcc libc6-dev)
# By path: ./bin/prometheus (3.x) on PATH must not hide a missing Debian package.
[[ -x /usr/bin/prometheus && -x /usr/bin/promtool ]] || need+=(prometheus)
command -v python3 >/dev/null || need+=(python3)

if ((${#need[@]} == 0)); then
  exit 0
fi
echo "installing: ${need[*]}"
sudo=""
if [[ $(id -u) != 0 ]]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# --no-install-recommends keeps node-exporter and friends out; policy-rc.d on CI hosts
# stops the packages' services from starting, and nothing here needs them running.
$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
