// Package gpuenrichprocessor implements the `gpu_enrich` processor: it attributes GPUs, MIG
// instances and GPU processes to Kubernetes pods (kubelet pod-resources API and /proc
// cgroups) and derives the signals operators act on (framebuffer ratio, throttling,
// idle-while-allocated, leak trend, energy per pod, bottleneck class).
//
//go:generate mdatagen metadata.yaml
package gpuenrichprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gpuenrichprocessor"
