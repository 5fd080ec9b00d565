package remotewriteexporter // import "github.com/otelcol-gpu/otelcol-gpu/exporter/remotewriteexporter"

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"go.opentelemetry.io/collector/config/configcompression"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/config/configretry"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// Config is the remote_write exporter's configuration. The key names follow contrib's
// prometheus_remote_write where the two share a setting, so that a configuration moves
// from one to the other by renaming the exporter.
type Config struct {
	// HTTP client: endpoint, TLS, auth, headers, proxy, middlewares. The body is always
	// snappy-compressed, as remote-write 1.0 requires, so `compression` must stay unset.
	ClientConfig confighttp.ClientConfig `mapstructure:"http"`
	// In-memory (or file_storage) queue in front of the sender. One consumer only: two
	// would send a series' samples out of order, which Prometheus refuses.
	QueueConfig configoptional.Optional[exporterhelper.QueueBatchConfig] `mapstructure:"sending_queue"`
	RetryConfig configretry.BackOffConfig                                `mapstructure:"retry_on_failure"`

	// ExternalLabels are added to every series (a series' own label of that name wins).
	ExternalLabels map[string]string `mapstructure:"external_labels"`
	// ResourceConstantLabels: the resource attributes sent as labels on every series.
	ResourceConstantLabels ResourceLabelsConfig `mapstructure:"resource_constant_labels"`
	// AddMetricSuffixes adds unit and type suffixes (`_bytes`, `_total`) to metric names,
	// as Prometheus's OTLP endpoint does by default.
	AddMetricSuffixes bool `mapstructure:"add_metric_suffixes"`
	// TargetInfo sends each resource's attributes as a target_info series.
	TargetInfo TargetInfoConfig `mapstructure:"target_info"`
	// PromoteScopeMetadata adds otel_scope_name, otel_scope_version and the scope's
	// attributes as labels (contrib's disable_scope_info: false).
	PromoteScopeMetadata bool `mapstructure:"promote_scope_metadata"`
	// MaxSeriesPerRequest bounds a request: a larger batch is sent as several requests,
	// in order. Prometheus's own remote-write sends at most 2000 samples per request.
	MaxSeriesPerRequest int `mapstructure:"max_series_per_request"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ResourceLabelsConfig selects resource attributes by glob patterns (`*` any run of
// characters, `?` one character), as contrib's resource_constant_labels does.
type ResourceLabelsConfig struct {
	Included []string `mapstructure:"included"`
	Excluded []string `mapstructure:"excluded"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// TargetInfoConfig turns the target_info series on or off.
type TargetInfoConfig struct {
	Enabled bool `mapstructure:"enabled"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Validate refuses what would lose or reorder data rather than letting it start.
func (cfg *Config) Validate() error {
	var errs []error
	if cfg.ClientConfig.Endpoint == "" {
		errs = append(errs, errors.New("http::endpoint must be set (the remote-write URL, e.g. http://prometheus:9090/api/v1/write)"))
	} else if u, err := url.Parse(cfg.ClientConfig.Endpoint); err != nil || u.Scheme == "" || u.Host == "" {
		errs = append(errs, fmt.Errorf("http::endpoint %q is not an absolute http(s) URL", cfg.ClientConfig.Endpoint))
	}
	if c := cfg.ClientConfig.Compression; c != "" && c != configcompression.Type("none") {
		errs = append(errs, fmt.Errorf("http::compression must not be set (it is %q): remote-write 1.0 bodies are always snappy-compressed", c))
	}
	if q := cfg.QueueConfig.Get(); q != nil && q.NumConsumers > 1 {
		errs = append(errs, fmt.Errorf("sending_queue::num_consumers is %d: it must be 1, as parallel requests send a series' samples out of order and Prometheus refuses them", q.NumConsumers))
	}
	if cfg.MaxSeriesPerRequest < 1 {
		errs = append(errs, fmt.Errorf("max_series_per_request must be at least 1 (it is %d)", cfg.MaxSeriesPerRequest))
	}
	for name, value := range cfg.ExternalLabels {
		if name == "" || value == "" {
			errs = append(errs, fmt.Errorf("external_labels: %q=%q: neither the name nor the value may be empty", name, value))
		}
	}
	for _, p := range append(append([]string(nil), cfg.ResourceConstantLabels.Included...), cfg.ResourceConstantLabels.Excluded...) {
		if _, err := globRegexp(p); err != nil {
			errs = append(errs, fmt.Errorf("resource_constant_labels: pattern %q: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// globRegexp turns a glob pattern into an anchored regular expression.
func globRegexp(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, errors.New("empty pattern")
	}
	quoted := regexp.QuoteMeta(pattern)
	quoted = strings.ReplaceAll(quoted, `\*`, ".*")
	quoted = strings.ReplaceAll(quoted, `\?`, ".")
	return regexp.Compile("^" + quoted + "$")
}
