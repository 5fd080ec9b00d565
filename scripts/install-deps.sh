#!/usr/bin/env bash
# Installs what the tests need and a fresh Debian machine lacks: gcc for cgo, Prometheus,
# promtool and Alertmanager (Debian's packages; no service is started). The Go tools (ocb,
# mdatagen) are built by the Makefile into ./bin. Idempotent: does nothing when all is there.
set -euo pipefail

need=()
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v prometheus >/dev/null || need+=(prometheus)
command -v promtool >/dev/null || need+=(prometheus)
command -v prometheus-alertmanager >/dev/null || need+=(prometheus-alertmanager)
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
