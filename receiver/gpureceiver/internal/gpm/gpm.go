// Package gpm holds the types shared by the receiver and the simulator for NVML GPM (GPU
// Performance Monitoring, Hopper and newer). go-nvml's GPM calls take concrete sample
// types that its mocks cannot stand in for, so the receiver reads GPM through the Reader
// interface: the NVML implementation in production, the simulator's in tests and demos.
package gpm // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/gpm"

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Activity indexes Values.Activity.
type Activity int

// The activities the receiver reports, each a ratio 0–1 over the interval.
const (
	GraphicsActive Activity = iota
	SMActive
	SMOccupancy
	TensorActive
	DRAMActive
	FP64Active
	FP32Active
	FP16Active
	NumActivities
)

// Values is what GPM measured over one interval.
type Values struct {
	Activity [NumActivities]float64
	// Bandwidth in bytes per second.
	PCIeTx, PCIeRx, NVLinkTx, NVLinkRx float64
}

// NoMIG is the gpuInstance argument for a whole GPU.
const NoMIG = -1

// Reader reads GPM metrics.
type Reader interface {
	// Supported reports whether the GPU supports GPM.
	Supported(dev nvml.Device) bool
	// Read takes a sample of the GPU (or of one of its MIG GPU instances) and returns the
	// values over the interval since the previous sample of the same target; ok is false
	// on the first sample.
	Read(dev nvml.Device, gpuInstance int) (v Values, ok bool, ret nvml.Return)
	// Forget releases the samples kept for a GPU (it was lost or removed).
	Forget(dev nvml.Device)
	// Close releases everything.
	Close()
}
