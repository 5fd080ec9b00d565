package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// Utilization is averaged over the collection interval from the driver's sample buffer
// (nvmlDeviceGetSamples), so a short burst between two scrapes is not missed or
// over-weighted. Where the driver keeps no samples, or none arrived since the last scrape,
// the instantaneous value is used instead.

const (
	callGetSamples            = "nvmlDeviceGetSamples"
	callGetUtilizationRates   = "nvmlDeviceGetUtilizationRates"
	callGetEncoderUtilization = "nvmlDeviceGetEncoderUtilization"
	callGetDecoderUtilization = "nvmlDeviceGetDecoderUtilization"
	utilizationSamplesGPU     = nvml.GPU_UTILIZATION_SAMPLES
	utilizationSamplesMemory  = nvml.MEMORY_UTILIZATION_SAMPLES
	utilizationSamplesEncoder = nvml.ENC_UTILIZATION_SAMPLES
	utilizationSamplesDecoder = nvml.DEC_UTILIZATION_SAMPLES
	percent                   = 100.0
)

func (r *deviceRead) recordUtilization() {
	m := r.metrics
	if m.HwGpuUtilization.Enabled {
		gpu, okGPU := r.averageSamples(utilizationSamplesGPU)
		if !okGPU {
			if u, ok := r.utilizationRates(); ok {
				gpu, okGPU = float64(u.Gpu), true
			}
		}
		if okGPU {
			r.mb.RecordHwGpuUtilizationDataPoint(r.now, gpu/percent, metadata.AttributeHwGpuTaskGeneral)
		}
		if enc, ok := r.engineUtilization(utilizationSamplesEncoder, callGetEncoderUtilization, r.dev.handle.GetEncoderUtilization); ok {
			r.mb.RecordHwGpuUtilizationDataPoint(r.now, enc/percent, metadata.AttributeHwGpuTaskEncoder)
		}
		if dec, ok := r.engineUtilization(utilizationSamplesDecoder, callGetDecoderUtilization, r.dev.handle.GetDecoderUtilization); ok {
			r.mb.RecordHwGpuUtilizationDataPoint(r.now, dec/percent, metadata.AttributeHwGpuTaskDecoder)
		}
	}
	if m.NvidiaGpuMemoryCopyUtilization.Enabled {
		mem, ok := r.averageSamples(utilizationSamplesMemory)
		if !ok {
			if u, okRates := r.utilizationRates(); okRates {
				mem, ok = float64(u.Memory), true
			}
		}
		if ok {
			r.mb.RecordNvidiaGpuMemoryCopyUtilizationDataPoint(r.now, mem/percent)
		}
	}
}

// utilizationRates is read at most once per scrape (it carries both GPU and memory-copy).
func (r *deviceRead) utilizationRates() (nvml.Utilization, bool) {
	if !r.rates.read {
		r.rates.read = true
		if !r.skip(callGetUtilizationRates) {
			u, ret := r.dev.handle.GetUtilizationRates()
			r.rates.value, r.rates.ok = u, r.ok(callGetUtilizationRates, ret)
		}
	}
	return r.rates.value, r.rates.ok
}

func (r *deviceRead) engineUtilization(kind nvml.SamplingType, call string, instant func() (uint32, uint32, nvml.Return)) (float64, bool) {
	if v, ok := r.averageSamples(kind); ok {
		return v, true
	}
	if r.skip(call) {
		return 0, false
	}
	u, _, ret := instant()
	return float64(u), r.ok(call, ret)
}

// averageSamples averages the samples of one kind taken since the previous scrape.
func (r *deviceRead) averageSamples(kind nvml.SamplingType) (float64, bool) {
	call := callGetSamples + samplingSuffix(kind)
	if r.skip(call) {
		return 0, false
	}
	valueType, samples, ret := r.dev.handle.GetSamples(kind, r.dev.lastSampleTS[kind])
	if !r.ok(call, ret) || len(samples) == 0 {
		return 0, false
	}
	sum, n := 0.0, 0
	for _, smp := range samples {
		v, ok := decodeSample(valueType, smp.SampleValue)
		if !ok {
			continue
		}
		sum += v
		n++
		r.dev.lastSampleTS[kind] = max(r.dev.lastSampleTS[kind], smp.TimeStamp)
	}
	if n == 0 {
		return 0, false
	}
	return math.Min(percent, math.Max(0, sum/float64(n))), true
}

func samplingSuffix(kind nvml.SamplingType) string {
	switch kind {
	case utilizationSamplesGPU:
		return "(gpu)"
	case utilizationSamplesMemory:
		return "(memory)"
	case utilizationSamplesEncoder:
		return "(encoder)"
	case utilizationSamplesDecoder:
		return "(decoder)"
	}
	return "(other)"
}

func decodeSample(t nvml.ValueType, v [8]byte) (float64, bool) {
	return decodeFieldValue(nvml.FieldValue{ValueType: uint32(t), Value: v})
}
