package traffic

import (
	"runtime"
	"strconv"
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

// The exemplars a window keeps cost about one entry per bucket that kept
// one, not an array of every bucket per series that saw a trace, and they
// are let go once the traced load is gone (issue 28 items 1 and 3: the
// per-series arrays were 0.92 of 3.98 GB live at 1M kong tuples). 5k
// tuples, one traced request each: the aggregator holds, above the same
// one fed the same requests untraced, within twice the exemplars' own 40
// bytes each (the store's chunks), where arrays of 15 buckets took 15×;
// after windows without traces, about nothing beyond the window's own
// buffer of exemplars.
func TestExemplarsCostTheBucketsThatKeepOne(t *testing.T) {
	const tuples = 5_000
	plain := make([]gateway.Event, tuples)
	for i := range plain {
		plain[i] = otelEvent("kong", "/r"+strconv.Itoa(i))
		plain[i].TotalMS, plain[i].UpstreamMS = float64(1+i%700), float64(i%500)
	}
	traced := tracedEvents(plain)
	heap := func() int64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	lim := Limits{MaxTuples: 2 * tuples, MaxGateways: defaultMaxGateways, ExpiryWindows: 60, MaxLabelBytes: defaultMaxLabelBytes}
	// size is the heap an aggregator holds after a window of plain
	// requests, one of evs, and after more windows of plain ones.
	size := func(evs []gateway.Event, after int) (int64, *Aggregator) {
		h0 := heap()
		a := testAggregator(&otelProfile, lim)
		a.Add(plain)
		a.Take()
		a.Add(evs)
		for range after {
			a.Take()
			a.Add(plain)
		}
		return heap() - h0, a
	}
	su, _ := size(plain, 0)
	sx, x := size(traced, 0)
	w := x.Take()
	kept := int64(len(w.exemplars))
	if kept < tuples {
		t.Fatalf("%d exemplars for %d traced requests", kept, tuples)
	}
	if limit := 2*kept*40 + 64<<10; sx-su > limit {
		t.Errorf("a window of %d traced requests (%d exemplars kept) held %d bytes above the untraced one, want ≤ %d",
			tuples, kept, sx-su, limit)
	}
	su, _ = size(plain, 8)
	sx, x = size(traced, 8)
	buf := int64(cap(x.win.exemplars)) * 32 // the window's buffer, reused by the next Take
	if limit := buf + kept*40/4 + 64<<10; sx-su > limit {
		t.Errorf("%d bytes still held for exemplars after 8 windows without a trace, want ≤ %d", sx-su, limit)
	}
}

// A series' exemplars come out one per bucket that kept one, in the order
// of their buckets, whichever order they came in, each the bucket's last
// draw; a window after it starts with none; a retried window (Merge) adds
// its counts and no exemplar.
func TestExemplarsInBucketOrder(t *testing.T) {
	a := testAggregator(&otelProfile, Limits{})
	ev := func(ms float64, span byte) gateway.Event {
		e := otelEvent("kong", "/r")
		e.TotalMS = ms
		e.TraceID, e.SpanID = [16]byte{1}, [8]byte{span}
		return e
	}
	// 700 ms, 3 ms, 90 ms, 4 ms (3 and 4 ms share a bucket): three buckets.
	a.Add([]gateway.Event{ev(700, 1), ev(3, 2), ev(90, 3), ev(4, 4)})
	w := a.Take()
	check := func(w *Window, want []float64) {
		t.Helper()
		found := false
		for _, p := range w.points {
			if a.fams[p.fam].name != "http.server.request.duration" {
				continue
			}
			found = true
			if p.total != 0 {
				t.Errorf("histogram point total %v, want 0", p.total)
			}
			got := w.exemplars[p.exStart:p.exEnd]
			if len(got) != len(want) {
				t.Fatalf("%d exemplars, want %d", len(got), len(want))
			}
			for i, x := range got {
				if x.value != want[i]*1e-3 && want[i] >= 0 {
					t.Errorf("exemplar %d value %v, want %v", i, x.value, want[i]*1e-3)
				}
			}
		}
		if !found {
			t.Fatal("no duration point")
		}
	}
	// The 3 and 4 ms bucket keeps one of its two (-1: either).
	check(w, []float64{-1, 90, 700})
	if v := w.exemplars[0].value; v != 0.003 && v != 0.004 {
		t.Errorf("the first bucket's exemplar is %v, want 0.003 or 0.004", v)
	}
	a.Merge(w)
	a.Add([]gateway.Event{ev(20, 5)})
	w = a.Take()
	check(w, []float64{20})
	for _, p := range w.points {
		if a.fams[p.fam].name == "http.server.request.duration" && p.count != 5 {
			t.Errorf("retried window's count %d, want 5", p.count)
		}
	}
}

// In steady state, windows of traced requests on known tuples allocate
// nothing for their exemplars (the store's chunks are reused).
func TestExemplarsAllocateNothingInSteadyState(t *testing.T) {
	evs := tracedEvents(aggregateEvents()[:2048])
	a := testAggregator(&otelProfile, Limits{MaxTuples: 100_000, MaxGateways: defaultMaxGateways, ExpiryWindows: 60, MaxLabelBytes: defaultMaxLabelBytes})
	for range 3 {
		a.Add(evs)
		a.Take()
	}
	if n := testing.AllocsPerRun(10, func() {
		a.Add(evs)
		a.Take()
	}); n != 0 {
		t.Errorf("%v allocations per window of traced requests on known tuples, want 0", n)
	}
}
