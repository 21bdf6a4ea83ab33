// Written by hand in the style of mdatagen's output; keep it in step with the
// telemetry section of ../../metadata.yaml.

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
	// dropped) and, for drops, reason.
	ProcessorCumulativePoints metric.Int64Counter
	// ProcessorCumulativeStreams tracks the number of streams held in memory.
	ProcessorCumulativeStreams metric.Int64UpDownCounter
}

// NewTelemetryBuilder creates every instrument of the processor.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := Meter(settings)
	var tb TelemetryBuilder
	var err, errs error
	tb.ProcessorCumulativePoints, err = meter.Int64Counter(
		"otelcol_processor_cumulative_points",
		metric.WithDescription("Delta data points processed, by outcome (accumulated, dropped) and reason (out_of_order, older_start, type_changed). [Development]"),
		metric.WithUnit("{datapoint}"),
	)
	errs = errors.Join(errs, err)
	tb.ProcessorCumulativeStreams, err = meter.Int64UpDownCounter(
		"otelcol_processor_cumulative_streams_tracked",
		metric.WithDescription("Delta streams whose cumulative state is held in memory. [Development]"),
		metric.WithUnit("{stream}"),
	)
	errs = errors.Join(errs, err)
	return &tb, errs
}
