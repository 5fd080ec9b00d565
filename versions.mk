# The one place where the collector release line is pinned. builder-config.yaml, go.mod
# and distribution/go.mod must agree with it: `make check-versions` enforces that.
#
# Why v0.161 and not newer: from v0.162 on, the Go module proxy reachable here refuses zips
# that contrib needs (DESIGN §3). Revisit when the proxy serves them.
OTELCOL_CORE_VERSION    := 0.161.0
OTELCOL_STABLE_VERSION  := 1.67.0
OTELCOL_CONTRIB_VERSION := 0.161.0
# k8sattributesprocessor left the v0 line: v1.0.0 is its release for v0.161.
K8SATTRIBUTES_VERSION   := 1.0.0
# mdatagen v0.161 cannot be installed from the proxy here; v0.155's output compiles and
# passes its tests against v0.161 (it is a code generator only, never linked).
MDATAGEN_VERSION        := 0.155.0

# The testbed's real backends and control plane, built from the Go module proxy into ./bin
# by `make deps` (one stamp per tool and version, so a bump here rebuilds only that tool).
# Debian's Prometheus 2.42 stays installed beside them as the compatibility row.
PROMETHEUS_VERSION      := 0.316.0
# v0.32 and later embed UI assets that their module zip lacks: they do not build.
ALERTMANAGER_VERSION    := 0.31.1
# kube-apiserver and etcd build in modules of their own (tools/kube, tools/etcd) whose go.mod
# must agree with these: `make check-versions` enforces that.
KUBERNETES_VERSION      := 1.37.2
ETCD_VERSION            := 3.7.3
VICTORIAMETRICS_VERSION := 1.151.0
# CRDs the manifests need when deploy/test applies them to the API server, read from these
# Go modules' zips (the proxy serves no newer prometheus-operator main module).
PROMETHEUS_OPERATOR_VERSION := 0.85.0
# The agent's OpenTelemetryCollector sets spec.hostPID, which the operator has from v0.142.0
# on; v0.144.0 is the newest the proxy serves here (v0.145.0 is refused).
OTEL_OPERATOR_VERSION       := 0.144.0
