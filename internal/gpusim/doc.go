// Package gpusim is an nvml.Interface for machines without a GPU. It starts from go-nvml's
// mock servers (dgxa100, dgxh100, dgxh200, dgxb200) and fills in every function the gpu
// receiver calls with deterministic, time-varying values that follow a scenario (steady
// training, an idle allocated GPU, a memory leak, …). The receiver runs its production NVML
// code path against it: the demo and the testbed select it with `backend: simulated`. The
// fake kubelet and the tests of downstream components use it directly, to hand out the
// same GPUs (UUIDs, minor numbers, MIG instances) the receiver will see.
//
// It lives outside the receiver so that nothing of it but what `backend: simulated` needs
// is linked into the collector, and nothing of the collector's test packages at all.
//
// Same seed + same clock readings = same values, so golden tests are stable. Every call is
// counted, so tests can assert which NVML functions were (not) called.
package gpusim // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpusim"
