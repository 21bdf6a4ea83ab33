// Written by hand in the style of mdatagen's output; keep it in step with the
// telemetry section of ../../metadata.yaml.

package metadata

import (
	"errors"

	"go.opentelemetry.io/otel/metric"

	"go.opentelemetry.io/collector/component"
)

// Meter returns the meter the receiver's own telemetry is recorded with.
func Meter(settings component.TelemetrySettings) metric.Meter {
	return settings.MeterProvider.Meter(ScopeName)
}

// TelemetryBuilder holds the receiver's internal telemetry instruments.
type TelemetryBuilder struct {
	// ReceiverGatewayRequests counts export requests by transport and outcome.
	ReceiverGatewayRequests metric.Int64Counter
	// ReceiverGatewaySpans counts spans examined, by outcome (counted as a
	// request, or ignored because they are not gateway root spans).
	ReceiverGatewaySpans metric.Int64Counter
	// ReceiverGatewayEvents counts normalized events (root spans and log
	// entries) by outcome (counted; not_counted: the profile does not count
	// it, e.g. no route under kong; overflow: folded into the
	// otel.metric.overflow tuple by max_series).
	ReceiverGatewayEvents metric.Int64Counter
	// ReceiverGatewayLogEntries counts access-log entries by format and
	// outcome (accepted, rejected).
	ReceiverGatewayLogEntries metric.Int64Counter
	// ReceiverGatewayFlushedPoints counts delta points handed downstream, by
	// outcome (sent, retried, dropped).
	ReceiverGatewayFlushedPoints metric.Int64Counter
}

// NewTelemetryBuilder creates every instrument of the receiver.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := Meter(settings)
	var tb TelemetryBuilder
	var err, errs error
	tb.ReceiverGatewayRequests, err = meter.Int64Counter(
		"otelcol_receiver_gateway_requests",
		metric.WithDescription("Export requests received, by transport and outcome (accepted, partially_accepted, malformed, unsupported_media_type, too_large, method_not_allowed, refused). [Development]"),
		metric.WithUnit("{request}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewaySpans, err = meter.Int64Counter(
		"otelcol_receiver_gateway_spans",
		metric.WithDescription("Spans examined, by outcome (counted: a gateway root span counted as one request; ignored: any other span). [Development]"),
		metric.WithUnit("{span}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayEvents, err = meter.Int64Counter(
		"otelcol_receiver_gateway_events",
		metric.WithDescription("Normalized gateway events (root spans, log entries), by outcome (counted; not_counted: the profile does not count it; overflow: folded into the otel.metric.overflow tuple). [Development]"),
		metric.WithUnit("{event}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayLogEntries, err = meter.Int64Counter(
		"otelcol_receiver_gateway_log_entries",
		metric.WithDescription("Access-log entries received, by format (kong_http_log, apisix_http_logger) and outcome (accepted, rejected). [Development]"),
		metric.WithUnit("{entry}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayFlushedPoints, err = meter.Int64Counter(
		"otelcol_receiver_gateway_flushed_points",
		metric.WithDescription("Delta data points flushed downstream, by outcome (sent; retried: kept for the next flush after a retryable error; dropped: refused permanently). [Development]"),
		metric.WithUnit("{datapoint}"),
	)
	errs = errors.Join(errs, err)
	return &tb, errs
}
