package admission

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLimiter(t *testing.T) {
	l := New(100)
	if !l.Acquire(60) || !l.Acquire(40) || l.Acquire(1) {
		t.Fatalf("in flight %d: 60+40 fit, 1 more must not", l.InFlight())
	}
	if !l.Full() || l.Fits(1) {
		t.Error("a full limiter admits")
	}
	l.Release(100)
	// Alone, a request larger than the bound still gets through (it is
	// bounded by max_request_body_size), so an idle receiver always makes
	// progress; a second one does not.
	if !l.Fits(500) || !l.Acquire(500) || l.Acquire(1) {
		t.Errorf("one oversized request on an idle limiter: in flight %d", l.InFlight())
	}
	l.Release(500)
	if l.InFlight() != 0 {
		t.Errorf("in flight %d after releasing everything", l.InFlight())
	}
	var unlimited *Limiter
	if !unlimited.Acquire(1<<40) || unlimited.Full() {
		t.Error("a nil limiter bounds")
	}
}

func TestBodyChargesAsItReads(t *testing.T) {
	l := New(10)
	c := l.NewCharge()
	b := NewBody(io.NopCloser(strings.NewReader(strings.Repeat("x", 8))), &c)
	if got, err := io.ReadAll(b); err != nil || len(got) != 8 || c.Bytes() != 8 {
		t.Fatalf("read %d bytes, charged %d, err %v", len(got), c.Bytes(), err)
	}
	other := l.NewCharge()
	if !other.Add(2) {
		t.Fatal("2 more bytes fit")
	}
	c2 := l.NewCharge()
	_, err := io.ReadAll(NewBody(io.NopCloser(strings.NewReader("y")), &c2))
	if !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "10 of 10 bytes") {
		t.Fatalf("a read past the bound: %v", err)
	}
	c.Release()
	other.Release()
	c2.Release()
	if l.InFlight() != 0 {
		t.Errorf("in flight %d", l.InFlight())
	}
}

// A request's own earlier charges never count against it: alone, it can
// grow past the bound (reading its body, then charging its decoding).
func TestChargeAloneGrowsPastTheBound(t *testing.T) {
	l := New(100)
	c := l.NewCharge()
	if !c.Add(80) || !c.Add(320) {
		t.Fatalf("a lone request refused at %d of 100", c.Bytes())
	}
	other := l.NewCharge()
	if other.Add(1) {
		t.Error("a second request admitted past the bound")
	}
	c.Release()
	if !other.Add(1) {
		t.Error("refused after the bytes were released")
	}
	other.Release()
}

// The refusal names what the other requests hold, not counting the refused
// request's own bytes, and what it needed: "X of the bound are held by
// others" with X its own bytes sent operators after the wrong culprit.
func TestBusyErrorCountsOthersOnly(t *testing.T) {
	l := New(100)
	other := l.NewCharge()
	if !other.Add(10) {
		t.Fatal("first charge refused")
	}
	own := l.NewCharge()
	if !own.Add(60) || own.Add(40) {
		t.Fatal("want 60 accepted and 40 more refused (10 held by another)")
	}
	want := "too many request bytes in flight: other requests hold 10 of 100 bytes (max_request_bytes_in_flight); this request needs 100; retry later"
	if got := BusyError(l, own.Bytes(), own.Bytes()+40).Error(); got != want {
		t.Fatalf("got %q\nwant %q", got, want)
	}
	if !errors.Is(BusyError(l, 0, 0), ErrBusy) {
		t.Fatal("BusyError does not wrap ErrBusy")
	}
}
