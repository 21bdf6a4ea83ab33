// Written by hand, in the shape mdatagen would generate from the telemetry
// section of ../../metadata.yaml; metadata_test.go checks every instrument
// against that file (internal/metadatacheck).

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
	// ReceiverGatewayRequests counts export requests by transport (http,
	// grpc) and outcome.
	ReceiverGatewayRequests metric.Int64Counter
	// ReceiverGatewaySpans counts spans examined, by outcome (counted as a
	// request, or ignored because they are not gateway root spans).
	ReceiverGatewaySpans metric.Int64Counter
	// ReceiverGatewaySpanSampling counts the gateway root spans counted as
	// requests by how their sampling is known (threshold, configured,
	// unknown).
	ReceiverGatewaySpanSampling metric.Int64Counter
	// ReceiverGatewayPushedPoints counts the data points of the gateways'
	// own pushed metrics by gateway and outcome.
	ReceiverGatewayPushedPoints metric.Int64Counter
	// ReceiverGatewayEvents counts normalized events (root spans and log
	// entries) by outcome (counted; not_counted: the profile does not count
	// it, e.g. no route under kong; overflow: folded into the
	// otel.metric.overflow tuple by max_series).
	ReceiverGatewayEvents metric.Int64Counter
	// ReceiverGatewayLogEntries counts access-log entries by format and
	// outcome (accepted, rejected).
	ReceiverGatewayLabelValuesTruncated metric.Int64Counter
	ReceiverGatewayLogEntries           metric.Int64Counter
	// ReceiverGatewayFlushedPoints counts delta points handed downstream, by
	// outcome (sent, retried, dropped).
	ReceiverGatewayFlushedPoints metric.Int64Counter
	// ReceiverGatewayHealthPolls counts admin API polls by gateway kind,
	// instance and outcome.
	ReceiverGatewayHealthPolls metric.Int64Counter
	// ReceiverGatewayHealthPollDuration is the wall time of whole polls.
	ReceiverGatewayHealthPollDuration metric.Float64Histogram
	// ReceiverGatewayHealthLastSuccess is the Unix time of a poller's last
	// fully successful poll.
	ReceiverGatewayHealthLastSuccess metric.Int64Gauge
	// ReceiverGatewayHealthTargets is the number of health table rows by
	// state.
	ReceiverGatewayHealthTargets metric.Int64Gauge
	// ReceiverGatewayHealthEvents counts pushed health events by outcome.
	ReceiverGatewayHealthEvents metric.Int64Counter
	// ReceiverGatewayCheckpoints counts checkpoints of the flushed windows
	// written or read back through the storage extension, by outcome.
	ReceiverGatewayCheckpoints metric.Int64Counter
}

// NewTelemetryBuilder creates every instrument of the receiver.
func NewTelemetryBuilder(settings component.TelemetrySettings) (*TelemetryBuilder, error) {
	meter := Meter(settings)
	var tb TelemetryBuilder
	var err, errs error
	tb.ReceiverGatewayRequests, err = meter.Int64Counter(
		"otelcol_receiver_gateway_requests",
		metric.WithDescription("Export requests received, by transport (http, grpc) and outcome (accepted, partially_accepted, malformed, unsupported_media_type, too_large, method_not_allowed, refused, throttled, unauthenticated, stalled). [Development]"),
		metric.WithUnit("{request}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewaySpans, err = meter.Int64Counter(
		"otelcol_receiver_gateway_spans",
		metric.WithDescription("Spans examined, by outcome (counted: a gateway root span counted as one request; ignored: any other span). [Development]"),
		metric.WithUnit("{span}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayPushedPoints, err = meter.Int64Counter(
		"otelcol_receiver_gateway_pushed_points",
		metric.WithDescription("Data points of the gateways' own pushed OTLP metrics (/v1/metrics, MetricsService), by gateway (kong, envoy, unknown) and outcome (mapped, passed, unmapped, no_route, zero, invalid, label_too_long, bad_labels, conflict, over_limit, unknown_gateway). [Development]"),
		metric.WithUnit("{datapoint}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewaySpanSampling, err = meter.Int64Counter(
		"otelcol_receiver_gateway_span_sampling",
		metric.WithDescription("Gateway root spans counted as requests, by how their sampling is known (threshold: the trace's OpenTelemetry ot=th threshold, counted with its adjusted count; configured: the receiver's sampling_rates, an estimate; unknown: counted as one request each). [Development]"),
		metric.WithUnit("{span}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayEvents, err = meter.Int64Counter(
		"otelcol_receiver_gateway_events",
		metric.WithDescription("Normalized gateway events (root spans, log entries), by outcome (counted; not_counted: the profile does not count it; overflow: folded into the otel.metric.overflow tuple; superseded: every family it feeds is carried by the node's pushed metrics). [Development]"),
		metric.WithUnit("{event}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayLabelValuesTruncated, err = meter.Int64Counter(
		"otelcol_receiver_gateway_label_values_truncated",
		metric.WithDescription("Label values longer than max_label_value_length bytes, cut to it (request tuples and health rows): the request still counts, under the cut value. [Development]"),
		metric.WithUnit("{value}"),
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
	tb.ReceiverGatewayHealthPolls, err = meter.Int64Counter(
		"otelcol_receiver_gateway_health_polls",
		metric.WithDescription("Admin API polls, by gateway (kong, apisix, envoy), instance and outcome (success, connection_error, timeout, http_status, malformed, pagination_loop, foreign_origin: a redirect or next page to another origin, refused; too_large: an answer over max_response_body_size, refused). [Development]"),
		metric.WithUnit("{poll}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayHealthPollDuration, err = meter.Float64Histogram(
		"otelcol_receiver_gateway_health_poll_duration",
		metric.WithDescription("Wall time of one whole poll (every page and upstream), by gateway and instance. [Development]"),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayHealthLastSuccess, err = meter.Int64Gauge(
		"otelcol_receiver_gateway_health_last_success",
		metric.WithDescription("Unix time of the last fully successful poll, by gateway and instance. [Development]"),
		metric.WithUnit("s"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayHealthTargets, err = meter.Int64Gauge(
		"otelcol_receiver_gateway_health_targets",
		metric.WithDescription("Upstream target addresses in the health table, by state. [Development]"),
		metric.WithUnit("{target}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayHealthEvents, err = meter.Int64Counter(
		"otelcol_receiver_gateway_health_events",
		metric.WithDescription("Pushed health events, by outcome (accepted, rejected, out_of_order, over_limit, throttled, clock_skew: a timestamp further than push.max_clock_skew from the collector's clock, refused). [Development]"),
		metric.WithUnit("{event}"),
	)
	errs = errors.Join(errs, err)
	tb.ReceiverGatewayCheckpoints, err = meter.Int64Counter(
		"otelcol_receiver_gateway_checkpoints",
		metric.WithDescription("Checkpoints of the flushed windows, written or read back through the storage extension, by outcome (saved, save_failed, restored, discarded_corrupt, discarded_version, discarded_config, restore_failed, discarded_unreadable). [Development]"),
		metric.WithUnit("{checkpoint}"),
	)
	errs = errors.Join(errs, err)
	return &tb, errs
}
