// Package admission bounds the request bytes the gateway receiver holds at
// once (read, buffered or being decoded) across every ingest path: OTLP over
// HTTP and gRPC, access logs and health pushes, and serves the requests that
// must wait for room in turn. A request is admitted before its body is read
// and charged as its bytes arrive, never for what a header announces; one
// refused is answered HTTP 429 with Retry-After or gRPC Unavailable, so
// that one client cannot exhaust the collector's memory before any
// processor's memory_limiter could see it.
//
// Why a queue: a bound that refuses whatever does not fit at once refuses
// everyone under a steady mix of large requests. 16 exports of 19 MiB sent
// at once (and retried as exporters do) were all admitted against an empty
// bound, each read a few MiB, and each was then refused because the others
// held the rest: 2,778 answers, every one 429, not one span accepted. Here
// a request that does not fit waits, before its body is read, in one FIFO
// queue (bounded in count, and in the bytes its waiters hold, with a
// deadline per waiter), and the oldest admitted request is never refused
// nor kept waiting, so one request always makes progress and every waiter
// is served in its turn.
//
// Concurrency: a Limiter is safe for concurrent use; a Charge belongs to its
// request's goroutine (Add and Release are not called concurrently on one
// Charge), a Body to the goroutine that reads it.
package admission // import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"

import (
	"context"
	"errors"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// ErrBusy is a request refused because the bound on bytes in flight is
// reached and it may not (or can no longer) wait for room; retry later.
var ErrBusy = errors.New("too many request bytes in flight")

// RetryAfter is the Retry-After a refused request is answered with (s), and
// RetryDelay the same as gRPC's RetryInfo carries it.
const (
	RetryAfter = "1"
	RetryDelay = time.Second
)

// KeepTurnFor is how long a client refused for waiting too long keeps its
// turn (Limiter): a few of its retries, at the Retry-After of 1 s and the
// backoffs exporters add.
const KeepTurnFor = 30 * time.Second

// Limiter bounds the bytes in flight: what admitted requests have been
// charged, as their bodies arrive and as their decoding grows.
//
// Rules (each guards one failure seen or reasoned about):
//   - Admission is FIFO: a request is admitted when it is at the head of
//     the queue and its need (declared size × weight) fits beside what is
//     in flight, or when nothing at all is in flight (a request larger than
//     the bound, bounded by max_request_body_size, still passes on its
//     own). A request never passes one that waits before it, so a stream of
//     small requests cannot starve a large one. Admission charges nothing:
//     a need is what a header announces, and a client that announces 4 MiB
//     and sends 5 bytes must hold nothing (a version that reserved the
//     need let 1,000 such stalled uploads take the whole bound in turns, 16
//     at a time, for headers alone: 924 of them waited and were refused,
//     and every request behind them waited too); so requests that arrive
//     together may all be admitted before their bytes arrive, and then
//     share the room as the next rule says.
//   - A request that cannot be admitted at once waits in the queue, before
//     its body is read, for at most the queue timeout; it is refused at
//     once when the queue holds queueSize waiters, or when the bytes the
//     waiters hold already (a gRPC message has arrived before its call is
//     admitted) would pass the bound.
//   - A client refused that way keeps its turn: its next request (from the
//     same address, within KeepTurnFor) takes its place in the queue by the
//     time the refused one arrived, ahead of everything that arrived since.
//     Under a load the collector cannot keep up with, waiters past the
//     timeout must be refused; without this, the senders just served (who
//     send their next export at once) came back before those refused (who
//     wait for Retry-After first) and took more turns: of 16 senders of 20
//     MB exports for 20 s, the JSON ones (slower, each needing the bound to
//     itself) were served once or twice each, the protobuf ones up to 5
//     times; with it, 3 or 4 times each. Clients behind one address (a
//     proxy, a NAT) share its turn.
//   - An admitted request's charges (its body as it arrives, its decoding)
//     are granted when they fit; the oldest admitted request's (the
//     senior's) always, even past the bound; any other waits until it fits
//     or it becomes the senior, for at most the queue timeout per charge.
//     Refusing those charges instead let every request hold part of the
//     bound and none finish. The senior never waits, so some request always
//     finishes, and the next oldest becomes the senior: no deadlock however
//     the charges grow. In flight is at most the bound plus what the senior
//     holds past it (one request's cost).
//   - While an admitted request waits to grow, nothing new is admitted:
//     requests already reading or decoding finish first.
//   - A request on an HTTP/2 connection shared with other requests of ours
//     (Conn) never waits: it is admitted at once or refused. Go's HTTP/2
//     server returns a connection's flow-control window only as handlers
//     read, so a request waiting with its body unread would stall its
//     connection's other uploads, possibly the one it waits for.
//
// The zero limit means no bound: every request is admitted at once.
type Limiter struct {
	limit        int64
	queueSize    int
	queueTimeout time.Duration
	now          func() time.Time

	// used mirrors inFlight for lock-free reads (InFlight).
	used atomic.Int64

	mu       sync.Mutex
	inFlight int64 // charged to admitted requests
	// admitted requests, oldest first: adHead is the senior.
	adHead, adTail *Charge
	// waiters, by turn.
	qHead, qTail *Charge
	queued       int
	queuedBytes  int64 // what the waiters hold already (Request.Holding)
	growers      int   // admitted requests waiting to charge more
	// owed is the turn kept by each client refused for want of room: when
	// its oldest refused request arrived (queueSize clients at most).
	owed map[string]time.Time
}

// New returns a Limiter of limit bytes (0: unlimited) in front of which at
// most queueSize requests wait for room, each at most queueTimeout (0 for
// either: no request waits, one that does not fit is refused at once).
func New(limit int64, queueSize int, queueTimeout time.Duration) *Limiter {
	if queueSize <= 0 || queueTimeout <= 0 {
		queueSize, queueTimeout = 0, 0
	}
	return &Limiter{limit: limit, queueSize: queueSize, queueTimeout: queueTimeout, now: time.Now}
}

// Conn marks the requests of one HTTP/2 connection (see Limiter): Enter
// when a request of it starts, Leave when it ends. The zero value is ready.
type Conn struct{ active atomic.Int32 }

// Enter counts a request of the connection.
func (c *Conn) Enter() {
	if c != nil {
		c.active.Add(1)
	}
}

// Leave uncounts a request of the connection.
func (c *Conn) Leave() {
	if c != nil {
		c.active.Add(-1)
	}
}

// shared reports whether another request of the connection is active.
func (c *Conn) shared() bool { return c != nil && c.active.Load() > 1 }

// Request is what a request asks of Admit.
type Request struct {
	// Need is the room it will take: its declared body size times its
	// weight (0 when the size is unknown). It waits until that fits; it is
	// charged only as its bytes arrive (Charge.Add).
	Need int64
	// Holding is what the request holds already while it waits (a gRPC
	// message, received before its call is admitted); 0 for HTTP, which
	// waits before reading its body.
	Holding int64
	// Conn is its HTTP/2 connection, nil for HTTP/1 and gRPC.
	Conn *Conn
	// Client is the address of its client (IP, no port), "" when unknown:
	// a client refused for want of room keeps its turn (Limiter).
	Client string
}

// Charge states.
const (
	stateQueued = iota
	stateAdmitted
	stateGrowing
	stateDone
)

// Charge is what one admitted request holds. Release returns it all.
type Charge struct {
	l          *Limiter
	done       <-chan struct{} // the request's context's
	conn       *Conn
	prev, next *Charge // in the queue, then in the admitted list
	state      int
	held       int64 // charged
	need       int64 // queued: Request.Need; growing: the charge asked
	holding    int64 // queued: Request.Holding
	client     string
	since      time.Time     // its turn: when it (or its client's refused request) arrived
	ready      chan struct{} // signalled when a wait ends in a grant
}

// Admit admits a request, waiting in turn for room when there is none and
// it may wait. The charge it returns holds nothing yet (Add charges);
// release it when the request ends. The error, refused or waited
// for too long, wraps ErrBusy (429 / Unavailable); one whose context ended
// while it waited is the context's error.
func (l *Limiter) Admit(ctx context.Context, r Request) (*Charge, error) {
	c := &Charge{l: l, done: ctx.Done(), conn: r.Conn, client: r.Client}
	if l == nil || l.limit <= 0 {
		return c, nil
	}
	mayWait := l.queueTimeout > 0 && !r.Conn.shared()
	now := l.now()
	l.mu.Lock()
	c.since = l.turnLocked(r.Client, now)
	if l.qHead == nil && (l.growers == 0 || !mayWait) && l.fitsLocked(r.Need) {
		l.admitLocked(c)
		l.mu.Unlock()
		return c, nil
	}
	var err error
	switch {
	case !mayWait:
		err = l.busyLocked(0, r.Need, "")
	case l.queued >= l.queueSize:
		err = l.queueFullLocked("every one of the " + strconv.Itoa(l.queueSize) + " places of the admission queue (limits.admission_queue_size) is taken")
	case l.queuedBytes+r.Holding > l.limit && l.queued > 0:
		err = l.queueFullLocked("the waiting requests hold " + strconv.FormatInt(l.queuedBytes, 10) +
			" bytes already, and this one " + strconv.FormatInt(r.Holding, 10) + " more would pass limits.max_request_bytes_in_flight")
	}
	if err != nil {
		if mayWait {
			l.oweLocked(c, now)
		}
		l.mu.Unlock()
		return nil, err
	}
	c.need, c.holding, c.state = r.Need, r.Holding, stateQueued
	c.ready = make(chan struct{}, 1)
	l.enqueueLocked(c)
	// It may be the new head (a kept turn), with room for it.
	l.dispatchLocked()
	l.mu.Unlock()

	t := time.NewTimer(l.queueTimeout)
	defer t.Stop()
	var cause error
	select {
	case <-c.ready:
		return c, nil
	case <-t.C:
	case <-ctx.Done():
		cause = ctx.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.state != stateQueued { // admitted as the wait ended
		<-c.ready // its grant, so that a later wait (Add) does not take it for its own
		return c, nil
	}
	now = l.now()
	l.dequeueLocked(c)
	c.state = stateDone
	// The head leaving may let the next one in.
	l.dispatchLocked()
	if cause != nil {
		return nil, errors.Join(cause, l.busyLocked(0, r.Need, "the request ended while it waited for room; "))
	}
	l.oweLocked(c, now)
	return nil, l.busyLocked(0, r.Need, "waited "+l.queueTimeout.String()+" (limits.admission_queue_timeout) for room; ")
}

// turnLocked is the turn of a new request of client: the turn its client
// kept, or now.
func (l *Limiter) turnLocked(client string, now time.Time) time.Time {
	if client == "" || l.owed == nil {
		return now
	}
	t, ok := l.owed[client]
	if !ok {
		return now
	}
	if now.Sub(t) > KeepTurnFor {
		delete(l.owed, client)
		return now
	}
	return t
}

// oweLocked keeps the turn of c's client, refused for want of room, unless
// it keeps an older one; at most queueSize clients keep one (past that,
// expired turns are dropped first, then new ones are not kept).
func (l *Limiter) oweLocked(c *Charge, now time.Time) {
	if c.client == "" {
		return
	}
	if l.owed == nil {
		l.owed = make(map[string]time.Time)
	}
	if t, ok := l.owed[c.client]; ok && !t.After(c.since) {
		return
	}
	if len(l.owed) >= l.queueSize {
		for k, t := range l.owed {
			if now.Sub(t) > KeepTurnFor {
				delete(l.owed, k)
			}
		}
		if len(l.owed) >= l.queueSize {
			return
		}
	}
	l.owed[c.client] = c.since
}

// QueueFull reports whether a request that had to wait would be refused at
// once: the check of a new gRPC call before gRPC reads its message.
func (l *Limiter) QueueFull() bool {
	if l == nil || l.limit <= 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queueTimeout <= 0 {
		return l.inFlight >= l.limit
	}
	return l.queued >= l.queueSize || l.queuedBytes >= l.limit
}

// Add charges n more bytes to the request, waiting for room when there is
// none (see Limiter). The error, refused or waited for too long, wraps ErrBusy;
// nothing is charged then.
func (c *Charge) Add(n int64) error {
	if n <= 0 || c == nil {
		return nil
	}
	l := c.l
	if l == nil || l.limit <= 0 {
		c.held += n
		return nil
	}
	l.mu.Lock()
	if l.inFlight+n <= l.limit || l.adHead == c {
		l.chargeLocked(c, n)
		l.mu.Unlock()
		return nil
	}
	if l.queueTimeout <= 0 || c.conn.shared() {
		err := l.busyLocked(c.held, c.held+n, "")
		l.mu.Unlock()
		return err
	}
	c.state, c.need = stateGrowing, n
	if c.ready == nil {
		c.ready = make(chan struct{}, 1)
	}
	l.growers++
	l.mu.Unlock()

	t := time.NewTimer(l.queueTimeout)
	defer t.Stop()
	var cause error
	select {
	case <-c.ready:
		return nil
	case <-t.C:
	case <-c.done:
		cause = context.Canceled
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.state != stateGrowing { // granted as the wait ended
		<-c.ready // its grant, so that a later wait does not take it for its own
		return nil
	}
	c.state = stateAdmitted
	l.growers--
	now := l.now()
	// New requests wait while one grows; this one gave up.
	l.dispatchLocked()
	if cause != nil {
		return errors.Join(cause, l.busyLocked(c.held, c.held+n, "the request ended while it waited; "))
	}
	l.oweLocked(c, now)
	return l.busyLocked(c.held, c.held+n, "waited "+l.queueTimeout.String()+" (limits.admission_queue_timeout) for room to go on; ")
}

// Release returns everything the request was charged. Safe on nil and more
// than once.
func (c *Charge) Release() {
	if c == nil || c.state == stateDone {
		return
	}
	l := c.l
	if l == nil || l.limit <= 0 {
		c.held, c.state = 0, stateDone
		return
	}
	l.mu.Lock()
	l.inFlight -= c.held
	l.used.Store(l.inFlight)
	c.held = 0
	l.removeAdmittedLocked(c)
	c.state = stateDone
	l.dispatchLocked()
	l.mu.Unlock()
}

// Bytes is what the request has been charged.
func (c *Charge) Bytes() int64 {
	if c == nil {
		return 0
	}
	return c.held
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

// Waiting is the number of requests waiting in the queue.
func (l *Limiter) Waiting() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.queued
}

// QueueTimeout is how long a request may wait (0: none waits).
func (l *Limiter) QueueTimeout() time.Duration {
	if l == nil {
		return 0
	}
	return l.queueTimeout
}

// fitsLocked reports whether a new request needing need fits now: it does
// when nothing is in flight whatever its need.
func (l *Limiter) fitsLocked(need int64) bool {
	return l.inFlight == 0 || l.inFlight+max(need, 1) <= l.limit
}

func (l *Limiter) admitLocked(c *Charge) {
	c.state, c.need, c.holding = stateAdmitted, 0, 0
	if c.client != "" && l.owed != nil {
		delete(l.owed, c.client) // its turn came
	}
	c.prev, c.next = l.adTail, nil
	if l.adTail != nil {
		l.adTail.next = c
	} else {
		l.adHead = c
	}
	l.adTail = c
}

func (l *Limiter) chargeLocked(c *Charge, n int64) {
	c.held += n
	l.inFlight += n
	l.used.Store(l.inFlight)
}

func (l *Limiter) removeAdmittedLocked(c *Charge) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.adHead = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.adTail = c.prev
	}
	c.prev, c.next = nil, nil
}

// enqueueLocked queues c by its turn: after every waiter whose turn is not
// later (at the tail, unless its client kept an earlier turn).
func (l *Limiter) enqueueLocked(c *Charge) {
	after := l.qTail
	for after != nil && after.since.After(c.since) {
		after = after.prev
	}
	c.prev = after
	if after != nil {
		c.next, after.next = after.next, c
	} else {
		c.next, l.qHead = l.qHead, c
	}
	if c.next != nil {
		c.next.prev = c
	} else {
		l.qTail = c
	}
	l.queued++
	l.queuedBytes += c.holding
}

func (l *Limiter) dequeueLocked(c *Charge) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		l.qHead = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		l.qTail = c.prev
	}
	c.prev, c.next = nil, nil
	l.queued--
	l.queuedBytes -= c.holding
}

// dispatchLocked grants what the room left allows, after room was freed or
// a waiter left: first the admitted requests waiting to grow, oldest first
// (the senior at once), then, when none is left waiting, the head of the
// queue, for as long as the head fits.
func (l *Limiter) dispatchLocked() {
	for c := l.adHead; c != nil && l.growers > 0; c = c.next {
		if c.state == stateGrowing && (l.inFlight+c.need <= l.limit || c == l.adHead) {
			l.chargeLocked(c, c.need)
			c.state, c.need = stateAdmitted, 0
			l.growers--
			c.ready <- struct{}{}
		}
	}
	// Admission charges nothing, so the needs of the heads admitted here
	// count until their bodies do: one release admits what fits together,
	// not the whole queue.
	var admitted int64
	for l.growers == 0 && l.qHead != nil {
		c := l.qHead
		if used := l.inFlight + admitted; used > 0 && used+max(c.need, 1) > l.limit {
			break
		}
		admitted += c.need
		l.dequeueLocked(c)
		l.admitLocked(c)
		c.ready <- struct{}{}
	}
}

// busyLocked is the refusal of a request that holds own and needs need in
// all: what the other requests hold, and prefix saying how long it waited.
func (l *Limiter) busyLocked(own, need int64, prefix string) error {
	msg := ErrBusy.Error() + ": " + prefix + "other requests hold " + strconv.FormatInt(max(l.inFlight-own, 0), 10) + " of " +
		strconv.FormatInt(l.limit, 10) + " bytes (limits.max_request_bytes_in_flight)"
	if need > 0 {
		msg += "; this request needs " + strconv.FormatInt(need, 10)
	}
	return &busyError{msg: msg + "; retry later"}
}

func (l *Limiter) queueFullLocked(why string) error {
	return &busyError{msg: ErrBusy.Error() + ": " + strconv.FormatInt(l.inFlight, 10) + " of " +
		strconv.FormatInt(l.limit, 10) + " bytes (limits.max_request_bytes_in_flight) are in flight and " + why + "; retry later"}
}

type busyError struct{ msg string }

func (e *busyError) Error() string { return e.msg }
func (e *busyError) Unwrap() error { return ErrBusy }

// Body wraps a request body so every byte read is charged: a read that
// cannot be charged fails with the charge's error (ErrBusy).
type Body struct {
	rc     io.ReadCloser
	charge *Charge
}

// NewBody wraps rc, charging reads to c.
func NewBody(rc io.ReadCloser, c *Charge) *Body { return &Body{rc: rc, charge: c} }

func (b *Body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	if n > 0 {
		if cerr := b.charge.Add(int64(n)); cerr != nil {
			return 0, cerr
		}
	}
	return n, err
}

// Close closes the wrapped body.
func (b *Body) Close() error { return b.rc.Close() }
