// Package simulator is an nvml.Interface for machines without a GPU. It starts from
// go-nvml's mock servers (dgxa100, dgxh100, dgxh200, dgxb200) and fills in every function the
// receiver calls with deterministic, time-varying values that follow a scenario (steady
// training, an idle allocated GPU, a memory leak, …). The receiver runs its production NVML
// code path against it: the demo and the testbed select it with `backend: simulated`.
//
// Same seed + same clock readings = same values, so golden tests are stable. Every call is
// counted, so tests can assert which NVML functions were (not) called.
package simulator // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/simulator"
