package traffic

import (
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// A bucket keeps one of its window's traced requests as its exemplar, each
// with the same chance (issue 28 item 3: not the latest, which cost a
// write per traced observation): two traced requests in one bucket per
// window, over many windows, leave the first about half the time, and a
// bucket with a traced request always keeps one.
func TestExemplarIsAUniformDraw(t *testing.T) {
	const windows = 2000
	a := testAggregator(&otelProfile, Limits{})
	ev := func(span byte) gateway.Event {
		e := otelEvent("kong", "/r")
		e.TotalMS = 42
		e.TraceID, e.SpanID = [16]byte{1}, [8]byte{span}
		return e
	}
	evs := []gateway.Event{ev(1), ev(2)}
	first, n := 0, 0
	for range windows {
		a.Add(evs)
		w := a.Take()
		n = 0
		for _, p := range w.points {
			if !a.fams[p.fam].hist {
				continue
			}
			n++
			if p.exEnd-p.exStart != 1 {
				t.Fatalf("a histogram point kept %d exemplars, want 1", p.exEnd-p.exStart)
			}
			if w.exemplars[p.exStart].span[0] == 1 {
				first++
			}
		}
		if n == 0 {
			t.Fatal("no histogram point")
		}
	}
	// Per histogram point: windows draws of probability 1/2 (sd ~22 for
	// 2000): 1000 ± 10 sd.
	if lo, hi := n*(windows/2-220), n*(windows/2+220); first < lo || first > hi {
		t.Errorf("the first of two traced requests was kept %d times in %d, want about %d", first, n*windows, n*windows/2)
	}
}

// A bucket whose window saw untraced requests before its one traced
// request still keeps that one as its exemplar.
func TestExemplarAfterUntracedRequests(t *testing.T) {
	a := testAggregator(&otelProfile, Limits{})
	evs := make([]gateway.Event, 50)
	for i := range evs {
		evs[i] = otelEvent("kong", "/r")
		evs[i].TotalMS = 42
	}
	evs[49].TraceID, evs[49].SpanID = [16]byte{7}, [8]byte{9}
	a.Add(evs)
	w := a.Take()
	n := 0
	for _, p := range w.points {
		if !a.fams[p.fam].hist {
			continue
		}
		n++
		if p.exEnd-p.exStart != 1 {
			t.Fatalf("a histogram point kept %d exemplars, want 1", p.exEnd-p.exStart)
		}
		if x := w.exemplars[p.exStart]; x.trace[0] != 7 || x.span[0] != 9 {
			t.Errorf("exemplar of trace %x span %x, want the traced request's", x.trace, x.span)
		}
	}
	if n == 0 {
		t.Fatal("no histogram point")
	}
}
