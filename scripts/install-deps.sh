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
# A fresh machine runs its own package updates at boot and holds apt's and dpkg's locks
# meanwhile: wait for them (up to APT_LOCK_TIMEOUT seconds) instead of failing at once, and
# say so. `apt-get install` waits by itself (DPkg::Lock::Timeout); `apt-get update` does
# not for its lists lock, so it is retried while that lock is what stops it.
lock_wait=${APT_LOCK_TIMEOUT:-600}
deadline=$((SECONDS + lock_wait))
while ! out=$($sudo apt-get -o "DPkg::Lock::Timeout=${lock_wait}" update -qq 2>&1); do
  if [[ $out != *"Could not get lock"* ]] || ((SECONDS >= deadline)); then
    printf '%s\n' "$out" >&2
    exit 1
  fi
  echo "waiting for another package manager to finish (apt's lock is held; up to ${lock_wait}s)"
  sleep 5
done
# --no-install-recommends keeps node-exporter and friends out; policy-rc.d on CI hosts
# stops the packages' services from starting, and nothing here needs them running.
$sudo apt-get -o "DPkg::Lock::Timeout=${lock_wait}" install -y -qq --no-install-recommends "${need[@]}" >/dev/null
