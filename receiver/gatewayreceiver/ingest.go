package gatewayreceiver

import (
	"context"
	"sync"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// ingest is the receiver's transport-agnostic core, shared by the gRPC and
// HTTP paths (as otlpreceiver's trace.Receiver is): spans or log entries
// become gateway events (internal/gateway), the events are counted into
// the traffic aggregator (internal/traffic), and spans go on to the traces
// pipeline when the receiver is in one. Each request gets its working
// memory from here (request.go) and is charged for it against
// max_request_bytes_in_flight.
type ingest struct {
	// traffic counts the events; only when metrics is set (the receiver is
	// in a metrics pipeline).
	traffic    *traffic.Aggregator
	metrics    bool
	nextTraces consumer.Traces // nil when not in a traces pipeline
	telemetry  *metadata.TelemetryBuilder
	// rates are sampling_rates by gateway kind.
	rates []float64
	// admit bounds the request bytes held at once across every ingest
	// path (internal/admission).
	admit *admission.Limiter
	// folds log the events traffic folds into overflow tuples
	// (limits.max_tuples, limits.max_gateways).
	folds *folds
	// detect and spanKeys configure each request's span counter.
	detect   gateway.Kind
	spanKeys []gateway.AttrKey
	// pushed maps the gateways' own pushed metrics (metrics_push.go), and
	// holds the Kong claims the events here are checked against.
	pushed *pushed
	// scratch hands each concurrent request its own *exportScratch; bodies
	// holds request body buffers (*[]byte) up to maxPooledBody.
	scratch sync.Pool
	bodies  sync.Pool
}

// traces counts the gateway root spans of one export, then hands the spans
// to the traces pipeline if there is one. It is the core of gRPC and of the
// HTTP paths that need pdata. Spans are mapped before the aggregator's lock
// is taken, so concurrent exports only serialise on the series updates.
//
// The spans are counted before they are forwarded (after ConsumeTraces the
// receiver no longer owns td): if the traces pipeline refuses them and the
// client retries, that export is counted again.
func (in *ingest) traces(ctx context.Context, td ptrace.Traces) error {
	if in.metrics {
		s := in.getScratch()
		s.aggregating(ctx)
		examined, counted := s.counter.Count(td, s.collect)
		in.record(ctx, s, examined, counted)
		in.putScratch(s)
	}
	if in.nextTraces != nil {
		return in.nextTraces.ConsumeTraces(ctx, td)
	}
	return nil
}

// proto counts the gateway root spans of an OTLP protobuf body without
// unmarshalling it into pdata (only for a receiver in no traces pipeline).
// A malformed body counts nothing.
func (in *ingest) proto(ctx context.Context, s *exportScratch, body []byte) error {
	s.aggregating(ctx)
	examined, counted, err := s.counter.CountProto(body, s.collect)
	if err != nil {
		return err
	}
	in.record(ctx, s, examined, counted)
	return nil
}

// record counts the events left in s and the spans.
func (in *ingest) record(ctx context.Context, s *exportScratch, examined, counted int) {
	in.events(ctx, s.events)
	in.telemetry.ReceiverGatewaySpans.Add(ctx, int64(counted), metric.WithAttributeSet(spansCounted))
	in.telemetry.ReceiverGatewaySpans.Add(ctx, int64(examined-counted), metric.WithAttributeSet(spansIgnored))
}

// events weighs events by their sampling and counts them into traffic, then
// records what traffic did with them.
func (in *ingest) events(ctx context.Context, events []gateway.Event) {
	var sampling [4]int64 // by gateway.Sampling
	for i := range events {
		events[i].Weighted(in.rates)
		sampling[events[i].Sampling]++
	}
	for s, set := range samplingSets {
		if n := sampling[s]; n > 0 && set.Len() > 0 {
			in.telemetry.ReceiverGatewaySpanSampling.Add(ctx, n, metric.WithAttributeSet(set))
		}
	}
	in.pushed.supersede(events)
	c := in.traffic.Add(events)
	if c.Overflowed > 0 {
		in.folds.tuples.Folded(c.Overflowed - c.GatewaysOverflowed)
		in.folds.gateways.Folded(c.GatewaysOverflowed)
	}
	if c.Truncated > 0 {
		in.telemetry.ReceiverGatewayLabelValuesTruncated.Add(ctx, c.Truncated)
	}
	in.telemetry.ReceiverGatewayEvents.Add(ctx, int64(len(events))-c.NotCounted-c.Overflowed-c.Superseded, metric.WithAttributeSet(eventsCounted))
	if c.Superseded > 0 {
		in.telemetry.ReceiverGatewayEvents.Add(ctx, c.Superseded, metric.WithAttributeSet(eventsSuperseded))
	}
	if c.NotCounted > 0 {
		in.telemetry.ReceiverGatewayEvents.Add(ctx, c.NotCounted, metric.WithAttributeSet(eventsNotCounted))
	}
	if c.Overflowed > 0 {
		in.telemetry.ReceiverGatewayEvents.Add(ctx, c.Overflowed, metric.WithAttributeSet(eventsOverflow))
	}
}

// samplingSets are the sampling attribute sets by gateway.Sampling (none:
// log entries, not recorded).
var samplingSets = [...]attribute.Set{
	gateway.SamplingUnknown:    attribute.NewSet(attribute.String("sampling", "unknown")),
	gateway.SamplingThreshold:  attribute.NewSet(attribute.String("sampling", "threshold")),
	gateway.SamplingConfigured: attribute.NewSet(attribute.String("sampling", "configured")),
}

var (
	spansCounted = attribute.NewSet(attribute.String("outcome", "counted"))
	spansIgnored = attribute.NewSet(attribute.String("outcome", "ignored"))

	eventsCounted    = attribute.NewSet(attribute.String("outcome", "counted"))
	eventsNotCounted = attribute.NewSet(attribute.String("outcome", "not_counted"))
	eventsOverflow   = attribute.NewSet(attribute.String("outcome", "overflow"))
	eventsSuperseded = attribute.NewSet(attribute.String("outcome", "superseded"))
)

// aggregating makes s hand its events to traffic in chunks as they are
// collected, when the receiver is in a metrics pipeline.
func (s *exportScratch) aggregating(ctx context.Context) {
	if s.in.metrics {
		s.ctx = ctx
	}
}
