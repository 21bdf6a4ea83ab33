// Written by hand, in the shape mdatagen would generate from the telemetry
// section of ../../metadata.yaml; metadata_test.go checks every instrument
// against that file (internal/metadatacheck).

package metadata

import (
	"errors"

	"go.opentelemetry.io/otel/metric"

	"go.opentelemetry.io/collector/component"
)

// Meter returns the meter the processor's own telemetry is recorded with.
func Meter(settings component.TelemetrySettings) metric.Meter {
	return settings.MeterProvider.Meter(ScopeName)
}

// TelemetryBuilder holds the processor's internal telemetry instruments.
type TelemetryBuilder struct {
	// ProcessorCumulativePoints counts delta points by outcome (accumulated,
	// dropped, overflowed) and reason.
	ProcessorCumulativePoints metric.Int64Counter
	// ProcessorCumulativeStreamsTracked tracks the number of streams held in
	// memory.
	ProcessorCumulativeStreamsTracked metric.Int64UpDownCounter
	// ProcessorCumulativeStreamsLimit is the configured max_streams.
	ProcessorCumulativeStreamsLimit metric.Int64Gauge
	// ProcessorCumulativeCacheLookups counts identity-cache lookups by result
	// (hit, miss).
	ProcessorCumulativeCacheLookups metric.Int64Counter
	// ProcessorCumulativeCacheEvictions counts identity-cache evictions.
	ProcessorCumulativeCacheEvictions metric.Int64Counter
	// ProcessorCumulativeCheckpoints counts checkpoints of the streams
	// through the storage extension by outcome (saved, restored, discarded,
	// failed).
	ProcessorCumulativeCheckpoints metric.Int64Counter
}

// NewTelemetryBuilder creates every instrument of the processor.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := Meter(settings)
	var tb TelemetryBuilder
	var err, errs error
	tb.ProcessorCumulativePoints, err = meter.Int64Counter(
		"otelcol_processor_cumulative_points",
		metric.WithDescription("Delta data points processed, by outcome (accumulated, dropped, overflowed, replayed: a window the gateway receiver replayed after a restart that was already counted) and reason (gap, replaced, type_changed, bounds_changed, out_of_order, older_start, invalid). [Development]"),
		metric.WithUnit("{datapoint}"),
	)
	errs = errors.Join(errs, err)
	tb.ProcessorCumulativeStreamsTracked, err = meter.Int64UpDownCounter(
		"otelcol_processor_cumulative_streams_tracked",
		metric.WithDescription("Delta streams whose cumulative state is held in memory, overflow streams included. [Development]"),
		metric.WithUnit("{stream}"),
	)
	errs = errors.Join(errs, err)
	tb.ProcessorCumulativeStreamsLimit, err = meter.Int64Gauge(
		"otelcol_processor_cumulative_streams_limit",
		metric.WithDescription("The configured max_streams: streams beyond it fold into their metric's overflow stream. [Development]"),
		metric.WithUnit("{stream}"),
	)
	errs = errors.Join(errs, err)
	tb.ProcessorCumulativeCacheLookups, err = meter.Int64Counter(
		"otelcol_processor_cumulative_cache_lookups",
		metric.WithDescription("Series-identity cache lookups, by result (hit, miss). [Development]"),
		metric.WithUnit("{lookup}"),
	)
	errs = errors.Join(errs, err)
	tb.ProcessorCumulativeCacheEvictions, err = meter.Int64Counter(
		"otelcol_processor_cumulative_cache_evictions",
		metric.WithDescription("Series-identity cache entries evicted to make room; each costs one slow-path lookup later, never state. [Development]"),
		metric.WithUnit("{entry}"),
	)
	errs = errors.Join(errs, err)
	tb.ProcessorCumulativeCheckpoints, err = meter.Int64Counter(
		"otelcol_processor_cumulative_checkpoints",
		metric.WithDescription("Checkpoints of the streams through the storage extension, by outcome (saved, save_failed; restored, discarded_corrupt, discarded_version, discarded_config, restore_failed, discarded_unreadable). [Development]"),
		metric.WithUnit("{checkpoint}"),
	)
	errs = errors.Join(errs, err)
	return &tb, errs
}
