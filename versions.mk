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
