// Package testbed holds the end-to-end tests: the real ocb-built otelcol-gpu binary on
// simulated GPUs, remote-writing into a real Prometheus (3.x, built by `make deps`; Debian's
// 2.42 for the compatibility row, TESTBED_PROMETHEUS=2), with a real Kubernetes API server
// (testbed/kubeapi) where k8s_attributes needs one, asserted through the Prometheus HTTP API
// the way a user would query it. They run with `make e2e` (part of `make test`) and need the
// build tag e2e.
package testbed
