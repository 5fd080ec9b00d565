// Package testbed holds the end-to-end tests: the real ocb-built otelcol-gpu binary on
// simulated GPUs, remote-writing into a real Prometheus (Debian's package), asserted through
// the Prometheus HTTP API the way a user would query it. They run with `make e2e` (part of
// `make test`) and need the build tag e2e.
package testbed
