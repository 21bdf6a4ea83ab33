package gatewayreceiver // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver"

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
)

// Default endpoints sit next to, never on, the standard OTLP receiver's
// 4317/4318, so a collector can run both.
const (
	defaultGRPCEndpoint  = "localhost:14317"
	defaultHTTPEndpoint  = "localhost:14318"
	defaultFlushInterval = 5 * time.Second
	tracesURLPath        = "/v1/traces"
)

// Config is the gateway receiver's configuration.
type Config struct {
	// Protocols are the servers gateways export spans to. Both are on by
	// default; `enabled: false` turns one off.
	Protocols Protocols `mapstructure:"protocols"`
	// FlushInterval is how often the counted requests are emitted downstream
	// as delta sums (one point per label set touched in the interval).
	FlushInterval time.Duration `mapstructure:"flush_interval"`
	// Health polls and receives upstream health (config_health.go); off
	// unless the section is present.
	Health configoptional.Optional[HealthConfig] `mapstructure:"health"`

	// prevent unkeyed literal initialization
	_ struct{}
}

// Protocols holds the OTLP servers of the receiver.
type Protocols struct {
	GRPC configoptional.Optional[configgrpc.ServerConfig] `mapstructure:"grpc"`
	HTTP configoptional.Optional[confighttp.ServerConfig] `mapstructure:"http"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	grpcCfg := configgrpc.NewDefaultServerConfig()
	grpcCfg.NetAddr.Endpoint = defaultGRPCEndpoint
	httpCfg := confighttp.NewDefaultServerConfig()
	httpCfg.NetAddr.Endpoint = defaultHTTPEndpoint
	return &Config{
		Protocols: Protocols{
			GRPC: configoptional.Some(grpcCfg),
			HTTP: configoptional.Some(httpCfg),
		},
		FlushInterval: defaultFlushInterval,
		Health:        configoptional.Default(defaultHealthConfig()),
	}
}

// Validate checks the receiver configuration.
func (c *Config) Validate() error {
	var errs error
	if !c.Protocols.GRPC.HasValue() && !c.Protocols.HTTP.HasValue() {
		errs = errors.Join(errs, errors.New("protocols: at least one of grpc and http must be enabled"))
	}
	if c.Protocols.GRPC.HasValue() && c.Protocols.GRPC.Get().NetAddr.Endpoint == "" {
		errs = errors.Join(errs, errors.New("protocols.grpc.endpoint must not be empty"))
	}
	if c.Protocols.HTTP.HasValue() && c.Protocols.HTTP.Get().NetAddr.Endpoint == "" {
		errs = errors.Join(errs, errors.New("protocols.http.endpoint must not be empty"))
	}
	if c.FlushInterval <= 0 {
		errs = errors.Join(errs, fmt.Errorf("flush_interval must be positive, got %v", c.FlushInterval))
	}
	errs = errors.Join(errs, c.validateHealth())
	return errs
}
