// Package semconvtest is an empty stand-in for a test-only dependency of
// k8sattributesprocessor whose module zip the Go proxy here refuses. It is never linked.
package semconvtest
