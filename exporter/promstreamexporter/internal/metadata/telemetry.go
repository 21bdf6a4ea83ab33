// Written by hand, in the shape mdatagen would generate from the telemetry
// section of ../../metadata.yaml; metadata_test.go checks every instrument
// against that file (internal/metadatacheck).

package metadata

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"

	"go.opentelemetry.io/collector/component"
)

// Meter returns the meter the exporter's own telemetry is recorded with.
func Meter(settings component.TelemetrySettings) metric.Meter {
	return settings.MeterProvider.Meter(ScopeName)
}

// TelemetryBuilder holds the exporter's internal telemetry instruments.
type TelemetryBuilder struct {
	ExporterPromstreamSeries         metric.Int64ObservableGauge
	ExporterPromstreamFamilies       metric.Int64ObservableGauge
	ExporterPromstreamScrapes        metric.Int64Counter
	ExporterPromstreamScrapeBytes    metric.Int64Counter
	ExporterPromstreamScrapeDuration metric.Float64Histogram
	ExporterPromstreamDroppedPoints  metric.Int64Counter
	ExporterPromstreamExpiredSeries  metric.Int64Counter

	registration metric.Registration
}

// NewTelemetryBuilder creates every instrument of the exporter; seriesCount
// and familyCount are called at each collection of the observable gauges.
func NewTelemetryBuilder(settings component.TelemetrySettings, seriesCount, familyCount func() int64) (*TelemetryBuilder, error) {
	meter := Meter(settings)
	var tb TelemetryBuilder
	var err, errs error
	tb.ExporterPromstreamSeries, err = meter.Int64ObservableGauge(
		"otelcol_exporter_promstream_series",
		metric.WithDescription("Series currently served on /metrics. [Development]"),
		metric.WithUnit("{series}"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamFamilies, err = meter.Int64ObservableGauge(
		"otelcol_exporter_promstream_families",
		metric.WithDescription("Metric families known to the exporter. [Development]"),
		metric.WithUnit("{family}"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamScrapes, err = meter.Int64Counter(
		"otelcol_exporter_promstream_scrapes",
		metric.WithDescription("Scrapes, by format and outcome (ok; aborted: the exposition could not be written completely; timeout; rejected: over max_concurrent_scrapes; bad_request). [Development]"),
		metric.WithUnit("{scrape}"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamScrapeBytes, err = meter.Int64Counter(
		"otelcol_exporter_promstream_scrape_bytes",
		metric.WithDescription("Bytes of exposition rendered for scrapers, before compression. [Development]"),
		metric.WithUnit("By"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamScrapeDuration, err = meter.Float64Histogram(
		"otelcol_exporter_promstream_scrape_duration",
		metric.WithDescription("Time to write a scrape's body, by format and outcome (ok, aborted, timeout). [Development]"),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamDroppedPoints, err = meter.Int64Counter(
		"otelcol_exporter_promstream_dropped_points",
		metric.WithDescription("Data points not exposed, by reason (delta_temporality, unsupported_type, type_conflict, invalid_name, max_series, invalid_point). [Development]"),
		metric.WithUnit("{datapoint}"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamExpiredSeries, err = meter.Int64Counter(
		"otelcol_exporter_promstream_expired_series",
		metric.WithDescription("Series removed after metric_expiration without an update. [Development]"),
		metric.WithUnit("{series}"),
	)
	errs = errors.Join(errs, err)
	if errs != nil {
		return nil, errs
	}
	tb.registration, err = meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(tb.ExporterPromstreamSeries, seriesCount())
		o.ObserveInt64(tb.ExporterPromstreamFamilies, familyCount())
		return nil
	}, tb.ExporterPromstreamSeries, tb.ExporterPromstreamFamilies)
	return &tb, err
}

// Shutdown unregisters the observable callback.
func (tb *TelemetryBuilder) Shutdown() {
	if tb.registration != nil {
		_ = tb.registration.Unregister()
	}
}
