package cumulativeprocessor // import "github.com/otelgateway/otelgateway/processor/cumulativeprocessor"

import (
	"fmt"
	"time"

	"go.opentelemetry.io/collector/component"

	"github.com/otelgateway/otelgateway/internal/rename"
)

const (
	defaultMaxStale = 5 * time.Minute
	// defaultCheckpointInterval bounds what a crash loses of the
	// accumulation to 10s, at the cost of one write of every stream's state
	// per 10s (tens of bytes a stream).
	defaultCheckpointInterval = 10 * time.Second
)

// Emit says when cumulative points leave the processor.
type Emit string

const (
	// EmitPerBatch rewrites each delta point in place as its cumulative
	// point and forwards the batch at once (what contrib's
	// deltatocumulative does).
	EmitPerBatch Emit = "per_batch"
	// EmitInterval consumes delta points and, every interval, emits one
	// cumulative point per stream touched since the last tick.
	EmitInterval Emit = "interval"
)

// UnmarshalText normalises and checks the mode while the config is decoded,
// so a typo names itself instead of surfacing later.
func (e *Emit) UnmarshalText(text []byte) error {
	switch m := Emit(text); m {
	case EmitPerBatch, EmitInterval:
		*e = m
		return nil
	default:
		return fmt.Errorf("emit must be %q or %q, got %q", EmitPerBatch, EmitInterval, string(text))
	}
}

// Config is the cumulative processor's configuration.
type Config struct {
	// MaxStale is how long a stream may go without a new point before its
	// state is dropped. A stream that comes back afterwards starts again from
	// zero with a new start time, which Prometheus reads as a counter reset.
	MaxStale time.Duration `mapstructure:"max_stale"`

	// Limits are every bound the processor keeps on what it holds
	// (limits.go).
	Limits LimitsConfig `mapstructure:"limits"`

	// OverflowKeep names the attributes an overflow stream keeps from the
	// points it absorbs (default: collector, the gateway receiver's
	// collector_label), so that the overflow series of several collectors
	// stay apart downstream. Empty: the overflow stream carries only
	// otel.metric.overflow.
	OverflowKeep []string `mapstructure:"overflow_keep"`

	// Emit is per_batch (default) or interval.
	Emit Emit `mapstructure:"emit"`

	// Interval is the emission period of emit: interval; it must be set
	// then, and only then.
	Interval time.Duration `mapstructure:"interval"`

	// Storage is the ID of a storage extension (such as file_storage) the
	// streams are checkpointed to, so that a restart continues every
	// counter with its start time instead of resetting it. Unset: the
	// streams live in memory only.
	Storage *component.ID `mapstructure:"storage"`

	// CheckpointInterval is how often the streams are checkpointed to
	// Storage (and once more at shutdown). A crash loses at most this much
	// of the accumulation.
	CheckpointInterval time.Duration `mapstructure:"checkpoint_interval"`

	// renamed are the deprecated keys this config was written with
	// (limits.go), warned about when the processor is created.
	renamed []rename.Key

	// prevent unkeyed literal initialization
	_ struct{}
}

func createDefaultConfig() *Config {
	return &Config{
		MaxStale: defaultMaxStale,
		Limits:   defaultLimits(),
		Emit:     EmitPerBatch,
		// The gateway receiver's default collector_label.
		OverflowKeep: []string{"collector"},

		CheckpointInterval: defaultCheckpointInterval,
	}
}

// Validate checks the processor configuration. Each message names the
// field and the offending value.
func (c *Config) Validate() error {
	switch {
	case c.MaxStale <= 0:
		return fmt.Errorf("max_stale must be positive, got %v", c.MaxStale)
	case c.Limits.validate() != nil:
		return c.Limits.validate()
	case c.Emit == EmitInterval && c.Interval <= 0:
		return fmt.Errorf("interval must be positive with emit: interval, got %v", c.Interval)
	case c.Emit != EmitInterval && c.Interval != 0:
		return fmt.Errorf("interval is only used with emit: interval, got interval %v with emit: %s", c.Interval, c.Emit)
	case c.CheckpointInterval <= 0:
		return fmt.Errorf("checkpoint_interval must be positive, got %v", c.CheckpointInterval)
	}
	return nil
}
