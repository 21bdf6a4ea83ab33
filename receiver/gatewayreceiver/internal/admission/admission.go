// Package admission bounds the request bytes the gateway receiver holds at
// once (read, buffered or being decoded) across every ingest path: OTLP over
// HTTP and gRPC, access logs and health pushes. A request is checked before
// its body is read and charged as its bytes arrive, never for what a header
// announces; beyond the bound it is refused (HTTP 429, gRPC Unavailable) so
// that one client cannot exhaust the collector's memory before any
// processor's memory_limiter could see it.
//
// Concurrency: a Limiter is safe for concurrent use; a Body belongs to its
// request's goroutine.
package admission // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"

import (
	"errors"
	"io"
	"strconv"
	"sync/atomic"
)

// ErrBusy is a request refused because the bound on bytes in flight is
// reached; retry later.
var ErrBusy = errors.New("too many request bytes in flight")

// RetryAfter is the Retry-After a refused request is answered with (s).
const RetryAfter = "1"

// Limiter counts the bytes in flight against a limit. A charge that would
// pass the limit is refused unless nothing else is in flight, so one
// request as large as the limit (bounded by max_request_body_size) still
// gets through on an idle receiver. The zero limit means no bound.
type Limiter struct {
	limit int64
	used  atomic.Int64
}

// New returns a Limiter of limit bytes (0: unlimited).
func New(limit int64) *Limiter { return &Limiter{limit: limit} }

// Acquire charges n bytes; false when the bound is reached (nothing charged).
func (l *Limiter) Acquire(n int64) bool { return l.acquire(n, 0) }

// acquire charges n more bytes to a request that holds own already: it is
// refused only when the total would pass the limit and other requests hold
// bytes too, so a request alone always gets through (its own earlier
// charges never count against it).
func (l *Limiter) acquire(n, own int64) bool {
	if l == nil || l.limit <= 0 || n <= 0 {
		if l != nil && n > 0 {
			l.used.Add(n)
		}
		return true
	}
	for {
		used := l.used.Load()
		if used > own && used+n > l.limit {
			return false
		}
		if l.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// Release returns n charged bytes.
func (l *Limiter) Release(n int64) {
	if l != nil && n > 0 {
		l.used.Add(-n)
	}
}

// Full reports whether no request could be admitted now (for a check
// before anything is read, such as a new gRPC stream).
func (l *Limiter) Full() bool {
	return l != nil && l.limit > 0 && l.used.Load() >= l.limit
}

// Fits reports whether n more bytes would be admitted now, without
// charging them: the check of a declared Content-Length before the body is
// read.
func (l *Limiter) Fits(n int64) bool {
	if l == nil || l.limit <= 0 {
		return true
	}
	used := l.used.Load()
	return used == 0 || used+n <= l.limit
}

// InFlight is the bytes charged now.
func (l *Limiter) InFlight() int64 {
	if l == nil {
		return 0
	}
	return l.used.Load()
}

// Limit is the bound (0: none).
func (l *Limiter) Limit() int64 {
	if l == nil {
		return 0
	}
	return l.limit
}

// Charge is the bytes one request holds; Release returns them all.
type Charge struct {
	l *Limiter
	n int64
}

// NewCharge starts an empty charge on l.
func (l *Limiter) NewCharge() Charge { return Charge{l: l} }

// Add charges n more bytes to the request; false (ErrBusy) when refused.
func (c *Charge) Add(n int64) bool {
	if !c.l.acquire(n, c.n) {
		return false
	}
	c.n += n
	return true
}

// Release returns everything the request was charged.
func (c *Charge) Release() {
	c.l.Release(c.n)
	c.n = 0
}

// Bytes is what the request holds.
func (c *Charge) Bytes() int64 { return c.n }

// BusyError is ErrBusy with the numbers, for an answer a client's operator
// can act on: what the other requests hold (l's bytes in flight less own,
// what the refused request holds itself) and, when need > 0, the bytes the
// request needed in all.
func BusyError(l *Limiter, own, need int64) error {
	msg := ErrBusy.Error() + ": other requests hold " + strconv.FormatInt(max(l.InFlight()-own, 0), 10) + " of " +
		strconv.FormatInt(l.Limit(), 10) + " bytes (max_request_bytes_in_flight)"
	if need > 0 {
		msg += "; this request needs " + strconv.FormatInt(need, 10)
	}
	return &busyError{msg: msg + "; retry later"}
}

type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }
func (e *busyError) Unwrap() error { return ErrBusy }

// Body wraps a request body so every byte read is charged first: a body
// that would pass the bound fails its Read with ErrBusy.
type Body struct {
	rc     io.ReadCloser
	charge *Charge
}

// NewBody wraps rc, charging reads to c.
func NewBody(rc io.ReadCloser, c *Charge) *Body { return &Body{rc: rc, charge: c} }

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 && !b.charge.Add(int64(n)) {
		return 0, BusyError(b.charge.l, b.charge.n, b.charge.n+int64(n))
	}
	return n, err
}

// Close closes the wrapped body.
func (b *Body) Close() error { return b.rc.Close() }
