# otelcol-gpu — every command a developer or CI needs. Works from a fresh clone on Debian:
# `make test` installs what is missing first.
include versions.mk

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c

# go-nvml needs cgo; NVML 13's header deprecates many functions go-nvml still wraps, which
# would print hundreds of warnings per build.
export CGO_ENABLED := 1
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations
export GOFLAGS := -buildvcs=false
export GOTOOLCHAIN := local

BIN       := $(CURDIR)/bin
OCB       := $(BIN)/ocb
MDATAGEN  := $(BIN)/mdatagen
COLLECTOR := distribution/otelcol-gpu
GO_PKGS   := ./...

.PHONY: run cost-report-demo test rules unit fuzz e2e e2e-compat deploy-test build generate lint bench bench-go bench-pipelines bench-gateway deps tools check-versions check-generated test-gpu clean

DEMO_DIR := $(CURDIR)/.run

## run: build the distribution and run it on eight simulated H100s (configs/demo.yaml), with a fake kubelet that attributes them to pods
run: build $(BIN)/fake-kubelet
	mkdir -p $(DEMO_DIR)
	$(BIN)/fake-kubelet --socket $(DEMO_DIR)/kubelet.sock --pods cmd/fake-kubelet/pods-demo.yaml --simulated dgxh100:1 & \
	  trap "kill $$! 2>/dev/null" EXIT INT TERM; \
	  OTELCOL_GPU_DEMO_DIR=$(DEMO_DIR) $(COLLECTOR) --config configs/demo.yaml

$(BIN)/fake-kubelet: FORCE
	go build -o $@ ./cmd/fake-kubelet

## cost-report-demo: the chargeback report on make run's simulated fleet: Prometheus 3 (bin/, make deps) scrapes it with the recording rules and the example prices (internal/pricing/prices.example.yaml) for COST_DEMO_MINUTES (5), then cmd/gpu-cost-report prints those minutes as CSV (scripts/cost-report-demo.sh)
cost-report-demo: build $(BIN)/fake-kubelet $(BIN)/gpu-cost-report
	scripts/cost-report-demo.sh

$(BIN)/gpu-cost-report: FORCE
	go build -o $@ ./cmd/gpu-cost-report

FORCE:

## test: everything CI runs — install dependencies, lint, version and generated-code checks, unit tests, a short fuzz run, end-to-end testbed
test: deps lint check-versions check-generated rules unit fuzz e2e deploy-test

## unit: unit tests with the race detector
unit:
	go test -race -count=1 $(GO_PKGS)

## deploy-test: render the kustomize base and the Helm chart, check them strictly against Kubernetes types, validate every embedded config with the built binary, apply every form to a real kube-apiserver and check the service accounts' least privilege there (a module of its own: deploy/test)
deploy-test: build
	bash deploy/sync-configs.sh --check
	cd deploy/test && CGO_ENABLED=0 go test -count=1 ./...

# Prometheus 3's promtool (make deps) and Debian's 2.42 (the compatibility row) check the
# rules and run their unit tests: the same expectations hold on both (the tests evaluate
# windows off the collection grid where 3.x's left-open ranges would differ).
PROMTOOLS      := $(BIN)/promtool /usr/bin/promtool

## rules: promtool checks (Prometheus 3 and Debian's 2.42) and unit tests of the alerting and recording rules
rules:
	for promtool in $(PROMTOOLS); do $$promtool check rules rules/gpu-alerts.yaml rules/gpu-recording.yaml rules/gpu-prices.yaml || exit 1; done
	for promtool in $(PROMTOOLS); do $$promtool test rules rules/tests/*.yaml || exit 1; done

# An execution count, not a duration: with a duration, replaying the cached corpus on a
# busy 2-core machine can outlast it and the run fails with "context deadline exceeded".
FUZZTIME ?= 20000x

## fuzz: a short run of every fuzz target (seed corpora are committed next to them)
fuzz:
	go test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./processor/gpuenrichprocessor/internal/cgroup/
	go test -run '^$$' -fuzz '^FuzzParseDeviceID$$' -fuzztime $(FUZZTIME) ./processor/gpuenrichprocessor/internal/podresources/
	go test -run '^$$' -fuzz '^FuzzConfig$$' -fuzztime $(FUZZTIME) ./receiver/gpureceiver/

## e2e: build the real binary, then run the testbed against Prometheus 3 (and a real kube-apiserver), then the compatibility row on Debian's Prometheus 2.42
e2e: build
	go test -tags e2e -count=1 -v -timeout 45m ./testbed/...
	go test -tags e2e -count=1 -timeout 10m ./cmd/gpucheck/
	$(MAKE) --no-print-directory e2e-compat

# What users on an older Prometheus rely on: the agent's and the gateway's series, the
# dcgm-exporter compatibility series, the alerts and every dashboard query.
COMPAT_TESTS := TestAgentRemoteWritesEveryGPUWithItsIdentity|TestAgentThroughGatewayToPrometheus|TestDCGMCompatibility|TestScenariosFireTheirAlerts|TestEveryDashboardQueryReturnsData

## e2e-compat: the compatibility row, the tests users on older Prometheus rely on, run against Debian's Prometheus 2.42
e2e-compat: build
	TESTBED_PROMETHEUS=2 go test -tags e2e -count=1 -v -timeout 20m -run '^($(COMPAT_TESTS))$$' ./testbed/

## build: compile the ocb-generated distributions: the full one into distribution/otelcol-gpu and the node agent's lean build into distribution/agent/otelcol-gpu-agent
build:
	cd distribution && go build -trimpath -ldflags="-s -w" -o otelcol-gpu .
	cd distribution/agent && go build -trimpath -ldflags="-s -w" -o otelcol-gpu-agent .

## generate: regenerate mdatagen code (metric contract), the ocb distribution sources, the dashboards and rule files (from Go, thresholds in internal/thresholds) and their kube-prometheus-stack objects
generate: tools
	cd receiver/gpureceiver && $(MDATAGEN) metadata.yaml
	scripts/mdatagen-processor.sh $(MDATAGEN)
	$(OCB) --config builder-config.yaml --skip-compilation
	$(OCB) --config builder-config-agent.yaml --skip-compilation
	go run ./dashboards/gen -out dashboards
	go run ./rules/gen -out rules
	go run ./internal/gpuschema/gen
	go run ./processor/gatewaylimitsprocessor/internal/contractnames/gen
	cd deploy/test && CGO_ENABLED=0 go run ./cmd/kpsgen

## lint: gofmt and go vet (the ocb-generated main is not vetted: it is generated)
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^distribution/')); \
	  if [[ -n "$$unformatted" ]]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet $(GO_PKGS)
	go vet -tags e2e ./testbed/... ./cmd/gpucheck/
	go vet -tags "e2e benchpipelines" ./testbed/...
	go vet -tags gpu ./receiver/...

## bench: every figure of docs/benchmarks.md, in one run (about an hour on 2 cores); figures go into docs and notes, never into pass/fail tests
bench: bench-go bench-pipelines bench-gateway

## bench-go: Go benchmarks (scrape of 8 GPUs, gpu_enrich over one batch, NVML calls per GPU per scrape)
bench-go:
	go test -run '^$$' -bench . -benchmem $(GO_PKGS)

## bench-pipelines: whole pipelines side by side into real Prometheus (native vs dcgm-exporter exposition via Prometheus agent and via the collector, one after the other and the issue-15 ratios at the same time; remote-write 1.0 vs 2.0 vs native OTLP into Prometheus 3), and the agent's memory on an 8-GPU node; BENCH_WARMUP, BENCH_WINDOW and BENCH_ROUNDS (paths run in turn, medians reported) tune it
bench-pipelines: build $(BIN)/otelcol-scrape
	go test -tags "e2e benchpipelines" -count=1 -run "TestPipelinesSideBySide|TestPipelinesAtOnce|TestFreshness|TestProtocolsSideBySide|TestAgentMemory|TestWireBytes" -v -timeout $(BENCH_PIPELINES_TIMEOUT) ./testbed/

# The whole run took 66 minutes with BENCH_WARMUP=10s BENCH_WINDOW=40s (2026-12-06) and takes about 95
# with the defaults (15 s, 60 s) on 2 cores: go test's limit leaves room above that.
BENCH_PIPELINES_TIMEOUT ?= 150m

# Path c's collector: a stock build with the prometheus receiver, which the distribution
# leaves out (tools/otelcol-scrape/builder-config.yaml; ~15 min cold on 2 cores).
$(BIN)/otelcol-scrape: tools/otelcol-scrape/builder-config.yaml versions.mk | $(OCB)
	$(OCB) --config tools/otelcol-scrape/builder-config.yaml
	mv $(BIN)/otelcol-scrape-src/otelcol-scrape $@

## bench-gateway: OTLP from simulated 8-GPU agents through configs/gateway.yaml into real Prometheus: samples/s, loss, gateway CPU and RSS; BENCH_GATEWAY_AGENTS (default 100,1000), BENCH_GATEWAY_INTERVAL, BENCH_WARMUP and BENCH_WINDOW tune it
bench-gateway: build
	go test -tags "e2e benchpipelines" -count=1 -run TestGatewayLoad -v -timeout 60m ./testbed/

## test-gpu: acceptance of a GPU node: the receiver's hardware tests, then the agent for two minutes on the real GPUs compared field by field with nvidia-smi -q -x (scripts/test-gpu.sh, docs/test-gpu.md; report in ./gpu-report)
test-gpu:
	scripts/test-gpu.sh

## deps: install the system packages the tests need (gcc, Debian's Prometheus 2.42 for the compatibility row) and build the testbed's backends into ./bin once per version (Prometheus 3 + promtool, Alertmanager, kube-apiserver, kube-controller-manager, etcd, VictoriaMetrics; about 25 minutes cold on 2 cores)
deps:
	scripts/install-deps.sh
	@# A stamp whose binary was deleted does not count.
	@for t in prometheus:prometheus promtool:prometheus alertmanager:alertmanager kube-apiserver:kube-apiserver \
	  kube-controller-manager:kube-controller-manager etcd:etcd victoria-metrics:victoria-metrics; do [[ -x $(BIN)/$${t%%:*} ]] || rm -f $(STAMPS)/$${t#*:}-*; done
	$(MAKE) --no-print-directory -j$(DEPS_JOBS) backends

# Two builds at a time: each go build uses both cores while compiling, but the links and
# the module downloads are serial, so a pair overlaps them (kube-apiserver peaks at 2.4 GB).
DEPS_JOBS ?= 2
STAMPS := $(BIN)/.stamps

# A stamp per tool and version: a version bump in versions.mk (or tools/*/go.mod, which
# check-versions keeps in agreement) rebuilds that tool only.
BACKENDS := $(STAMPS)/prometheus-$(PROMETHEUS_VERSION) $(STAMPS)/alertmanager-$(ALERTMANAGER_VERSION) \
	$(STAMPS)/kube-apiserver-$(KUBERNETES_VERSION) $(STAMPS)/kube-controller-manager-$(KUBERNETES_VERSION) \
	$(STAMPS)/etcd-$(ETCD_VERSION) \
	$(STAMPS)/victoria-metrics-$(VICTORIAMETRICS_VERSION)

.PHONY: backends
backends: $(BACKENDS)

# Stripped binaries (-s -w): kube-apiserver is 170 MB otherwise, and links faster.
GO_TOOL_LDFLAGS := -ldflags="-s -w"

$(STAMPS)/prometheus-%:
	GOBIN=$(BIN) go install -trimpath $(GO_TOOL_LDFLAGS) \
	  github.com/prometheus/prometheus/cmd/prometheus@v$* github.com/prometheus/prometheus/cmd/promtool@v$*
	mkdir -p $(@D) && rm -f $(@D)/prometheus-* && touch $@

$(STAMPS)/alertmanager-%:
	GOBIN=$(BIN) go install -trimpath $(GO_TOOL_LDFLAGS) github.com/prometheus/alertmanager/cmd/alertmanager@v$*
	mkdir -p $(@D) && rm -f $(@D)/alertmanager-* && touch $@

$(STAMPS)/victoria-metrics-%:
	GOBIN=$(BIN) go install -trimpath $(GO_TOOL_LDFLAGS) github.com/VictoriaMetrics/VictoriaMetrics/app/victoria-metrics@v$*
	mkdir -p $(@D) && rm -f $(@D)/victoria-metrics-* && touch $@

$(STAMPS)/kube-apiserver-%: tools/kube/go.mod tools/kube/go.sum
	cd tools/kube && go build -trimpath $(GO_TOOL_LDFLAGS) -o $(BIN)/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
	mkdir -p $(@D) && rm -f $(@D)/kube-apiserver-* && touch $@

# The same module as kube-apiserver: deploy/test runs its DaemonSet controller alone.
$(STAMPS)/kube-controller-manager-%: tools/kube/go.mod tools/kube/go.sum
	cd tools/kube && go build -trimpath $(GO_TOOL_LDFLAGS) -o $(BIN)/kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
	mkdir -p $(@D) && rm -f $(@D)/kube-controller-manager-* && touch $@

$(STAMPS)/etcd-%: tools/etcd/go.mod tools/etcd/go.sum tools/etcd/main.go
	cd tools/etcd && go build -trimpath $(GO_TOOL_LDFLAGS) -o $(BIN)/etcd .
	mkdir -p $(@D) && rm -f $(@D)/etcd-* && touch $@

## tools: build ocb and mdatagen at the pinned versions into ./bin
tools: $(OCB) $(MDATAGEN)

$(OCB): versions.mk
	GOBIN=$(BIN) go install go.opentelemetry.io/collector/cmd/builder@v$(OTELCOL_CORE_VERSION)
	mv $(BIN)/builder $(OCB)

$(MDATAGEN): tools/go.mod tools/go.sum
	cd tools && go build -o $(MDATAGEN) go.opentelemetry.io/collector/cmd/mdatagen

## check-versions: all collector modules on the release line of versions.mk
check-versions:
	scripts/check-versions.sh

## check-generated: generated code matches its sources
check-generated: tools
	scripts/check-generated.sh

clean:
	rm -rf $(BIN) $(COLLECTOR) distribution/agent/otelcol-gpu-agent
