#!/usr/bin/env bash
# `make test-gpu`: the acceptance check of a GPU node (docs/test-gpu.md). It checks that the
# node has a driver, builds what it is not given, runs the receiver's hardware tests where
# a Go toolchain can, then gpucheck: the agent on the real GPUs for DURATION (2 minutes)
# beside `nvidia-smi -q -x`, compared field by field. The report goes to GPUCHECK_OUT
# (./gpu-report). Under 8 minutes with warm build caches or prebuilt binaries.
#
# A node without network access: build elsewhere and pass the binaries —
#   AGENT_BIN=/path/otelcol-gpu-agent GPUCHECK_BIN=/path/gpucheck scripts/test-gpu.sh
# (`make build` and `go build -o bin/gpucheck ./cmd/gpucheck` make them; both need glibc
# and, for the agent, cgo.) Other settings: NVIDIA_SMI, DURATION, GPUCHECK_LOAD (auto,
# none or a command), GPU_TEST_RUN (which hardware tests, '^TestHardware'), GPUCHECK_ARGS
# (more gpucheck flags, e.g. "-interval 5s"; `gpucheck -h` lists them).
#
# Exit status: 0 all passed, 1 a check or test failed, 2 the check could not run.
set -euo pipefail
cd "$(dirname "$0")/.."

export CGO_ENABLED=1 CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" GOFLAGS=-buildvcs=false GOTOOLCHAIN=local
NVIDIA_SMI=${NVIDIA_SMI:-nvidia-smi}
OUT=${GPUCHECK_OUT:-gpu-report}
DURATION=${DURATION:-2m}
GPU_TEST_RUN=${GPU_TEST_RUN:-^TestHardware}
started=$SECONDS

say() { echo "test-gpu: $*"; }
cannot() {
	echo "test-gpu: cannot run: $*" >&2
	exit 2
}

# --- prerequisites: a driver that answers, and its NVML library --------------------------
command -v "$NVIDIA_SMI" >/dev/null || cannot "$NVIDIA_SMI not found (install the NVIDIA driver, or set NVIDIA_SMI)"
gpus=$("$NVIDIA_SMI" -L 2>&1) || cannot "$NVIDIA_SMI -L failed: $gpus"
say "GPUs: $(grep -c '^GPU' <<<"$gpus")"
sed 's/^/  /' <<<"$gpus"
libnvml=""
if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml\.so\.1 '; then
	libnvml=$(ldconfig -p | awk '/libnvidia-ml\.so\.1 /{print $NF; exit}')
else
	for d in ${LD_LIBRARY_PATH//:/ } /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/aarch64-linux-gnu /usr/local/nvidia/lib64; do
		[[ -e $d/libnvidia-ml.so.1 ]] && libnvml=$d/libnvidia-ml.so.1 && break
	done
fi
[[ -n $libnvml ]] || cannot "libnvidia-ml.so.1 is not on the linker's path (the agent loads NVML from it)"
say "NVML: $libnvml"

# --- Go: usable when the toolchain is here and the modules are cached (no network needed) ----
go_ok=""
go_why=""
if ! command -v go >/dev/null; then
	go_why="no Go toolchain"
elif ! GOPROXY=off go list -deps ./receiver/gpureceiver ./cmd/gpucheck >/dev/null 2>&1; then
	go_why="the Go module cache lacks this repository's modules and GOPROXY=off could not fetch them (run 'go mod download' with network)"
else
	go_ok=1
fi

# --- binaries: given, or built -------------------------------------------------------------
if [[ -n ${AGENT_BIN:-} ]]; then
	[[ -x $AGENT_BIN ]] || cannot "AGENT_BIN=$AGENT_BIN is not an executable"
	agent=$AGENT_BIN
else
	[[ -n $go_ok ]] || cannot "no agent binary: set AGENT_BIN to a prebuilt otelcol-gpu-agent ($go_why)"
	say "building the agent (distribution/agent, as make build does)"
	(cd distribution/agent && go build -trimpath -ldflags="-s -w" -o otelcol-gpu-agent .)
	agent=distribution/agent/otelcol-gpu-agent
fi
if [[ -n ${GPUCHECK_BIN:-} ]]; then
	[[ -x $GPUCHECK_BIN ]] || cannot "GPUCHECK_BIN=$GPUCHECK_BIN is not an executable"
	gpucheck=$GPUCHECK_BIN
else
	[[ -n $go_ok ]] || cannot "no gpucheck binary: set GPUCHECK_BIN to a prebuilt gpucheck ($go_why)"
	mkdir -p bin
	go build -o bin/gpucheck ./cmd/gpucheck
	gpucheck=bin/gpucheck
fi

# --- the receiver's hardware tests ---------------------------------------------------------
tests=skipped
if [[ -n $go_ok ]]; then
	say "hardware tests: go test -tags gpu -run '$GPU_TEST_RUN' ./receiver/gpureceiver/..."
	if go test -tags gpu -count=1 -v -timeout 4m -run "$GPU_TEST_RUN" ./receiver/gpureceiver/...; then
		tests=passed
	else
		tests=failed
	fi
else
	say "hardware tests skipped: $go_why"
fi

# --- gpucheck: the agent against nvidia-smi ---------------------------------------------------
check=0
# shellcheck disable=SC2086 # GPUCHECK_ARGS is a list of flags
"$gpucheck" -agent "$agent" -nvidia-smi "$NVIDIA_SMI" -duration "$DURATION" -out "$OUT" ${GPUCHECK_ARGS:-} || check=$?

elapsed=$((SECONDS - started))
say "hardware tests: $tests; gpucheck: $(case $check in 0) echo passed ;; 1) echo failed ;; *) echo "could not run (exit $check)" ;; esac); ${elapsed}s; report: $OUT/report.md"
if [[ $check -ne 0 ]]; then
	exit "$check"
fi
[[ $tests != failed ]] || exit 1
