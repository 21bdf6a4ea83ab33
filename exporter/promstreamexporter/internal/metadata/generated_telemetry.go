// Written by hand in the style of mdatagen's output; keep it in step with the
// telemetry section of ../../metadata.yaml.

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
	// ExporterPromstreamSeries is the number of series served (observable).
	ExporterPromstreamSeries metric.Int64ObservableGauge
	// ExporterPromstreamScrapes counts scrapes by outcome.
	ExporterPromstreamScrapes metric.Int64Counter
	// ExporterPromstreamScrapeBytes counts bytes written to scrapers.
	ExporterPromstreamScrapeBytes metric.Int64Counter
	// ExporterPromstreamDroppedPoints counts points not exposed, by reason.
	ExporterPromstreamDroppedPoints metric.Int64Counter
	// ExporterPromstreamExpiredSeries counts series removed by
	// metric_expiration.
	ExporterPromstreamExpiredSeries metric.Int64Counter

	registration metric.Registration
}

// NewTelemetryBuilder creates every instrument of the exporter; seriesCount
// is called at each collection of the series gauge.
func NewTelemetryBuilder(settings component.TelemetrySettings, seriesCount func() int64) (*TelemetryBuilder, error) {
	meter := Meter(settings)
	var tb TelemetryBuilder
	var err, errs error
	tb.ExporterPromstreamSeries, err = meter.Int64ObservableGauge(
		"otelcol_exporter_promstream_series",
		metric.WithDescription("Series currently served on /metrics. [Development]"),
		metric.WithUnit("{series}"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamScrapes, err = meter.Int64Counter(
		"otelcol_exporter_promstream_scrapes",
		metric.WithDescription("Scrapes served, by outcome (ok, aborted: the exposition could not be written completely). [Development]"),
		metric.WithUnit("{scrape}"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamScrapeBytes, err = meter.Int64Counter(
		"otelcol_exporter_promstream_scrape_bytes",
		metric.WithDescription("Bytes of exposition written to scrapers. [Development]"),
		metric.WithUnit("By"),
	)
	errs = errors.Join(errs, err)
	tb.ExporterPromstreamDroppedPoints, err = meter.Int64Counter(
		"otelcol_exporter_promstream_dropped_points",
		metric.WithDescription("Data points not exposed, by reason (delta_temporality, unsupported_type, type_conflict, invalid_name). [Development]"),
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
		return nil
	}, tb.ExporterPromstreamSeries)
	return &tb, err
}

// Shutdown unregisters the observable callback.
func (tb *TelemetryBuilder) Shutdown() {
	if tb.registration != nil {
		_ = tb.registration.Unregister()
	}
}
