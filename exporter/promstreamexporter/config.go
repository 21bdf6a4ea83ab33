package promstreamexporter // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter"

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/common/model"
	"go.opentelemetry.io/collector/config/confighttp"
)

const (
	defaultEndpoint         = "localhost:9464"
	defaultMetricExpiration = 5 * time.Minute
	defaultMaxSeries        = 2_000_000
	defaultMaxScrapes       = 4
	defaultShutdownGrace    = 15 * time.Second
	// defaultReadHeaderTimeout bounds how long a client may take to send
	// its request header: a scraper sends a few hundred bytes at once, and
	// a client that sends half a header must not hold a connection
	// (confighttp's own default is a minute).
	defaultReadHeaderTimeout = 10 * time.Second
	metricsPath              = "/metrics"
)

// Label orders and bucket formats.
const (
	labelOrderSorted      = "sorted"
	labelOrderAsReceived  = "as_received"
	bucketFormatCanonical = "canonical"
	bucketFormatShortest  = "shortest"
)

// Translation strategies, as the contrib prometheus exporter names them.
const (
	underscoreEscapingWithSuffixes    = "UnderscoreEscapingWithSuffixes"
	underscoreEscapingWithoutSuffixes = "UnderscoreEscapingWithoutSuffixes"
	noUTF8EscapingWithSuffixes        = "NoUTF8EscapingWithSuffixes"
	noTranslation                     = "NoTranslation"
)

// Config is the promstream exporter's configuration.
type Config struct {
	// ServerConfig is the HTTP server /metrics is served on (endpoint, TLS,
	// auth, CORS, ...).
	ServerConfig confighttp.ServerConfig `mapstructure:",squash"`
	// MetricExpiration is how long a series is kept without an update before
	// it disappears from /metrics. Enforced in the background, never on
	// scrape.
	MetricExpiration time.Duration `mapstructure:"metric_expiration"`
	// MaxSeries bounds the series held; points that would create more are
	// dropped and counted (0: no limit).
	MaxSeries int64 `mapstructure:"max_series"`
	// MaxConcurrentScrapes bounds scrapes served at once; beyond it a scrape
	// gets 503 with Retry-After.
	MaxConcurrentScrapes int `mapstructure:"max_concurrent_scrapes"`
	// ShutdownGrace is how long Shutdown keeps serving /metrics, when it
	// holds data no scrape has read yet, for a scrape to read the final
	// state: the collector's last flush lands here, and a pull exporter
	// that stops at once loses it. Shutdown ends as soon as a scrape that
	// read that state completes (at once when there is nothing new), and
	// at the latest after ShutdownGrace. 0 turns it off.
	ShutdownGrace time.Duration `mapstructure:"shutdown_grace"`

	// Namespace prefixes every metric name (namespace_name).
	Namespace string `mapstructure:"namespace"`
	// ConstLabels are added to every series.
	ConstLabels map[string]string `mapstructure:"const_labels"`
	// TranslationStrategy is how OTel names become Prometheus names; see the
	// README. Default UnderscoreEscapingWithSuffixes.
	TranslationStrategy string `mapstructure:"translation_strategy"`
	// WithoutScopeInfo drops the otel_scope_* labels.
	WithoutScopeInfo bool `mapstructure:"without_scope_info"`
	// ResourceToTelemetryConversion copies every resource attribute onto
	// every series as a label.
	ResourceToTelemetryConversion ResourceToTelemetryConfig `mapstructure:"resource_to_telemetry_conversion"`

	// LabelOrder is sorted (by name, the default) or as_received (context
	// labels, then the point's attributes in their order): what a gateway's
	// own exporter writes, for byte-identical lines.
	LabelOrder string `mapstructure:"label_order"`
	// KeepEmptyLabels writes labels with empty values (`consumer=""`)
	// instead of leaving them out (Prometheus treats both alike).
	KeepEmptyLabels bool `mapstructure:"keep_empty_labels"`
	// TextBucketFormat is how le and quantile values are written in the text
	// formats: canonical ("5.0", the default) or shortest ("5", as
	// client_golang and Kong write them). OpenMetrics is always canonical.
	TextBucketFormat string `mapstructure:"text_bucket_format"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// ResourceToTelemetryConfig mirrors the contrib exporter's option.
type ResourceToTelemetryConfig struct {
	Enabled bool `mapstructure:"enabled"`
}

func createDefaultConfig() *Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = defaultEndpoint
	srv.ReadHeaderTimeout = defaultReadHeaderTimeout
	return &Config{
		ServerConfig:         srv,
		MetricExpiration:     defaultMetricExpiration,
		MaxSeries:            defaultMaxSeries,
		MaxConcurrentScrapes: defaultMaxScrapes,
		ShutdownGrace:        defaultShutdownGrace,
		TranslationStrategy:  underscoreEscapingWithSuffixes,
		LabelOrder:           labelOrderSorted,
		TextBucketFormat:     bucketFormatCanonical,
	}
}

// Validate checks the exporter configuration.
func (c *Config) Validate() error {
	var errs error
	if c.ServerConfig.NetAddr.Endpoint == "" {
		errs = errors.Join(errs, errors.New("endpoint must not be empty"))
	}
	if c.MetricExpiration <= 0 {
		errs = errors.Join(errs, fmt.Errorf("metric_expiration must be positive, got %v", c.MetricExpiration))
	}
	if c.MaxSeries < 0 {
		errs = errors.Join(errs, fmt.Errorf("max_series must not be negative, got %d", c.MaxSeries))
	}
	if c.ShutdownGrace < 0 {
		errs = errors.Join(errs, fmt.Errorf("shutdown_grace must not be negative, got %v", c.ShutdownGrace))
	}
	if c.MaxConcurrentScrapes <= 0 {
		errs = errors.Join(errs, fmt.Errorf("max_concurrent_scrapes must be positive, got %d", c.MaxConcurrentScrapes))
	}
	switch c.TranslationStrategy {
	case underscoreEscapingWithSuffixes, underscoreEscapingWithoutSuffixes, noUTF8EscapingWithSuffixes, noTranslation:
	default:
		errs = errors.Join(errs, fmt.Errorf("translation_strategy %q is not one of %s, %s, %s, %s", c.TranslationStrategy,
			underscoreEscapingWithSuffixes, underscoreEscapingWithoutSuffixes, noUTF8EscapingWithSuffixes, noTranslation))
	}
	if c.LabelOrder != labelOrderSorted && c.LabelOrder != labelOrderAsReceived {
		errs = errors.Join(errs, fmt.Errorf("label_order must be %q or %q, got %q", labelOrderSorted, labelOrderAsReceived, c.LabelOrder))
	}
	if c.TextBucketFormat != bucketFormatCanonical && c.TextBucketFormat != bucketFormatShortest {
		errs = errors.Join(errs, fmt.Errorf("text_bucket_format must be %q or %q, got %q", bucketFormatCanonical, bucketFormatShortest, c.TextBucketFormat))
	}
	if c.Namespace != "" && !model.LegacyValidation.IsValidMetricName(c.Namespace) {
		errs = errors.Join(errs, fmt.Errorf("namespace %q is not a valid Prometheus metric name prefix", c.Namespace))
	}
	for name := range c.ConstLabels {
		if !model.LegacyValidation.IsValidLabelName(name) || len(name) >= 2 && name[:2] == "__" {
			errs = errors.Join(errs, fmt.Errorf("const_labels: %q is not a valid Prometheus label name", name))
		}
	}
	return errs
}

// withSuffixes and utf8Allowed read the translation strategy as the contrib
// exporter does.
func (c *Config) withSuffixes() bool {
	return c.TranslationStrategy == underscoreEscapingWithSuffixes || c.TranslationStrategy == noUTF8EscapingWithSuffixes
}

func (c *Config) utf8Allowed() bool {
	return c.TranslationStrategy == noUTF8EscapingWithSuffixes || c.TranslationStrategy == noTranslation
}
