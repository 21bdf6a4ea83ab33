package admission

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Receiving bounds the calls whose message is still arriving, and ends the
// ones that stall.
//
// Why: gRPC reads a call's message into buffers of its own, frame by frame
// as the client sends them, before any handler sees a byte, and it grants
// the client flow-control window for the whole announced message up front.
// The bytes a call holds there are invisible to the Limiter until the
// message is complete. A client that opens many calls, announces a
// max_recv_msg_size message on each and sends all but its last byte made
// the collector hold every one of them: 200 such calls, 920 MB of RSS,
// and nothing ever ended them. Receiving bounds both sides of that:
//   - at most slots calls receive at once, so what gRPC holds for
//     incomplete messages is at most slots × max_recv_msg_size. A call
//     past that takes the slot of the oldest receiving call if that one has
//     been receiving for at least ShedAge (a stalled call is old; a healthy
//     one is done in milliseconds), else it is refused (ErrBusy), so a
//     client holding every slot delays others by ShedAge at most;
//   - a call whose message has not arrived within timeout is ended;
//   - one connection holds at most share of the slots (TagConn marks the
//     connection), so one client cannot hold every slot: past its share
//     a call of that connection takes the slot of the connection's own
//     oldest receiving call, if that one is ShedAge old, else it is
//     refused (ErrConnBusy) while other connections' calls still enter;
//   - a call whose stream has ended (the client reset it, its deadline
//     passed, its connection closed) no longer holds its slot once a slot
//     is needed: its context is cancelled as gRPC reads the RST_STREAM,
//     but the hook that frees its slot (context.AfterFunc) runs on a
//     goroutine of its own, which under a flood of resets waits for a
//     core. 8 connections resetting calls as fast as they could kept all
//     32 slots held by calls already reset, and 70 % of a client's
//     exports were refused; Enter now frees the slots of ended calls
//     itself before it refuses anything.
//
// An ended call's context is cancelled with its cause (ErrStalled, ErrShed
// or ErrClosed), which makes gRPC's read of its message fail and free what
// it held. gRPC answers the call itself, from the context's Err (the
// handler's own status comes too late): a stalled or shed call's Err is
// context.DeadlineExceeded, so its client sees DEADLINE_EXCEEDED (its
// message took too long; retryable), a call ended by shutdown CANCELLED.
//
// Concurrency: safe for concurrent use. Calls are kept in arrival order in
// a doubly linked list under mu, so finding the oldest, adding and leaving
// are O(1).
type Receiving struct {
	slots   int           // 0: no bound on the count
	share   int           // per connection; 0: no bound
	timeout time.Duration // 0: no reaping
	now     func() time.Time

	mu         sync.Mutex
	head, tail *Call // oldest first
	n          int
	closed     bool
}

// Call is one receiving call, from Enter until its message has arrived or
// the call has ended (Leave). It is the context its stream reads with
// (CallOf finds it in any context derived from it).
type Call struct {
	context.Context
	r          *Receiving
	prev, next *Call
	start      time.Time
	conn       *connSlots // nil: a context TagConn did not mark
	cancel     context.CancelCauseFunc
	in         bool        // in r's list
	stop       func() bool // unregisters the stream's-end hook (guarded by r.mu)
}

// ErrConnBusy refuses a call whose connection holds its share of the
// slots, every one of them younger than ShedAge.
var ErrConnBusy = errors.New("this connection holds its share of the receiving slots")

// ErrStalled ends a call whose message did not arrive within the receive
// timeout; ErrShed one whose slot a newer call took; ErrClosed the calls
// still receiving when the receiver shuts down.
var (
	ErrStalled = errors.New("the message did not arrive within grpc_receive_timeout")
	ErrShed    = errors.New("the message was still arriving while every receiving slot (or its connection's share of them) was taken, and this call was the oldest")
	ErrClosed  = errors.New("the receiver is shutting down; retry")
)

// ShedAge is how long the oldest receiving call must have been receiving
// before a new call may take its slot.
const ShedAge = time.Second

// Enter and Reap report the calls they end (for logs and tests); outcomes
// are counted with Call.Stalled where the read fails (see Stalled).

// NewReceiving bounds the receiving calls to slots (0: unbounded), those of
// one connection to share (0: unbounded) and their receipt to timeout (0:
// no bound).
func NewReceiving(slots, share int, timeout time.Duration) *Receiving {
	return &Receiving{slots: slots, share: share, timeout: timeout, now: time.Now}
}

// connSlots counts the receiving calls of one connection (guarded by the
// Receiving's mu).
type connSlots struct{ n int }

type connKey struct{}

// TagConn marks ctx, a connection's context (stats.Handler.TagConn), so
// that the calls entering from the streams derived from it count against
// one share.
func TagConn(ctx context.Context) context.Context {
	return context.WithValue(ctx, connKey{}, &connSlots{})
}

// Enter registers a new call whose message is about to be read from ctx's
// stream. The call is the context that replaces the stream's (cancelling it
// ends the read); it leaves when its message has arrived (Leave) or the
// stream ends, whichever comes first. shed reports that Enter ended the
// oldest receiving call to make room, for the caller to count. err is
// ErrBusy when every slot is taken by calls younger than ShedAge, ErrConnBusy
// when ctx's connection (TagConn) holds its share of them, all younger.
func (r *Receiving) Enter(ctx context.Context) (c *Call, shed bool, err error) {
	now := r.now()
	cs, _ := ctx.Value(connKey{}).(*connSlots)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, false, ErrClosed
	}
	connFull := cs != nil && r.share > 0 && cs.n >= r.share
	if connFull || (r.slots > 0 && r.n >= r.slots) {
		r.dropEndedLocked()
		connFull = cs != nil && r.share > 0 && cs.n >= r.share
	}
	var old *Call
	switch {
	case connFull:
		old = r.head
		for old.conn != cs {
			old = old.next
		}
		err = ErrConnBusy
	case r.slots > 0 && r.n >= r.slots:
		old, err = r.head, ErrBusy
	}
	if old != nil {
		if now.Sub(old.start) < ShedAge {
			r.mu.Unlock()
			return nil, false, err
		}
		err = nil
		r.removeLocked(old)
		old.cancel(ErrShed)
		shed = true
	}
	ctx, cancel := context.WithCancelCause(ctx)
	c = &Call{Context: ctx, r: r, start: now, conn: cs, cancel: cancel}
	r.addLocked(c)
	r.mu.Unlock()
	// The stream's end (its context is cancelled whatever ends it) frees
	// the slot of a call whose handler never ran. Leave unregisters it, so
	// a call that leaves normally starts no goroutine at its end.
	stop := context.AfterFunc(ctx, c.Leave)
	r.mu.Lock()
	c.stop = stop
	r.mu.Unlock()
	return c, shed, nil
}

// Err is the context's error, DeadlineExceeded for a call ended because its
// message took too long (see Receiving).
func (c *Call) Err() error {
	err := c.Context.Err()
	if err != nil && c.Stalled() {
		return context.DeadlineExceeded
	}
	return err
}

// Stalled reports whether the receiver ended c because its message took
// too long (ErrStalled or ErrShed). A call ended so may still have read
// its message, if the whole of it had arrived when it was ended: gRPC's
// read picks at random between a cancelled context and data waiting. So
// the caller counts a stalled call where its read fails, not where it is
// ended.
func (c *Call) Stalled() bool {
	if c == nil {
		return false
	}
	cause := context.Cause(c.Context)
	return cause == ErrStalled || cause == ErrShed
}

type callKey struct{}

// Value makes the call findable (CallOf) from the contexts derived from it.
func (c *Call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// CallOf is the receiving call ctx derives from, or nil.
func CallOf(ctx context.Context) *Call {
	c, _ := ctx.Value(callKey{}).(*Call)
	return c
}

// Leave frees c's slot: its message has arrived (or its call ended). Safe to
// call more than once, and on nil.
func (c *Call) Leave() {
	if c == nil {
		return
	}
	r := c.r
	r.mu.Lock()
	if c.in {
		r.removeLocked(c)
	}
	stop := c.stop
	c.stop = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// dropEndedLocked frees the slots of the calls whose stream has ended
// (their context is done) before their hook ran. It walks every receiving
// call, at most slots of them, and runs only when a slot is needed.
func (r *Receiving) dropEndedLocked() {
	for c := r.head; c != nil; {
		next := c.next
		if c.Context.Err() != nil {
			r.removeLocked(c)
		}
		c = next
	}
}

// Reap ends the calls that have been receiving for longer than the timeout
// and returns how many it ended. Run it every second or so.
func (r *Receiving) Reap() int {
	if r.timeout <= 0 {
		return 0
	}
	cutoff := r.now().Add(-r.timeout)
	ended := 0
	r.mu.Lock()
	for c := r.head; c != nil && !c.start.After(cutoff); c = r.head {
		r.removeLocked(c)
		c.cancel(ErrStalled)
		ended++
	}
	r.mu.Unlock()
	return ended
}

// Close ends every receiving call (their clients retry elsewhere) and
// refuses new ones: a stalled call would otherwise hold a graceful stop
// until its timeout.
func (r *Receiving) Close() {
	r.mu.Lock()
	r.closed = true
	for c := r.head; c != nil; c = r.head {
		r.removeLocked(c)
		c.cancel(ErrClosed)
	}
	r.mu.Unlock()
}

// Len is the number of receiving calls.
func (r *Receiving) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Slots is the bound on receiving calls (0: none).
func (r *Receiving) Slots() int { return r.slots }

// Share is the bound on one connection's receiving calls (0: none).
func (r *Receiving) Share() int { return r.share }

func (r *Receiving) addLocked(c *Call) {
	c.prev, c.in = r.tail, true
	if r.tail != nil {
		r.tail.next = c
	} else {
		r.head = c
	}
	r.tail = c
	r.n++
	if c.conn != nil {
		c.conn.n++
	}
}

func (r *Receiving) removeLocked(c *Call) {
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		r.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		r.tail = c.prev
	}
	c.prev, c.next, c.in = nil, nil, false
	r.n--
	if c.conn != nil {
		c.conn.n--
	}
}
