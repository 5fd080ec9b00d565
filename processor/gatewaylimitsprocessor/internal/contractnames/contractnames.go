// Package contractnames holds the OpenTelemetry names of the metric contract's metrics
// (receiver/gpureceiver/metadata.yaml and processor/gpuenrichprocessor/metadata.yaml) as
// Go data, for the gateway_limits processor: the collector binary cannot read the
// repository's files. names_generated.go is written by ./gen (`make generate`); a test
// fails when it no longer matches what internal/contract derives from the metadata.yaml
// files.
package contractnames // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor/internal/contractnames"

// FileName is the generated file, in this package's directory.
const FileName = "names_generated.go"

// Names returns the contract's metric names, sorted (a copy: callers may keep it).
func Names() []string {
	return append([]string(nil), names[:]...)
}
