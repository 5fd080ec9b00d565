package gatewaylimitsprocessor // import "github.com/otelcol-gpu/otelcol-gpu/processor/gatewaylimitsprocessor"

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Values of allowed_metric_names.
const (
	// AllowContract: only the OpenTelemetry names of the metric contract (generated from
	// the receiver's and gpu_enrich's metadata.yaml into internal/contractnames).
	AllowContract = "contract"
	// AllowAny: any name (the other limits still hold).
	AllowAny = "any"
)

// Config of the gateway_limits processor. Every limit is per client; README.md has the
// arithmetic behind the defaults.
type Config struct {
	// ClientIdentity is the auth attribute that names a client: the first element (up to
	// the first "/") is passed to client.Info.Auth.GetAttribute, the others index the
	// nested maps of its value (a JWT claim that is an object). Where it is absent or not a
	// string or number (a shared bearer token, no auth), the client is its IP address.
	// Empty: always the IP address.
	ClientIdentity string `mapstructure:"client_identity"`
	// MaxClients bounds the clients tracked; the least recently seen is forgotten first
	// (its budgets start afresh when it returns).
	MaxClients int `mapstructure:"max_clients"`
	// AllowedMetricNames is "contract" (only our metric contract's names) or "any".
	AllowedMetricNames string `mapstructure:"allowed_metric_names"`

	// MaxNewSeriesPerMinute is the budget of series a client may start: a token bucket
	// that holds this many and refills at this rate.
	MaxNewSeriesPerMinute int `mapstructure:"max_new_series_per_minute"`
	// MaxSeriesPerClient caps the series a client has live at once.
	MaxSeriesPerClient int `mapstructure:"max_series_per_client"`
	// SeriesIdleTimeout: a series not seen for this long is forgotten (no longer counts
	// against max_series_per_client; new again if it comes back).
	SeriesIdleTimeout time.Duration `mapstructure:"series_idle_timeout"`

	// MaxPointsPerSecond is the rate of data points a client may send (a token bucket).
	// A request over it is refused whole with a retryable error: the agent's queue sends
	// it again later, nothing is lost.
	MaxPointsPerSecond int `mapstructure:"max_points_per_second"`
	// PointsBurst is what the bucket holds; 0: one second's worth (max_points_per_second).
	PointsBurst int `mapstructure:"points_burst"`

	// MaxHistogramBuckets bounds the buckets of one histogram or exponential histogram
	// point, and the quantiles of one summary point (each becomes a series).
	MaxHistogramBuckets int `mapstructure:"max_histogram_buckets"`
	// MaxMetricNameLength bounds a metric's name plus its unit, in bytes (the unit becomes
	// part of the Prometheus name).
	MaxMetricNameLength int `mapstructure:"max_metric_name_length"`
	// MaxAttributeKeyLength bounds every resource and data-point attribute key, in bytes.
	MaxAttributeKeyLength int `mapstructure:"max_attribute_key_length"`

	// LogInterval bounds the log: the first refusal after a quiet interval is logged at
	// once, later ones are summed into one line per interval.
	LogInterval time.Duration `mapstructure:"log_interval"`
}

// Defaults: a 64-GPU node with the full overlay at 1 s collection is ~15,100 series and
// as many points per second (README.md, "Defaults"); the limits give it twice that.
const (
	defaultClientIdentity        = "claims.kubernetes.io/node/name"
	defaultMaxClients            = 10000
	defaultMaxNewSeriesPerMinute = 32000
	defaultMaxSeriesPerClient    = 32000
	defaultSeriesIdleTimeout     = 10 * time.Minute
	defaultMaxPointsPerSecond    = 32000
	defaultMaxHistogramBuckets   = 160
	defaultMaxMetricNameLength   = 128
	defaultMaxAttributeKeyLength = 64
	defaultLogInterval           = time.Minute
)

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	positive := func(key string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive, got %d", key, v))
		}
	}
	positive("max_clients", c.MaxClients)
	positive("max_new_series_per_minute", c.MaxNewSeriesPerMinute)
	positive("max_series_per_client", c.MaxSeriesPerClient)
	positive("max_points_per_second", c.MaxPointsPerSecond)
	positive("max_histogram_buckets", c.MaxHistogramBuckets)
	positive("max_metric_name_length", c.MaxMetricNameLength)
	positive("max_attribute_key_length", c.MaxAttributeKeyLength)
	if c.PointsBurst < 0 {
		errs = append(errs, fmt.Errorf("points_burst: must be 0 (one second's worth) or positive, got %d", c.PointsBurst))
	}
	if c.SeriesIdleTimeout < time.Second {
		errs = append(errs, fmt.Errorf("series_idle_timeout: must be at least 1s, got %s", c.SeriesIdleTimeout))
	}
	if c.LogInterval <= 0 {
		errs = append(errs, fmt.Errorf("log_interval: must be positive, got %s", c.LogInterval))
	}
	switch c.AllowedMetricNames {
	case AllowContract, AllowAny:
	default:
		errs = append(errs, fmt.Errorf("allowed_metric_names: must be %q or %q, got %q", AllowContract, AllowAny, c.AllowedMetricNames))
	}
	if c.ClientIdentity != "" {
		for _, part := range strings.Split(c.ClientIdentity, "/") {
			if part == "" {
				errs = append(errs, fmt.Errorf("client_identity: %q has an empty path element (write attribute/key/key, e.g. %s)", c.ClientIdentity, defaultClientIdentity))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// burst is what the points bucket holds.
func (c *Config) burst() int {
	if c.PointsBurst == 0 {
		return c.MaxPointsPerSecond
	}
	return c.PointsBurst
}
