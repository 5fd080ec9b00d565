// Package gpureceiver implements the `gpu` receiver: it reads NVIDIA GPUs through NVML
// (or through the GPU simulator) and emits hw.* and nvidia.gpu.* metrics.
//
//go:generate mdatagen metadata.yaml
package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"
