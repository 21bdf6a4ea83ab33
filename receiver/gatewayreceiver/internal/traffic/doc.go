// Package traffic is the gateway receiver's traffic path: it counts
// requests (gateway events) into the series of one flush window, named by a
// naming profile and held within the receiver's bounds, and renders each
// window as delta metrics.
//
// The receiver builds it with New, counts events with Add, ends a window
// with Take, renders it with Window.Metrics (in chunks), puts it back with
// Merge when the pipeline asks for a retry, and checkpoints it with
// Window.AppendPoints, ReadPoints and Fingerprint.
//
// # Words
//
// Each word names one thing, here and in the code.
//
//   - event: one request, as every input becomes (gateway.Event).
//   - profile: how events are named: otel (the semantic conventions), kong
//     or apisix (the names, labels and buckets of those gateways' Prometheus
//     plugins), one file each (profile_otel.go, profile_kong.go,
//     profile_apisix.go).
//   - tuple: every label an event has under the profile, as its key
//     function answers (kongKey), encoded as one byte string (tuple.go).
//   - family: one metric of the profile: its name, kind (sum, explicit or
//     exponential histogram), what it measures of an event (measure.go)
//     and its view.
//   - view: the labels some families keep of a tuple (view.go). Families
//     that name the same view share its rows.
//   - row: one label set of a view (a tuple as the view keeps it) with the
//     series of each of the view's families. A view's rows are its table
//     (layout.go).
//   - series: one family's counts for one row over the current window:
//     total, count, sum and buckets (layout.go).
//   - handle: what a tuple is found by, with one map lookup per event: its
//     row in every view. A held tuple is one handle; the bounds count them,
//     and fold the events of tuples beyond them into an overflow tuple
//     (bounds.go).
//   - window: the time between two flushes. Take ends it and returns its
//     points (window.go).
//   - point: one series of a window, as emitted (metrics.go renders them).
//
// # One span, from the wire to a pdata point
//
// A Kong request (its root SERVER span and its kong.balancer child),
// exported as OTLP/HTTP protobuf to a receiver in a metrics pipeline only,
// under the kong profile; the functions in the order they are first
// called, helpers left out.
//
//  1. The receiver's transport: httpServer.handleTraces (http.go) checks
//     the method and Content-Type, admits the request within
//     max_request_bytes_in_flight (readBody, admitRequest) and reads its
//     body (ingest.readBody, ingest.getScratch in request.go), then hands
//     it to ingest.proto (ingest.go).
//  2. The gateway package: SpanCounter.CountProto (counter.go) reads the
//     body without building pdata: readProto, decodeResourceSpans,
//     decodeScopeSpans, decodeSpan, decodeSpanFast (otlp_proto.go) keep
//     each span's known attributes (lookupAttrKey, attrs.go). endResource
//     (spans.go) finds the root SERVER span (isRoot), maps it (mapRoot) and
//     completes it from its balancer child (completeFromChildren;
//     kongBalancerTry, kong.go); report hands the event to the request.
//  3. The receiver's core: ingest.record and ingest.events (ingest.go)
//     weigh the events by their sampling (gateway.Event.Weighted) and call
//     Add.
//  4. Here: Add (add.go) first prepares each event without the lock
//     (prepare): it asks the profile for the tuple (kongKey,
//     profile_kong.go), encodes it (encodeTuple, tuple.go) into the Add's
//     batch, cuts long label values and draws the exemplar's random number.
//     Then it takes the lock once and records the batch (record): each
//     event's handle is found by its encoding in one map lookup or, for a
//     new tuple, admitted within the bounds (admitEvent, admit in
//     bounds.go). Then, for each family with a value for the event
//     (valueOf, measure.go), it finds the family's row through the handle
//     (resolve: mask.whole or mask.encodeFrom, view.go; table.rowAt,
//     layout.go, the first time) and updates its series (row.add,
//     layout.go).
//  5. The receiver's flusher: every flush_interval flusher.flush
//     (flush.go) calls Take (window.go), which moves every series updated
//     in the window into a point (Window.drain, Window.take) and lets go of
//     what was not used (endWindow: rows after a window, tuples after
//     tuple_expiry), in steps between which Add goes on (yield).
//  6. flusher.emit hands the points downstream in chunks, each rendered by
//     Window.Metrics (metrics.go): a point's label set is decoded
//     (point.tuple, decodeTuple in tuple.go), its pdata point made
//     (newPoint) and labelled by its family (pointLabels.write,
//     writeLabels; kongRequestLabels in profile_kong.go).
//     flusher.saveCheckpoint (checkpoint.go in the receiver) then keeps
//     what was sent.
//
// Concurrency: see Aggregator.
package traffic // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
