package admission

import (
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

const testWait = 2 * time.Second

// admit admits a request of n bytes at once and charges them (its body
// has arrived), or fails the test.
func admit(t *testing.T, l *Limiter, n int64) *Charge {
	t.Helper()
	c, err := l.Admit(context.Background(), Request{Need: n})
	if err == nil {
		err = c.Add(n)
	}
	if err != nil {
		t.Fatalf("admitting %d bytes with %d in flight: %v", n, l.InFlight(), err)
	}
	return c
}

// waiter is a request waiting in Admit on its own goroutine.
type waiter struct {
	name string
	c    *Charge
	err  error
	done chan struct{}
}

// startWaiter calls Admit on a goroutine and returns once it is blocked
// (in the queue) or done: synctest.Wait orders the waiters as the test
// starts them.
func startWaiter(t *testing.T, l *Limiter, name string, r Request) *waiter {
	t.Helper()
	w := &waiter{name: name, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.c, w.err = l.Admit(context.Background(), r)
	}()
	synctest.Wait()
	return w
}

func (w *waiter) admitted() bool {
	select {
	case <-w.done:
		return w.err == nil
	default:
		return false
	}
}

func TestAdmitWithinTheBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		a := admit(t, l, 60)
		b := admit(t, l, 40)
		if l.InFlight() != 100 || l.Waiting() != 0 || a.Bytes() != 60 {
			t.Fatalf("in flight %d, waiting %d, a holds %d; want 100, 0, 60", l.InFlight(), l.Waiting(), a.Bytes())
		}
		a.Release()
		b.Release()
		b.Release() // twice is harmless
		if l.InFlight() != 0 {
			t.Errorf("in flight %d after releasing everything", l.InFlight())
		}
		var unlimited *Limiter
		c, err := unlimited.Admit(context.Background(), Request{Need: 1 << 40})
		if err != nil || c.Add(1<<40) != nil {
			t.Errorf("a nil limiter bounds: %v", err)
		}
		c.Release()
	})
}

// A request alone is admitted whatever its need (it is bounded by
// max_request_body_size), so an idle receiver always makes progress; the
// next one waits for it.
func TestLoneOversizedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		big := admit(t, l, 500)
		if err := big.Add(800); err != nil { // and more, alone
			t.Fatalf("a lone request charging past the bound: %v", err)
		}
		w := startWaiter(t, l, "small", Request{Need: 1})
		if w.admitted() {
			t.Fatal("a second request admitted past the bound")
		}
		big.Release()
		<-w.done
		if w.err != nil {
			t.Fatalf("after the big one ended: %v", w.err)
		}
		w.c.Release()
	})
}

// Waiters are admitted in arrival order, and a small request never passes
// a large one waiting before it (no starvation of large requests by a
// stream of small ones).
func TestQueueIsFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, 10*time.Second)
		held := admit(t, l, 0)
		if err := held.Add(50); err != nil {
			t.Fatal(err)
		}
		big := startWaiter(t, l, "big", Request{Need: 150}) // more than the bound: needs it empty
		small := startWaiter(t, l, "small", Request{Need: 10})
		if big.admitted() || small.admitted() {
			t.Fatal("admitted while 50 are held and the big one needs all")
		}
		// The small one fits, but the big one came first.
		late := startWaiter(t, l, "late", Request{Need: 1})
		if small.admitted() || late.admitted() || l.Waiting() != 3 {
			t.Fatalf("a small request passed a large one waiting before it (%d waiting)", l.Waiting())
		}
		held.Release()
		synctest.Wait()
		if !big.admitted() || small.admitted() {
			t.Fatalf("after the release: big admitted %v (err %v), small %v; want the big one only", big.admitted(), big.err, small.admitted())
		}
		big.c.Release()
		synctest.Wait()
		if !small.admitted() || !late.admitted() {
			t.Fatalf("after the big one: small %v (%v), late %v (%v)", small.admitted(), small.err, late.admitted(), late.err)
		}
		small.c.Release()
		late.c.Release()
		if l.InFlight() != 0 {
			t.Errorf("in flight %d", l.InFlight())
		}
	})
}

// A waiter is refused (ErrBusy) once it has waited the queue timeout, not
// before, and leaves its place; a full queue refuses at once.
func TestQueueDeadlineAndSize(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 2, testWait)
		held := admit(t, l, 0)
		if err := held.Add(100); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		w1 := startWaiter(t, l, "w1", Request{Need: 10})
		w2 := startWaiter(t, l, "w2", Request{Need: 10})
		// The queue holds 2: the third is refused at once, naming it.
		_, err := l.Admit(context.Background(), Request{Need: 10})
		if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "admission_queue_size") || time.Since(start) != 0 {
			t.Fatalf("a third waiter in a queue of 2: %v after %s", err, time.Since(start))
		}
		time.Sleep(testWait - time.Millisecond)
		synctest.Wait()
		if l.Waiting() != 2 {
			t.Fatalf("%d waiting just before the deadline, want 2", l.Waiting())
		}
		<-w1.done
		<-w2.done
		if waited := time.Since(start); waited != testWait {
			t.Errorf("refused after %s, want %s", waited, testWait)
		}
		for _, w := range []*waiter{w1, w2} {
			if !errors.Is(w.err, ErrBusy) || !strings.Contains(w.err.Error(), "waited 2s (limits.admission_queue_timeout)") {
				t.Errorf("%s: %v", w.name, w.err)
			}
		}
		if l.Waiting() != 0 {
			t.Errorf("%d still waiting", l.Waiting())
		}
		held.Release()
		admit(t, l, 10).Release()
	})
}

// The queue timeout 0 (or size 0) turns waiting off: whatever does not fit
// is refused at once, as before the queue.
func TestNoQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, l := range []*Limiter{New(100, 0, testWait), New(100, 8, 0)} {
			held := admit(t, l, 100)
			start := time.Now()
			if _, err := l.Admit(context.Background(), Request{Need: 1}); !errors.Is(err, ErrBusy) || time.Since(start) != 0 {
				t.Errorf("without a queue: %v after %s, want ErrBusy at once", err, time.Since(start))
			}
			if !l.QueueFull() {
				t.Error("QueueFull is false without a queue while the bound is held")
			}
			held.Release()
		}
	})
}

// A request whose charge grows past the room left while others hold the
// rest waits for room instead of failing, and the oldest admitted request
// (the senior) is never made to wait: the two grow at once and both
// finish. The old rule refused every charge that did not fit while others
// held bytes, so each held part of the bound and none finished.
func TestGrowingChargesNeverDeadlock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		older := admit(t, l, 40)
		younger := admit(t, l, 40)
		// Both now need 60 more: 80 + 120 > 100.
		var youngerErr error
		youngerDone := make(chan struct{})
		go func() {
			defer close(youngerDone)
			youngerErr = younger.Add(60)
		}()
		synctest.Wait()
		select {
		case <-youngerDone:
			t.Fatalf("the younger charge did not wait: %v", youngerErr)
		default:
		}
		// The senior goes on past the bound rather than wait for the
		// younger one, which waits for it.
		if err := older.Add(60); err != nil {
			t.Fatalf("the senior's charge: %v", err)
		}
		if got := l.InFlight(); got != 140 {
			t.Errorf("in flight %d, want 140 (the bound and the senior past it)", got)
		}
		older.Release()
		<-youngerDone
		if youngerErr != nil || younger.Bytes() != 100 {
			t.Fatalf("the younger charge once the senior ended: %v, held %d", youngerErr, younger.Bytes())
		}
		younger.Release()
		if l.InFlight() != 0 {
			t.Errorf("in flight %d", l.InFlight())
		}
	})
}

// A charge that waits for room ends with ErrBusy after the queue timeout
// (its request is refused, nothing charged), and new requests are not
// admitted while an admitted one waits to grow.
func TestGrowthWaitsThenGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		senior := admit(t, l, 0)
		if err := senior.Add(70); err != nil {
			t.Fatal(err)
		}
		junior := admit(t, l, 0)
		if err := junior.Add(20); err != nil {
			t.Fatal(err)
		}
		var err error
		done := make(chan struct{})
		go func() { defer close(done); err = junior.Add(20) }()
		synctest.Wait()
		// 10 are free, but the junior waits to grow: a new request
		// (a second later, so that its deadline comes after the junior's)
		// queues behind it.
		time.Sleep(time.Second)
		w := startWaiter(t, l, "new", Request{Need: 5})
		if w.admitted() {
			t.Fatal("a new request admitted while an admitted one waits to grow")
		}
		<-done
		if !errors.Is(err, ErrBusy) || junior.Bytes() != 20 || !strings.Contains(err.Error(), "to go on") {
			t.Fatalf("a growth that waited the timeout: %v, held %d", err, junior.Bytes())
		}
		// The junior gave up: the new one is admitted at once.
		synctest.Wait()
		if !w.admitted() {
			t.Fatalf("the waiter after the grower gave up: %v", w.err)
		}
		w.c.Release()
		junior.Release()
		senior.Release()
	})
}

// What a request announces holds nothing until it arrives: a client that
// announces a body as large as the bound and sends nothing does not keep
// the next request waiting (stalled uploads would hold the bound for
// headers alone); what it sends is charged as it comes.
func TestAnnouncedBodyHoldsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		stalled, err := l.Admit(context.Background(), Request{Need: 100})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		next := admit(t, l, 50)
		if time.Since(start) != 0 || l.InFlight() != 50 {
			t.Fatalf("the request after an announced body: admitted after %s, in flight %d", time.Since(start), l.InFlight())
		}
		if err := stalled.Add(10); err != nil || l.InFlight() != 60 {
			t.Fatalf("the announced body's first bytes: %v, in flight %d", err, l.InFlight())
		}
		next.Release()
		stalled.Release()
	})
}

// One release admits the waiters whose needs fit together, in turn, not
// the whole queue: admission charges nothing, so the needs of those just
// admitted count until their bodies do.
func TestReleaseAdmitsWhatFitsTogether(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		held := admit(t, l, 100)
		ws := make([]*waiter, 3)
		for i := range ws {
			ws[i] = startWaiter(t, l, strconv.Itoa(i), Request{Need: 40})
		}
		held.Release()
		synctest.Wait()
		if !ws[0].admitted() || !ws[1].admitted() || ws[2].admitted() {
			t.Fatalf("after one release: %v %v %v, want the first two (80 of 100) only", ws[0].admitted(), ws[1].admitted(), ws[2].admitted())
		}
		for _, w := range ws[:2] {
			if err := w.c.Add(40); err != nil {
				t.Fatal(err)
			}
		}
		ws[0].c.Release()
		<-ws[2].done
		if ws[2].err != nil {
			t.Fatal(ws[2].err)
		}
		ws[1].c.Release()
		ws[2].c.Release()
	})
}

// Waiters holding bytes (gRPC messages that have arrived) are bounded: the
// one that would pass the bound with the others' is refused at once.
func TestWaitersHoldingBytesAreBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		held := admit(t, l, 100)
		w := startWaiter(t, l, "grpc", Request{Need: 60, Holding: 60})
		if _, err := l.Admit(context.Background(), Request{Need: 50, Holding: 50}); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "hold 60 bytes already") {
			t.Fatalf("a waiter whose message passes the waiters' bound: %v", err)
		}
		held.Release()
		<-w.done
		if w.err != nil {
			t.Fatal(w.err)
		}
		w.c.Release()
	})
}

// A request on an HTTP/2 connection that carries other requests never
// waits (its unread body would hold the connection's window): it is
// refused at once where a request alone on its connection waits.
func TestSharedConnDoesNotWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		held := admit(t, l, 100)
		var conn Conn
		conn.Enter()
		alone := startWaiter(t, l, "alone", Request{Need: 10, Conn: &conn})
		conn.Enter()
		start := time.Now()
		if _, err := l.Admit(context.Background(), Request{Need: 10, Conn: &conn}); !errors.Is(err, ErrBusy) || time.Since(start) != 0 {
			t.Errorf("a second request of the connection: %v after %s, want refused at once", err, time.Since(start))
		}
		conn.Leave()
		held.Release()
		<-alone.done
		if alone.err != nil {
			t.Fatal(alone.err)
		}
		alone.c.Release()
	})
}

// A waiter whose client goes away leaves the queue at once.
func TestWaiterContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		held := admit(t, l, 100)
		ctx, cancel := context.WithCancel(context.Background())
		var err error
		done := make(chan struct{})
		go func() { defer close(done); _, err = l.Admit(ctx, Request{Need: 10}) }()
		synctest.Wait()
		cancel()
		<-done
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrBusy) || l.Waiting() != 0 {
			t.Fatalf("a cancelled waiter: %v, %d waiting", err, l.Waiting())
		}
		held.Release()
	})
}

// The probe in miniature: 16 requests at once, each larger than a
// quarter of the bound, each admitted by its declared size and charged as
// its body arrives in chunks, then for its decoding (its weight), then for
// growth no estimate saw. Every one is served, none refused, and at most
// the bound plus one request is ever in flight; under the race detector.
// Before the queue, this refused all 16 round after round.
func TestConcurrentLargeRequestsAllServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			limit  = 64 << 10
			n      = 16
			size   = 19 << 10 // body bytes
			chunk  = 1 << 10
			weight = 2
			grow   = 3 << 10 // decoding past the weight
		)
		l := New(limit, 32, testWait)
		var peak atomic.Int64
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				c, err := l.Admit(context.Background(), Request{Need: size * weight})
				if err != nil {
					errs[i] = err
					return
				}
				defer c.Release()
				b := NewBody(io.NopCloser(strings.NewReader(strings.Repeat("x", size))), c)
				buf := make([]byte, chunk)
				for {
					m, err := b.Read(buf)
					if m > 0 {
						time.Sleep(time.Millisecond) // the network
					}
					if err == io.EOF {
						break
					}
					if err != nil {
						errs[i] = err
						return
					}
					peak.Store(max(peak.Load(), l.InFlight()))
				}
				for _, extra := range []int64{size * (weight - 1), grow, grow} {
					if err := c.Add(extra); err != nil {
						errs[i] = err
						return
					}
					peak.Store(max(peak.Load(), l.InFlight()))
					time.Sleep(5 * time.Millisecond) // decoding
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("request %d: %v", i, err)
			}
		}
		if len(order) != n {
			t.Fatalf("%d of %d requests served", len(order), n)
		}
		if p, most := peak.Load(), int64(limit+size*weight+2*grow); p > most {
			t.Errorf("peak in flight %d, want at most the bound plus one request (%d)", p, most)
		}
		if l.InFlight() != 0 || l.Waiting() != 0 {
			t.Errorf("in flight %d, waiting %d", l.InFlight(), l.Waiting())
		}
	})
}

func TestBodyChargesAsItReads(t *testing.T) {
	l := New(10, 0, 0)
	c := admit(t, l, 0)
	b := NewBody(io.NopCloser(strings.NewReader(strings.Repeat("x", 8))), c)
	if got, err := io.ReadAll(b); err != nil || len(got) != 8 || c.Bytes() != 8 {
		t.Fatalf("read %d bytes, charged %d, err %v", len(got), c.Bytes(), err)
	}
	other := admit(t, l, 0)
	if err := other.Add(2); err != nil {
		t.Fatal("2 more bytes fit")
	}
	// Full: no queue, so a new request is refused at once.
	if _, err := l.Admit(context.Background(), Request{}); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "10 of 10 bytes") {
		t.Fatalf("a request past the bound: %v", err)
	}
	// A younger request's read past the bound fails (no queue: no wait).
	_, err := io.ReadAll(NewBody(io.NopCloser(strings.NewReader("y")), other))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("a read past the bound: %v", err)
	}
	c.Release()
	other.Release()
	if l.InFlight() != 0 {
		t.Errorf("in flight %d", l.InFlight())
	}
}

// The refusal names what the other requests hold, not counting the refused
// request's own bytes, and what it needed: "X of the bound are held by
// others" with X its own bytes sent operators after the wrong culprit.
func TestBusyErrorCountsOthersOnly(t *testing.T) {
	l := New(100, 0, 0)
	senior := admit(t, l, 0)
	if err := senior.Add(10); err != nil {
		t.Fatal(err)
	}
	own := admit(t, l, 0)
	if err := own.Add(60); err != nil {
		t.Fatal(err)
	}
	err := own.Add(40)
	want := "too many request bytes in flight: other requests hold 10 of 100 bytes (limits.max_request_bytes_in_flight); this request needs 100; retry later"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v\nwant %q", err, want)
	}
	if !errors.Is(err, ErrBusy) {
		t.Fatal("the refusal does not wrap ErrBusy")
	}
	own.Release()
	senior.Release()
}

// A client refused for waiting too long keeps its turn: its next request
// goes ahead of the requests that arrived after its refused one, and loses
// that place once served (or after KeepTurnFor).
func TestRefusedClientKeepsItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := New(100, 8, testWait)
		held := admit(t, l, 0)
		if err := held.Add(100); err != nil {
			t.Fatal(err)
		}
		refused := startWaiter(t, l, "a", Request{Need: 60, Client: "10.0.0.1"})
		<-refused.done
		if !errors.Is(refused.err, ErrBusy) {
			t.Fatalf("a first request of a: %v, want refused after the timeout", refused.err)
		}
		later := startWaiter(t, l, "b", Request{Need: 60, Client: "10.0.0.2"})
		time.Sleep(time.Second) // a's Retry-After
		retry := startWaiter(t, l, "a again", Request{Need: 60, Client: "10.0.0.1"})
		held.Release()
		synctest.Wait()
		if !retry.admitted() || later.admitted() {
			t.Fatalf("after the release: a's retry admitted %v (%v), b %v; want a first, in the turn it kept", retry.admitted(), retry.err, later.admitted())
		}
		if err := retry.c.Add(60); err != nil { // its body
			t.Fatal(err)
		}
		// Served: a's next request waits its turn like any other.
		next := startWaiter(t, l, "a's next", Request{Need: 60, Client: "10.0.0.1"})
		retry.c.Release()
		synctest.Wait()
		if !later.admitted() || next.admitted() {
			t.Fatalf("b %v (%v), a's next %v; want b, which came before it", later.admitted(), later.err, next.admitted())
		}
		later.c.Release()
		<-next.done
		if next.err != nil {
			t.Fatal(next.err)
		}
		next.c.Release()
	})
}

// Senders of large requests (half need the whole bound, half a third of
// it) that send again as soon as they are served, as exporters with a
// backlog do, while a refused sender waits its Retry-After first: more
// than the collector can serve within the queue timeout, so some waiters
// must be refused. With kept turns every sender is served, again and
// again, evenly (2 to 7 times each in 30 s over 40 runs, mostly 3 to 5);
// without them (no client address, logged for contrast) the senders just
// served come back first and take more turns (0 to 12 each).
func TestSustainedOverloadServesEverySender(t *testing.T) {
	for _, keep := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			const (
				senders = 16
				runFor  = 30 * time.Second
			)
			l := New(100, 64, testWait)
			served := make([]int, senders)
			var wg sync.WaitGroup
			start := time.Now()
			for i := range senders {
				need, work := int64(100), time.Second
				if i%2 == 0 {
					need, work = 30, 300*time.Millisecond
				}
				client := ""
				if keep {
					client = "10.0.0." + strconv.Itoa(i+1)
				}
				wg.Go(func() {
					for time.Since(start) < runFor {
						c, err := l.Admit(context.Background(), Request{Need: need, Client: client})
						if err == nil {
							err = c.Add(need) // its body
						}
						if err != nil {
							c.Release()
							time.Sleep(RetryDelay)
							continue
						}
						time.Sleep(work)
						c.Release()
						served[i]++
					}
				})
			}
			wg.Wait()
			t.Logf("kept turns %v: served %v", keep, served)
			if !keep {
				return // the contrast (some were never served), logged only
			}
			for i, n := range served {
				if n < 2 {
					t.Errorf("sender %d served %d times in %s, want every sender served again and again: %v", i, n, runFor, served)
				}
			}
		})
	}
}
