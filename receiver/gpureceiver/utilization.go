package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"math"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// Utilization is averaged over the collection interval, so a short burst between two
// scrapes is neither missed nor over-weighted: from the GPM sample pair where the GPU has
// GPM (read for profiling anyway, and covering exactly the interval), otherwise from the
// driver's sample buffer (nvmlDeviceGetSamples). Where neither answers, the instantaneous
// value is used. Device-level utilization is not supported in MIG mode: the MIG instances
// report theirs.

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
	// Memory-copy first: its sample read is what shows MIG turned on, and a GPU found in
	// MIG mode reports no device-level utilization from this scrape on.
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
	if r.dev.mig.recheck {
		r.refreshMIG()
	}
	if !m.HwGpuUtilization.Enabled || r.dev.mig.enabled {
		return
	}
	if gpu, ok := r.gpuUtilization(); ok {
		r.mb.RecordHwGpuUtilizationDataPoint(r.now, gpu, metadata.AttributeHwGpuTaskGeneral)
	}
	var gpmEnc, gpmDec *float64
	if v := r.gpmValues; v != nil {
		if v.hasEncoder {
			gpmEnc = &v.encoder
		}
		if v.hasDecoder {
			gpmDec = &v.decoder
		}
	}
	enc, hasEnc := r.engineUtilization(gpmEnc, utilizationSamplesEncoder, callGetEncoderUtilization, r.dev.handle.GetEncoderUtilization)
	if hasEnc {
		r.mb.RecordHwGpuUtilizationDataPoint(r.now, enc, metadata.AttributeHwGpuTaskEncoder)
	}
	dec, hasDec := r.engineUtilization(gpmDec, utilizationSamplesDecoder, callGetDecoderUtilization, r.dev.handle.GetDecoderUtilization)
	if hasDec {
		r.mb.RecordHwGpuUtilizationDataPoint(r.now, dec, metadata.AttributeHwGpuTaskDecoder)
	}
	r.gpuEngines.known, r.gpuEngines.encoder, r.gpuEngines.decoder = true, hasEnc, hasDec
}

// gpuUtilization is the GPU's busy share 0–1: GPM's graphics activity, else the samples,
// else the instantaneous rate.
func (r *deviceRead) gpuUtilization() (float64, bool) {
	if v := r.gpmValues; v != nil {
		if x, ok := v.activity[nvml.GPM_METRIC_GRAPHICS_UTIL]; ok {
			return x, true
		}
	}
	if x, ok := r.averageSamples(utilizationSamplesGPU); ok {
		return x / percent, true
	}
	if u, ok := r.utilizationRates(); ok {
		return float64(u.Gpu) / percent, true
	}
	return 0, false
}

// utilizationRates is read at most once per scrape (it carries both GPU and memory-copy).
func (r *deviceRead) utilizationRates() (nvml.Utilization, bool) {
	if !r.rates.read {
		r.rates.read = true
		if !r.skip(callGetUtilizationRates) {
			u, ret := r.dev.handle.GetUtilizationRates()
			r.noteMIGHint(ret)
			r.rates.value, r.rates.ok = u, r.ok(callGetUtilizationRates, ret)
		}
	}
	return r.rates.value, r.rates.ok
}

// engineUtilization is an encoder's or decoder's busy share 0–1: GPM's (mean over the
// engines), else the samples, else the instantaneous value.
func (r *deviceRead) engineUtilization(gpm *float64, kind nvml.SamplingType, call string, instant func() (uint32, uint32, nvml.Return)) (float64, bool) {
	if gpm != nil {
		return *gpm, true
	}
	if v, ok := r.averageSamples(kind); ok {
		return v / percent, true
	}
	if r.skip(call) {
		return 0, false
	}
	u, _, ret := instant()
	return float64(u) / percent, r.ok(call, ret)
}

// averageSamples averages the samples of one kind taken since the previous scrape.
func (r *deviceRead) averageSamples(kind nvml.SamplingType) (float64, bool) {
	call := samplesCall(kind)
	if r.skip(call) {
		return 0, false
	}
	valueType, samples, ret := r.dev.handle.GetSamples(kind, r.dev.lastSampleTS[kind])
	r.noteMIGHint(ret)
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

// samplesCall names the nvmlDeviceGetSamples call of one sampling type, for the call
// bookkeeping (unsupported calls are not made again); constant strings, so that naming
// the call costs nothing on every scrape.
func samplesCall(kind nvml.SamplingType) string {
	switch kind {
	case utilizationSamplesGPU:
		return callGetSamples + "(gpu)"
	case utilizationSamplesMemory:
		return callGetSamples + "(memory)"
	case utilizationSamplesEncoder:
		return callGetSamples + "(encoder)"
	case utilizationSamplesDecoder:
		return callGetSamples + "(decoder)"
	}
	return callGetSamples + "(other)"
}

func decodeSample(t nvml.ValueType, v [8]byte) (float64, bool) {
	return decodeFieldValue(nvml.FieldValue{ValueType: uint32(t), Value: v})
}
