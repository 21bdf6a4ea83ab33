package gateway

import "go.opentelemetry.io/collector/pdata/ptrace"

// SpanCounter turns OTLP traces into one Event per gateway root span,
// completed from that root's child spans (Kong balancer tries, Envoy's router
// span). It reads pdata (Count, spans_pdata.go) or OTLP protobuf bytes
// (CountProto, otlp_proto.go); both reduce each ResourceSpans to spanRecs
// and hand them to the mapping (endResource, spans.go).
// It keeps scratch state between calls so a steady stream allocates nothing;
// it is not safe for concurrent use, so give each goroutine its own.
type SpanCounter struct {
	// Dimensions are span attributes (RegisterAttribute) whose values the
	// root span's event carries in Dims, at most MaxSpanDimensions.
	Dimensions []AttrKey
	// dimBuf holds the text of non-string dimension values of the call.
	dimBuf []byte

	// Reserve, when set, is asked for the bytes of every buffer the counter
	// grows while it reads a protobuf body (span records, attributes,
	// events: whole new arrays, as the old ones stay garbage until
	// collected); an error stops the read and CountProto returns it. The
	// receiver charges them to the request's admission, so the memory a
	// body of many small spans costs (an event is 536 bytes, a span record
	// 104, where a span can take 60 bytes of protobuf) is bounded with the
	// bytes in flight, not just the body.
	Reserve func(n int64) error
	// capSpans, capAttrs and capEvents are the capacities already
	// reserved in this call; refused is Reserve's error, which CountProto
	// returns as it is (not located in the body: it is not the body's).
	capSpans, capAttrs, capEvents int
	refused                       error

	// Detect forces the gateway kind; KindAuto (the zero value) detects it
	// per scope: scope kong-internal is Kong, opentelemetry-lua (or a
	// resource service.name APISIX) is APISIX, github.com/traefik/traefik
	// is Traefik, a root span with Envoy's upstream_cluster or
	// component=proxy tags is Envoy, anything else the semantic conventions.
	Detect Kind

	// The ResourceSpans being reduced: its resource's known attributes,
	// its spans and their known attributes.
	res   attrs
	spans []spanRec
	attrs attrs

	local  map[[8]byte]struct{}
	roots  map[[8]byte]int
	events []Event
	// byID indexes the resource's spans by id, for the walk from an
	// INTERNAL span up to its root (built only when one is walked).
	byID map[[8]byte]int32
	// lastTry is, per event, the try number of the balancer span that
	// filled Target (Kong's last try answers).
	lastTry []float64
}

// CountProto is Count over an OTLP ExportTraceServiceRequest in protobuf
// bytes (opentelemetry-proto collector/trace/v1), read without building
// pdata: only the fields the mappers use are kept, every other field is
// checked and skipped. It accepts and refuses exactly the bodies
// ptraceotlp.ExportRequest.UnmarshalProto does (the same wire-type, id
// length, truncation and nesting-depth checks, and the same migration of the
// deprecated instrumentation_library_spans), which the differential fuzz
// test holds it to.
//
// fn is called only when the whole body was read, so a refused body counts
// nothing. Strings in the *Event borrow body: the caller must not change or
// reuse body while it uses them.
func (c *SpanCounter) CountProto(body []byte, fn func(*Event)) (examined, counted int, err error) {
	c.start()
	if examined, err = c.readProto(body); err != nil {
		return 0, 0, err
	}
	return examined, c.report(fn), nil
}

// Count calls fn once for every root SERVER span in td (see endResource) and
// returns how many spans it examined and how many it reported. The *Event is
// valid only during the call; its strings borrow td's.
func (c *SpanCounter) Count(td ptrace.Traces, fn func(*Event)) (examined, counted int) {
	c.start()
	examined = c.readPdata(td)
	return examined, c.report(fn)
}

// start begins a call, dropping what a refused one left.
func (c *SpanCounter) start() {
	c.dimBuf = c.dimBuf[:0]
	c.events = c.events[:0]
	c.lastTry = c.lastTry[:0]
	// What the counter kept from earlier calls (maxKeptRecords at most) is
	// not the body's to pay for.
	c.capSpans, c.capAttrs, c.capEvents = cap(c.spans), cap(c.attrs), cap(c.events)
	c.refused = nil
}

// maxKeptRecords bounds the span records (and attributes) a counter keeps
// for reuse between calls; a larger export's are dropped.
const maxKeptRecords = 1 << 12

// Release drops every reference the counter keeps into the last input:
// records, attributes and events borrow its strings (the body they were
// decoded from), so a pooled counter would otherwise pin that body for as
// long as it sits in the pool, outside any admission bound. Buffers beyond
// maxKeptRecords are dropped. Call it before pooling the counter.
func (c *SpanCounter) Release() {
	c.events, c.spans, c.attrs, c.res = releaseSlice(c.events), releaseSlice(c.spans), releaseSlice(c.attrs), releaseSlice(c.res)
	c.dimBuf = releaseSlice(c.dimBuf)
	c.lastTry = c.lastTry[:0]
}

func releaseSlice[T any](s []T) []T {
	if cap(s) > maxKeptRecords {
		return nil
	}
	clear(s[:cap(s)])
	return s[:0]
}

// report hands every event of the call to fn, once all of its input was
// read: a body refused half-way reports nothing.
func (c *SpanCounter) report(fn func(*Event)) int {
	for i := range c.events {
		fn(&c.events[i])
	}
	n := len(c.events)
	c.start()
	return n
}
