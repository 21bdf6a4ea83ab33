package gatewayreceiver

import (
	"context"
	"io"
	"strconv"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// A request's memory: its body buffer, its scratch (span counter, events),
// both pooled, and what it is charged against max_request_bytes_in_flight.

// exportScratch is the reusable working memory of one request: its body,
// the span counter and the events read from it.
type exportScratch struct {
	counter gateway.SpanCounter
	events  []gateway.Event
	body    []byte
	// charge is what the request holds against max_request_bytes_in_flight
	// (nil: nothing, as for the pdata a traces pipeline is handed);
	// putScratch releases it.
	charge *admission.Charge
	// collect appends an event to events (bound once, so passing it
	// allocates nothing); collected counts the events it was handed.
	collect   func(*gateway.Event)
	collected int
	// ctx, while set (aggregating), makes collect hand every eventChunk
	// events to traffic as they arrive: a request of 150k spans then holds
	// 1k events (~700 KiB) at a time instead of all of them (~100 MiB and
	// the copies of a growing slice). Every caller collects only from a
	// body already known to be whole (the span counter reports once it has
	// read every span, an array of log entries is checked whole first), so
	// nothing is aggregated of a body that is then refused.
	ctx context.Context
	in  *ingest
}

// eventChunk is how many events a request holds before they are counted.
const eventChunk = 1024

// newScratch is the scratch pool's New: a request's working memory, its
// callbacks bound once.
func (in *ingest) newScratch() any {
	s := &exportScratch{counter: gateway.SpanCounter{Detect: in.detect, Dimensions: in.spanKeys}, in: in}
	// What decoding a protobuf body builds is charged with its bytes.
	s.counter.Reserve = func(n int64) error { return s.charge.Add(n) }
	s.collect = func(e *gateway.Event) {
		s.events = append(s.events, *e)
		s.collected++
		if len(s.events) == eventChunk && s.ctx != nil {
			s.in.events(s.ctx, s.events)
			clear(s.events)
			s.events = s.events[:0]
		}
	}
	return s
}

// maxPooledBody is the largest body buffer kept for reuse (a typical
// gateway batch is tens to a few hundred KiB); larger ones are dropped after
// their request. A request waiting for its body holds one pooled buffer at
// most, so slow or stalled uploads cannot pin large buffers.
const maxPooledBody = 256 << 10

// maxPooledEvents bounds the events a pooled scratch keeps room for.
const maxPooledEvents = 4096

func (in *ingest) getScratch() *exportScratch {
	return in.scratch.Get().(*exportScratch)
}

// putScratch pools s again. The events' and the counter's strings borrow
// the body, so all of them are dropped together; a request's scratch is
// taken only once its body has been read (handleTraces, handleLog), so a
// stalled upload holds at most one pooled body buffer.
func (in *ingest) putScratch(s *exportScratch) {
	s.charge.Release()
	s.charge = nil
	s.counter.Release()
	clear(s.events)
	s.events, s.collected, s.ctx = s.events[:0], 0, nil
	if cap(s.events) > maxPooledEvents {
		s.events = nil
	}
	in.putBody(s.body)
	s.body = nil
	in.scratch.Put(s)
}

// getBody returns an empty body buffer, pooled when one is free.
func (in *ingest) getBody() []byte {
	if b, ok := in.bodies.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

// putBody pools b for reuse unless it is large.
func (in *ingest) putBody(b []byte) {
	if b != nil && cap(b) <= maxPooledBody {
		in.bodies.Put(&b)
	}
}

// readBody reads rd, a body of declared size (Content-Length; 0 or less:
// unknown), into a body buffer, pooled when one is free; the caller puts it
// back (putBody, or with the request's scratch).
func (in *ingest) readBody(rd io.Reader, size int64) ([]byte, error) {
	return readAll(in.getBody(), rd, size)
}

// minBuffer is the smallest body buffer; it grows only as bytes arrive
// (growBody), never to what a Content-Length announces alone, so a client
// that announces a huge body and sends little costs little.
const minBuffer = 16 << 10

// readAll appends rd's bytes to dst (io.ReadAll into a reused buffer). size
// is the body's declared size (Content-Length; 0 or less: unknown), the
// most the buffer grows to while it holds no more (growBody).
func readAll(dst []byte, rd io.Reader, size int64) ([]byte, error) {
	if cap(dst) < minBuffer {
		dst = make([]byte, 0, minBuffer)
	}
	for {
		if len(dst) == cap(dst) {
			dst = growBody(dst, size)
		}
		n, err := rd.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst, err
		}
	}
}

// growBody returns full with room for more: twice its capacity, but no
// more than the declared size (and a byte, to read the end without growing
// again) while that is larger than what has arrived. Doubling keeps what a
// body leaves behind (the buffers it outgrew, garbage until the next GC) at
// most its own size; append's growth (1.25× past 256 bytes) left four times
// a 19 MiB body behind, and copied it as often. Never more than twice what
// has arrived: a client that announces a large body and sends little still
// costs little.
func growBody(full []byte, size int64) []byte {
	n := 2 * cap(full)
	if size > int64(len(full)) && size <= int64(n) {
		n = int(size) + 1
	}
	b := make([]byte, len(full), n)
	copy(b, full)
	return b
}

// Decode weights: what holding and decoding a body costs, per body byte,
// charged against max_request_bytes_in_flight (measured: pdata's protobuf
// unmarshal allocates ~5× the body, its JSON unmarshal ~2.5× (JSON bodies
// are ~2.5× larger for the same spans); the direct protobuf path keeps
// only the body and the events; encoding/json log decoding ~2×).
const (
	weightDirectProto = 1
	weightPdataProto  = 6
	weightOTLPJSON    = 4
	weightLogJSON     = 3
)

// chargeDecode charges request s what decoding its body into pdata would
// hold (cost), where that is more than weight per body byte (what it was
// charged: a legitimate export costs less, e.g. about 3.5× its body for
// Kong spans in JSON), and returns ErrBusy's error while others hold the
// room (429 / Unavailable). A body that costs more than weight per byte and
// more than all of max_request_bytes_in_flight (a flood of empty elements:
// 20 MiB of empty spans held over 4 GB in pdata) is refused (413 /
// ResourceExhausted, too_large: no wait makes room for it), with the
// message returned, where a lone legitimate export always passes.
func (in *ingest) chargeDecode(s *exportScratch, cost gateway.DecodeCost, weight int64, encoding string) (tooLarge string, busy error) {
	extra := cost.Bytes - weight*int64(len(s.body))
	if extra <= 0 {
		return "", nil
	}
	if limit := in.admit.Limit(); limit > 0 && cost.Bytes > limit {
		return "decoding this OTLP " + encoding + " body would hold about " + strconv.FormatInt(cost.Bytes, 10) + " bytes (" +
			elementsOf(cost) + ", " + strconv.FormatInt(cost.Elements, 10) +
			" elements in all), more than limits.max_request_bytes_in_flight (" + strconv.FormatInt(limit, 10) + "); send smaller batches", nil
	}
	if err := s.charge.Add(extra); err != nil {
		return "", err
	}
	return "", nil
}

// elementsOf names the spans or data points of a costed body.
func elementsOf(cost gateway.DecodeCost) string {
	if cost.Points > 0 {
		return strconv.FormatInt(cost.Points, 10) + " data points"
	}
	return strconv.FormatInt(cost.Spans, 10) + " spans"
}
