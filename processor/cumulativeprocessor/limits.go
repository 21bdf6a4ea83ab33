package cumulativeprocessor

import (
	"fmt"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/foldlog"
	"github.com/otelgateway/otelgateway/internal/rename"
)

// Every bound the processor keeps on what it holds is in the `limits`
// section, here: its defaults, its validation, the keys it replaced, and the
// log lines that say when a bound folds data. The README's "Limits" table
// documents each with its unit and the memory it implies.

const (
	// defaultMaxStreams holds every stream the gateway receiver makes at
	// its default bounds: 101,001 label tuples (limits.max_tuples, plus an
	// overflow tuple per held gateway and one for the rest) × at most 12
	// families a tuple (the apisix profile's with LLM fields; otel 10,
	// kong 11, 6 without GenAI fields in every profile) = 1,212,012
	// (TestDefaultBoundsAgree). Streams cost memory only when they exist:
	// about 0.4 KiB a sum, 0.6–0.8 KiB an explicit histogram
	// (TestMemoryPerStream); the identity cache grows with them.
	defaultMaxStreams = 1_250_000
	defaultMaxBuckets = 160
	// minMaxBuckets: downscaling halves an index range until it fits, and
	// any range fits in 2 buckets at a low enough scale; 1 could not hold a
	// histogram with both a value below and above 1.
	minMaxBuckets = 2
)

// LimitsConfig is the `limits` section.
type LimitsConfig struct {
	// MaxStreams bounds the streams held in memory. A new stream beyond it
	// is folded into its metric's overflow stream, the one carrying
	// otel.metric.overflow=true; no stream is ever evicted to make room.
	MaxStreams int `mapstructure:"max_streams"`
	// MaxBuckets bounds the buckets of each range (positive, negative) of a
	// cumulative exponential histogram; merging downscales to stay within it.
	MaxBuckets int `mapstructure:"max_buckets"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func defaultLimits() LimitsConfig {
	return LimitsConfig{MaxStreams: defaultMaxStreams, MaxBuckets: defaultMaxBuckets}
}

func (l *LimitsConfig) validate() error {
	switch {
	case l.MaxStreams <= 0:
		return fmt.Errorf("limits.max_streams must be positive, got %d", l.MaxStreams)
	case l.MaxBuckets < minMaxBuckets:
		return fmt.Errorf("limits.max_buckets must be at least %d, got %d", minMaxBuckets, l.MaxBuckets)
	}
	return nil
}

// renamedKeys are the bounds' keys before the limits section: each still
// works, with a deprecation warning at start.
var renamedKeys = []rename.Key{
	{Old: "max_streams", New: "limits::max_streams"},
	{Old: "max_buckets", New: "limits::max_buckets"},
}

// Unmarshal reads the config, taking each deprecated key of renamedKeys as
// its new one.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	moved, err := rename.Unmarshal(conf, renamedKeys, c)
	if err != nil {
		return err
	}
	c.renamed = moved
	return nil
}

// newStreamFolds is the log of limits.max_streams (internal/foldlog).
func newStreamFolds(c *Config, log *zap.Logger) *foldlog.Logger {
	return foldlog.New(log, foldlog.Bound{
		Key: "limits.max_streams", Limit: int64(c.Limits.MaxStreams), Unit: "streams", Counted: "points",
		Folded: "points of new streams are folded into their metric's otel.metric.overflow stream (their attributes lost) until streams go " +
			c.MaxStale.String() + " (max_stale) without a point",
		Cost: "about 0.4 KiB per sum stream, 0.6–0.8 KiB per explicit histogram stream",
	})
}
