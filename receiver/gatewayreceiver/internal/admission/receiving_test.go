package admission

import (
	"context"
	"errors"
	"testing"
	"time"
)

// clock is a settable now for Receiving.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestReceiving(slots int, timeout time.Duration) (*Receiving, *clock) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	r := NewReceiving(slots, 0, timeout)
	r.now = c.now
	return r, c
}

func enter(t *testing.T, r *Receiving, parent context.Context) *Call {
	t.Helper()
	c, shed, err := r.Enter(parent)
	if err != nil || shed {
		t.Fatalf("Enter: shed %v, err %v", shed, err)
	}
	return c
}

func TestReceivingBoundsAndSheds(t *testing.T) {
	r, clk := newTestReceiving(2, 0)
	a := enter(t, r, context.Background())
	clk.t = clk.t.Add(100 * time.Millisecond)
	b := enter(t, r, context.Background())
	// Full of young calls: refused.
	if _, _, err := r.Enter(context.Background()); !errors.Is(err, ErrBusy) {
		t.Fatalf("a third call while both slots are young: %v, want ErrBusy", err)
	}
	// The oldest has been receiving for ShedAge: the new call takes its slot.
	clk.t = clk.t.Add(ShedAge - 100*time.Millisecond)
	c, shed, err := r.Enter(context.Background())
	if err != nil || !shed {
		t.Fatalf("a third call once the oldest is %v old: shed %v, err %v", ShedAge, shed, err)
	}
	if a.Err() != context.DeadlineExceeded || context.Cause(a) != ErrShed {
		t.Errorf("the shed call: Err %v, Cause %v", a.Err(), context.Cause(a))
	}
	if b.Err() != nil || c.Err() != nil || r.Len() != 2 {
		t.Errorf("the others: %v %v, %d receiving", b.Err(), c.Err(), r.Len())
	}
	// A message that arrived frees its slot, once however often it leaves.
	b.Leave()
	b.Leave()
	a.Leave() // already shed
	if r.Len() != 1 {
		t.Errorf("%d receiving after b left, want 1", r.Len())
	}
	if b.Err() != nil {
		t.Errorf("a call that left is not cancelled: %v", b.Err())
	}
	if CallOf(context.WithValue(c, testKey{}, 1)) != c || CallOf(context.Background()) != nil {
		t.Error("CallOf does not find the call through a derived context")
	}
}

type testKey struct{}

func TestReceivingLeavesWhenTheStreamEnds(t *testing.T) {
	r, _ := newTestReceiving(1, 0)
	parent, cancel := context.WithCancel(context.Background())
	c := enter(t, r, parent)
	cancel()
	<-c.Done()
	for deadline := time.Now().Add(5 * time.Second); r.Len() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a call whose stream ended still holds its slot")
		}
	}
	if c.Err() != context.Canceled {
		t.Errorf("Err %v, want Canceled", c.Err())
	}
	enter(t, r, context.Background()) // the slot is free
}

func TestReceivingReapsStalledCalls(t *testing.T) {
	r, clk := newTestReceiving(0, 30*time.Second)
	old := enter(t, r, context.Background())
	clk.t = clk.t.Add(20 * time.Second)
	young := enter(t, r, context.Background())
	clk.t = clk.t.Add(10 * time.Second) // old: exactly the timeout
	if n := r.Reap(); n != 1 {
		t.Fatalf("reaped %d, want the old call", n)
	}
	if old.Err() != context.DeadlineExceeded || context.Cause(old) != ErrStalled {
		t.Errorf("reaped call: Err %v, Cause %v", old.Err(), context.Cause(old))
	}
	if young.Err() != nil || r.Len() != 1 {
		t.Errorf("young call: %v, %d receiving", young.Err(), r.Len())
	}
	if n := NewReceiving(0, 0, 0).Reap(); n != 0 {
		t.Errorf("no timeout reaped %d", n)
	}
}

func TestReceivingClose(t *testing.T) {
	r, _ := newTestReceiving(0, 0)
	c := enter(t, r, context.Background())
	r.Close()
	if c.Err() != context.Canceled || context.Cause(c) != ErrClosed || r.Len() != 0 {
		t.Errorf("a call at Close: Err %v, Cause %v, %d receiving", c.Err(), context.Cause(c), r.Len())
	}
	if _, _, err := r.Enter(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Enter after Close: %v", err)
	}
}

// TestReceivingFreesEndedCalls: a call whose stream ended (its context is
// cancelled, as gRPC cancels a stream the client resets) holds no slot for
// the next call, whether or not the hook that frees it has run yet.
func TestReceivingFreesEndedCalls(t *testing.T) {
	r, _ := newTestReceiving(1, 0)
	for i := range 1000 {
		stream, reset := context.WithCancel(context.Background())
		enter(t, r, stream)
		reset()
		if _, _, err := r.Enter(context.Background()); err != nil {
			t.Fatalf("call %d after the receiving one was reset: %v", i, err)
		}
		r.Close() // ends the one that entered; a fresh one for the next round
		r, _ = newTestReceiving(1, 0)
	}
}

// TestReceivingShareOfAConnection: the calls of one connection (TagConn)
// hold at most share slots; past it that connection's calls are refused
// (ErrConnBusy) while another connection's enter, and once the
// connection's oldest call is ShedAge old a new one takes its slot, not
// another connection's older call's.
func TestReceivingShareOfAConnection(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	r := NewReceiving(4, 2, 0)
	r.now = c.now
	a, b := TagConn(context.Background()), TagConn(context.Background())
	other := enter(t, r, b) // the oldest of all
	c.t = c.t.Add(100 * time.Millisecond)
	a1 := enter(t, r, a)
	a2 := enter(t, r, a)
	if _, _, err := r.Enter(a); !errors.Is(err, ErrConnBusy) {
		t.Fatalf("a third call of a connection with a share of 2: %v, want ErrConnBusy", err)
	}
	b2 := enter(t, r, b)
	c.t = c.t.Add(ShedAge)
	a3, shed, err := r.Enter(a)
	if err != nil || !shed {
		t.Fatalf("a call of the connection once its oldest is %v old: shed %v, err %v", ShedAge, shed, err)
	}
	if context.Cause(a1) != ErrShed || other.Err() != nil || a2.Err() != nil || b2.Err() != nil || a3.Err() != nil {
		t.Errorf("shed %v (want the connection's oldest), others %v %v %v %v", context.Cause(a1), other.Err(), a2.Err(), b2.Err(), a3.Err())
	}
	if r.Len() != 4 || r.Share() != 2 {
		t.Errorf("%d receiving, share %d; want 4, 2", r.Len(), r.Share())
	}
	// An untagged context (no connection) counts against the slots only.
	a2.Leave()
	enter(t, r, context.Background())
}
