package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"slices"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

const kibibyte = 1024

// nvlinkErrorField is one error counter of a link and the error type it reports.
type nvlinkErrorField struct {
	field uint32
	kind  metadata.AttributeNvidiaGpuNvlinkErrorType
}

// dataLinkErrorFields are NVLink4 and earlier's; nvlink5ErrorFields Blackwell's, which
// answers NOT_SUPPORTED to the former.
var (
	dataLinkErrorFields = []nvlinkErrorField{
		{nvml.FI_DEV_NVLINK_ERROR_DL_CRC, metadata.AttributeNvidiaGpuNvlinkErrorTypeCrc},
		{nvml.FI_DEV_NVLINK_ERROR_DL_REPLAY, metadata.AttributeNvidiaGpuNvlinkErrorTypeReplay},
		{nvml.FI_DEV_NVLINK_ERROR_DL_RECOVERY, metadata.AttributeNvidiaGpuNvlinkErrorTypeRecovery},
	}
	nvlink5ErrorFields = []nvlinkErrorField{
		{nvml.FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS, metadata.AttributeNvidiaGpuNvlinkErrorTypeRecovery},
		{nvml.FI_DEV_NVLINK_COUNT_SYMBOL_ERRORS, metadata.AttributeNvidiaGpuNvlinkErrorTypeSymbol},
	}
)

// maxNVLinkErrorFields is the most error counters a link has.
const maxNVLinkErrorFields = 3

// recordNVLink reports, per link, its state, payload bytes each way (NVML: KiB) and error
// counters, all from the field batch (the links were counted at discovery). A total over
// links is a PromQL sum away, so it is not stored twice.
//
// Without the link attribute (the default) the metrics builder sums the links into one
// point per GPU; it allocates a data point per record call, so where it would sum anyway
// the links are summed here and recorded once (an H100's 108 record calls become 6).
func (r *deviceRead) recordNVLink() {
	if r.gone {
		return
	}
	m := r.metrics
	links := r.dev.static.nvlinks
	// Whether each metric's points are recorded per link, or summed here.
	stateByLink := perLink(m.NvidiaGpuNvlinkState.EnabledAttributes, metadata.NvidiaGpuNvlinkStateMetricAttributeKeyNvidiaGpuNvlinkLink, m.NvidiaGpuNvlinkState.AggregationStrategy)
	ioByLink := perLink(m.NvidiaGpuNvlinkIo.EnabledAttributes, metadata.NvidiaGpuNvlinkIoMetricAttributeKeyNvidiaGpuNvlinkLink, m.NvidiaGpuNvlinkIo.AggregationStrategy)
	errorsByLink := perLink(m.NvidiaGpuNvlinkErrors.EnabledAttributes, metadata.NvidiaGpuNvlinkErrorsMetricAttributeKeyNvidiaGpuNvlinkLink, m.NvidiaGpuNvlinkErrors.AggregationStrategy)
	// Per link, a steady point may be held back only where each link is a series of its
	// own: with the link attribute off the metrics builder merges the links' records.
	stateLinkSeries := slices.Contains(m.NvidiaGpuNvlinkState.EnabledAttributes, metadata.NvidiaGpuNvlinkStateMetricAttributeKeyNvidiaGpuNvlinkLink)
	errorsLinkSeries := slices.Contains(m.NvidiaGpuNvlinkErrors.EnabledAttributes, metadata.NvidiaGpuNvlinkErrorsMetricAttributeKeyNvidiaGpuNvlinkLink)

	errorFields := dataLinkErrorFields
	if r.dev.static.nvlink5 {
		errorFields = nvlink5ErrorFields
	}
	var total struct {
		up, tx, rx linkSum
		errors     [maxNVLinkErrorFields]linkSum
	}
	for l := 0; l < links; l++ {
		link := int64(l)
		if v, ok := r.fields.link(nvml.FI_DEV_NVLINK_GET_STATE, l); ok && m.NvidiaGpuNvlinkState.Enabled {
			up := int64(0)
			if v == nvml.NVLINK_STATE_ACTIVE {
				up = 1
			}
			if stateByLink {
				if !stateLinkSeries || r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuNvlinkState, code: link}, float64(up)) {
					r.mb.RecordNvidiaGpuNvlinkStateDataPoint(r.now, up, link)
				}
			} else {
				total.up.add(up)
			}
		}
		if m.NvidiaGpuNvlinkIo.Enabled {
			if v, ok := r.fields.link(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_TX, l); ok {
				if ioByLink {
					r.mb.RecordNvidiaGpuNvlinkIoDataPoint(r.now, int64(v)*kibibyte, link, metadata.AttributeNetworkIoDirectionTransmit)
				} else {
					total.tx.add(int64(v) * kibibyte)
				}
			}
			if v, ok := r.fields.link(nvml.FI_DEV_NVLINK_THROUGHPUT_DATA_RX, l); ok {
				if ioByLink {
					r.mb.RecordNvidiaGpuNvlinkIoDataPoint(r.now, int64(v)*kibibyte, link, metadata.AttributeNetworkIoDirectionReceive)
				} else {
					total.rx.add(int64(v) * kibibyte)
				}
			}
		}
		if m.NvidiaGpuNvlinkErrors.Enabled {
			for i, e := range errorFields {
				if v, ok := r.fields.link(e.field, l); ok {
					if errorsByLink {
						if !errorsLinkSeries || r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuNvlinkErrors, attrs: e.kind.String(), code: link}, v) {
							r.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(r.now, int64(v), link, e.kind)
						}
					} else {
						total.errors[i].add(int64(v))
					}
				}
			}
		}
	}

	// The totals: the link attribute is off, so the link number recorded is dropped.
	// Totals are keyed as link -1, apart from any per-link series.
	if total.up.seen && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuNvlinkState, code: -1}, float64(total.up.value)) {
		r.mb.RecordNvidiaGpuNvlinkStateDataPoint(r.now, total.up.value, 0)
	}
	if total.tx.seen {
		r.mb.RecordNvidiaGpuNvlinkIoDataPoint(r.now, total.tx.value, 0, metadata.AttributeNetworkIoDirectionTransmit)
	}
	if total.rx.seen {
		r.mb.RecordNvidiaGpuNvlinkIoDataPoint(r.now, total.rx.value, 0, metadata.AttributeNetworkIoDirectionReceive)
	}
	for i, e := range errorFields {
		if total.errors[i].seen && r.sendSteady(steadyKey{metric: gpuschema.MetricNvidiaGpuNvlinkErrors, attrs: e.kind.String(), code: -1}, float64(total.errors[i].value)) {
			r.mb.RecordNvidiaGpuNvlinkErrorsDataPoint(r.now, total.errors[i].value, 0, e.kind)
		}
	}
}

// perLink reports whether a metric's points are recorded per link: with the link attribute
// on, or with an aggregation other than a sum (min, max and avg over links are left to
// the metrics builder).
func perLink[K comparable](enabled []K, linkKey K, aggregation string) bool {
	return slices.Contains(enabled, linkKey) || aggregation != metadata.AggregationStrategySum
}

// linkSum is a sum over links, and whether any link answered.
type linkSum struct {
	value int64
	seen  bool
}

func (s *linkSum) add(v int64) { s.value, s.seen = s.value+v, true }
