package promstreamexporter // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/confighttp"
)

const (
	defaultEndpoint         = "localhost:9464"
	defaultMetricExpiration = 5 * time.Minute
	metricsPath             = "/metrics"
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

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	srv := confighttp.NewDefaultServerConfig()
	srv.NetAddr.Endpoint = defaultEndpoint
	return &Config{ServerConfig: srv, MetricExpiration: defaultMetricExpiration}
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
	return errs
}
