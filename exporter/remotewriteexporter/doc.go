// Package remotewriteexporter is the `remote_write` exporter: Prometheus remote-write 1.0
// for the node agent, at a fraction of the CPU of contrib's prometheus_remote_write.
//
// contrib's exporter (v0.161) copies the chosen resource attributes onto every data point,
// then rebuilds, sanitises and sorts every point's label set, at every collection: half
// the node agent's CPU at a 1 s interval (docs/benchmarks.md). This exporter translates
// with Prometheus's own OTLP translator (the code behind Prometheus 3's OTLP endpoint,
// which computes a resource's labels once per resource and sanitises each attribute name
// once per batch), so a series gets the same name and labels as the same data sent by
// OTLP into Prometheus 3, and it keeps each series' label set between batches, encoded
// (keyed by a 128-bit hash of everything the translator reads to label the series), so
// that a steady series costs a hash and a copy of its bytes: no label is rebuilt or
// marshalled again. What it does not do: remote-write 2.0, a write-ahead log, metadata:
// contrib's exporter stays for those.
package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"
