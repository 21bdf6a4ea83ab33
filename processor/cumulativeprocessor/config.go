package cumulativeprocessor // import "github.com/otelgateway/otelgateway/processor/cumulativeprocessor"

import (
	"fmt"
	"time"
)

const defaultMaxStale = 5 * time.Minute

// Config is the cumulative processor's configuration.
type Config struct {
	// MaxStale is how long a stream may go without a new point before its
	// state is dropped. A stream that comes back afterwards starts again from
	// zero with a new start time, which Prometheus reads as a counter reset.
	MaxStale time.Duration `mapstructure:"max_stale"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{MaxStale: defaultMaxStale}
}

// Validate checks the processor configuration.
func (c *Config) Validate() error {
	if c.MaxStale <= 0 {
		return fmt.Errorf("max_stale must be positive, got %v", c.MaxStale)
	}
	return nil
}
