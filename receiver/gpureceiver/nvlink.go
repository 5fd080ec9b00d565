package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const kibibyte = 1024

var nvlinkErrorFields = []struct {
	field uint32
	kind  metadata.AttributeNvidiaGpuNvlinkErrorType
}{
	{nvml.FI_DEV_NVLINK_ERROR_DL_CRC, metadata.AttributeNvidiaGpuNvlinkErrorTypeCrc},
	{nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY, metadata.AttributeNvidiaGpuNvlinkErrorTypeReplay},
	{nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY, metadata.AttributeNvidiaGpuNvlinkErrorTypeRecovery},
}

// recordNVLink reports, per link, its state, payload bytes each way (NVML: KiB) and error
// counters, all from the field batch (the links were counted at discovery). A total over
// links is a PromQL sum away, so it is not stored twice.
func (r *deviceRead) recordNVLink() {
	if r.gone {
		return
	}
	m := r.metrics
	for l := 0; l < r.dev.static.nvlinks; l++ {
		link := int64(l)
		if v, ok := r.fields.link(nvml.FI_DEV_NVLINK_GET_STATE, l); ok && m.NvidiaGpuNvlinkState.Enabled {
			up := int64(0)
			if v == nvml.NVLINK_STATE_ACTIVE {
				up = 1
			}
			r.mb.RecordNvidiaGpuNvlinkStateDataPoint(r.now, up, link)
		}
		if m.NvidiaGpuNvlinkIo.Enabled {
			if v, ok := r.fields.link(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, l); ok {
				r.mb.RecordNvidiaGpuNvlinkIoDataPoint(r.now, int64(v)*kibibyte, link, metadata.AttributeNetworkIoDirectionTransmit)
			}
			if v, ok := r.fields.link(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, l); ok {
				r.mb.RecordNvidiaGpuNvlinkIoDataPoint(r.now, int64(v)*kibibyte, link, metadata.AttributeNetworkIoDirectionReceive)
			}
		}
		if m.NvidiaGpuNvlinkErrors.Enabled {
			for _, e := range nvlinkErrorFields {
				if v, ok := r.fields.link(e.field, l); ok {
					r.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(r.now, int64(v), link, e.kind)
				}
			}
		}
	}
}
