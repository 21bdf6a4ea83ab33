package promstreamexporter

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/collector/confmap"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/foldlog"
	"github.com/otelgateway/otelgateway/internal/rename"
)

// Every bound the exporter keeps on what it holds and serves is in the
// `limits` section, here: its defaults, its validation, the keys it
// replaced, and the log lines that say when a bound refuses series. The
// README's "Limits" table documents each with its unit and the memory it
// implies.

const (
	// defaultMaxSeries holds every series the pipeline behind it makes by
	// default (TestDefaultBoundsAgree): the cumulative processor's default
	// max_streams (1.25M, every stream of the gateway receiver's default
	// tuples) and its overflow streams, the health gauges (a series per
	// state, at most 8, of each of the receiver's default
	// limits.max_pushed_targets, 100,000, and the seeds' 20,000 polled
	// targets, and as many upstream counts: 1.92M at most), and target_info.
	// A ceiling, not a reservation: series cost memory only when they exist
	// (about 0.4 KiB a counter, 0.6 KiB a histogram of 15 buckets:
	// TestMemoryPerSeries).
	defaultMaxSeries  = 3_500_000
	defaultMaxScrapes = 4
	// defaultMaxGzipKeptBytes bounds the compressed pages gzip scrapes keep
	// (series/gzip.go): about 8 % of the text exposition for each format
	// scraped with gzip (kong200k: 4.9 MB for 60 MB of text,
	// BenchmarkGzipScrape), so 64 MiB covers some 800 MB of exposition
	// scraped in one format.
	defaultMaxGzipKeptBytes = 64 << 20
	// defaultMaxGzipWorkers: a gzip scrape compresses on up to two
	// goroutines besides its own (series/gzippipe.go), and never more than
	// GOMAXPROCS − 1: one on 2 cores; with max_concurrent_scrapes 4, at
	// most 8 goroutines.
	defaultMaxGzipWorkers = 2
)

// LimitsConfig is the `limits` section.
type LimitsConfig struct {
	// MaxSeries bounds the series held; points that would create more are
	// dropped and counted (0: no limit).
	MaxSeries int64 `mapstructure:"max_series"`
	// MaxConcurrentScrapes bounds scrapes served at once; beyond it a scrape
	// gets 503 with Retry-After.
	MaxConcurrentScrapes int `mapstructure:"max_concurrent_scrapes"`
	// MaxGzipKeptBytes bounds the memory of the compressed pages gzip
	// scrapes keep to splice into the next one, in bytes; past it pages
	// are compressed anew on each gzip scrape (0: no limit).
	MaxGzipKeptBytes int64 `mapstructure:"max_gzip_kept_bytes"`
	// MaxGzipWorkers bounds the goroutines that compress one gzip scrape's
	// pages while its own renders the next (at most GOMAXPROCS − 1; 0: the
	// scrape's goroutine compresses).
	MaxGzipWorkers int `mapstructure:"max_gzip_workers"`

	// prevent unkeyed literal initialization
	_ struct{}
}

func defaultLimits() LimitsConfig {
	return LimitsConfig{MaxSeries: defaultMaxSeries, MaxConcurrentScrapes: defaultMaxScrapes, MaxGzipKeptBytes: defaultMaxGzipKeptBytes,
		MaxGzipWorkers: defaultMaxGzipWorkers}
}

func (l *LimitsConfig) validate() error {
	var errs error
	if l.MaxSeries < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_series must not be negative, got %d", l.MaxSeries))
	}
	if l.MaxConcurrentScrapes <= 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_concurrent_scrapes must be positive, got %d", l.MaxConcurrentScrapes))
	}
	if l.MaxGzipKeptBytes < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_gzip_kept_bytes must not be negative, got %d (0 for no limit)", l.MaxGzipKeptBytes))
	}
	if l.MaxGzipWorkers < 0 {
		errs = errors.Join(errs, fmt.Errorf("limits.max_gzip_workers must not be negative, got %d (0 compresses on the scrape's goroutine)", l.MaxGzipWorkers))
	}
	return errs
}

// renamedKeys are the bounds' keys before the limits section: each still
// works, with a deprecation warning at start. (Neither is a key of the
// contrib exporter's, so drop-in configs never meet the warning.)
var renamedKeys = []rename.Key{
	{Old: "max_series", New: "limits::max_series"},
	{Old: "max_concurrent_scrapes", New: "limits::max_concurrent_scrapes"},
}

// Unmarshal reads the config, taking each deprecated key of renamedKeys as
// its new one.
func (c *Config) Unmarshal(conf *confmap.Conf) error {
	moved, err := rename.Unmarshal(conf, renamedKeys, c)
	if err != nil {
		return err
	}
	c.renamed = moved
	c.recordPresetKeys(conf)
	return nil
}

// newSeriesFolds is the log of limits.max_series (internal/foldlog).
func newSeriesFolds(c *Config, log *zap.Logger) *foldlog.Logger {
	if c.Limits.MaxSeries <= 0 {
		return nil
	}
	return foldlog.New(log, foldlog.Bound{
		Key: "limits.max_series", Limit: c.Limits.MaxSeries, Unit: "series", Counted: "points",
		Folded: "points of new series are dropped (not exposed) until series go " + c.MetricExpiration.String() +
			" (metric_expiration) without a point",
		Cost: "about 0.4 KiB per counter or gauge series, 0.6 KiB per histogram series of 15 buckets",
	})
}
