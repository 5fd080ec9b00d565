package gpureceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver"

import (
	"reflect"
	"slices"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-gpu/otelcol-gpu/internal/gpuschema"
	"github.com/otelcol-gpu/otelcol-gpu/receiver/gpureceiver/internal/metadata"
)

// Steady series (gpuschema.IsSteady: error counters, limits, link state) change a
// few times in a GPU's life. At a 1 s collection interval they would be a quarter of every
// sample written while saying nothing new, so an unchanged steady point is held back until
// steady_series_interval has passed since it was last sent; a changed value goes out at
// once. gpu_enrich's end-of-series tracker knows the same set and does not end a steady
// series for a gap shorter than gpuschema.SteadyResendMax, the interval's upper bound.

// steadyPolicy is when an unchanged steady point is sent again.
type steadyPolicy struct {
	every      time.Duration // 0: every collection
	collection time.Duration // the receiver's collection interval
	// held are the steady metrics whose points may be held back: those the metrics
	// builder records one point per record call for (steadyHoldable).
	held map[string]bool
}

func newSteadyPolicy(cfg *Config) steadyPolicy {
	return steadyPolicy{every: cfg.SteadySeriesInterval, collection: cfg.CollectionInterval, held: steadyHoldable(&cfg.Metrics)}
}

// steadyHoldable lists the steady metrics whose records each make a point of their own.
// Where a user turned off one of a metric's attributes, the metrics builder merges the
// records that differ only in it into one point (a sum, min, max or average), and holding
// back some of them would change that point's value: such a metric is sent every
// collection.
func steadyHoldable(cfg *metadata.MetricsConfig) map[string]bool {
	held := map[string]bool{}
	if !cfg.HwStatus.Enabled {
		// hw.status is what keeps a GPU's resource in every collection where nothing else
		// does (a GPU that does not answer, or no memory usage: sendHealth); without it the
		// resource could vanish and its series end.
		return held
	}
	defaults := metadata.DefaultMetricsBuilderConfig().Metrics
	got, def := reflect.ValueOf(cfg).Elem(), reflect.ValueOf(defaults)
	for i := 0; i < got.NumField(); i++ {
		name := got.Type().Field(i).Tag.Get("mapstructure")
		if !gpuschema.IsSteady(name) {
			continue
		}
		attrs := got.Field(i).FieldByName("EnabledAttributes")
		if !attrs.IsValid() {
			held[name] = true // no attributes: nothing to merge
			continue
		}
		enabled := make([]string, attrs.Len())
		for j := range enabled {
			enabled[j] = attrs.Index(j).String()
		}
		defaultAttrs := def.Field(i).FieldByName("EnabledAttributes")
		all := true
		for j := 0; j < defaultAttrs.Len(); j++ {
			all = all && slices.Contains(enabled, defaultAttrs.Index(j).String())
		}
		held[name] = all
	}
	return held
}

// due reports whether a point last sent elapsed ago is sent again: always at collection
// intervals of every or longer, else once every has passed. Half a collection interval of
// slack keeps a scrape that ticks a little early from holding a point back for a whole
// extra interval.
func (p steadyPolicy) due(elapsed time.Duration) bool {
	return p.every <= 0 || p.collection >= p.every || elapsed+p.collection/2 >= p.every
}

// steadyKey names one steady series of a GPU: its metric and the point attribute values
// that tell its series apart (constant strings, or a code).
type steadyKey struct {
	metric string
	attrs  string
	code   int64
}

// steadyPoint is what a steady series sent last.
type steadyPoint struct {
	value float64
	sent  pcommon.Timestamp
}

// sendSteady reports whether this collection records the steady series' point: its value
// changed, it was never sent, or it is due again. When it is, it is remembered as sent.
func (r *deviceRead) sendSteady(k steadyKey, v float64) bool {
	if !r.steady.held[k.metric] {
		return true
	}
	last, seen := r.dev.steadySent[k]
	if seen && last.value == v && !r.steady.due(time.Duration(r.now-last.sent)) {
		return false
	}
	r.markSteadySent(k, v)
	return true
}

// markSteadySent remembers a steady series' point as sent in this collection, so that
// the next collection compares with what the backend last received.
func (r *deviceRead) markSteadySent(k steadyKey, v float64) {
	r.dev.steadySent[k] = steadyPoint{value: v, sent: r.now}
}
