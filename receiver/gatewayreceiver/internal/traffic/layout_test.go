package traffic

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// What the aggregator holds per tuple and per emitted point is sized on
// purpose (a window of 10k routes holds tens of thousands of each): a
// handle carries no inline room for the most views any profile has, and a
// point no exponential layout (it rides in the window's buckets).
func TestHeldStructSizes(t *testing.T) {
	if got := unsafe.Sizeof(handle{}); got != 72 {
		t.Errorf("handle is %d bytes, want 72", got)
	}
	if got := unsafe.Sizeof(series{}); got != 32 {
		t.Errorf("series is %d bytes, want 32 (two per cache line)", got)
	}
	if got := unsafe.Sizeof(row{}); got != 64 {
		t.Errorf("row is %d bytes, want 64 (one cache line)", got)
	}
	if got := unsafe.Sizeof(point{}); got != 56 {
		t.Errorf("point is %d bytes, want 56", got)
	}
}

// A row evicted after an idle window is reused for the next new tuple: its
// points must be those of a fresh aggregator's, with nothing left of the
// evicted tuple (counts, exemplars, an exponential histogram's scale).
func TestEvictedRowReuse(t *testing.T) {
	prof := otelProfile.withDurationHistograms(nil, defaultExpoMaxSize)
	event := func(route string, ms float64, traced bool) gateway.Event {
		e := otelEvent("kong", route)
		e.TotalMS, e.UpstreamMS = ms, ms/2
		e.GenAI.Provider, e.GenAI.RequestModel, e.GenAI.InputTokens = "openai", "gpt", 12
		if traced {
			e.TraceID, e.SpanID = [16]byte{1}, [8]byte{2}
		}
		return e
	}
	window := func(a *Aggregator, evs ...gateway.Event) ([]point, []uint64, []exemplar) {
		a.Add(evs)
		w := a.Take()
		return append([]point(nil), w.points...), append([]uint64(nil), w.buckets...), append([]exemplar(nil), w.exemplars...)
	}
	a := testAggregator(prof, Limits{})
	// A wide range of values lowers the series' scale; a trace leaves exemplars.
	window(a, event("/old", 0.001, true), event("/old", 1e6, true))
	window(a) // /old unused for a window: its rows are evicted
	if free := len(a.tables[0].free); free != 1 {
		t.Fatalf("%d free rows after eviction, want 1", free)
	}
	got, gotBuckets, gotEx := window(a, event("/new", 3, false))
	want, wantBuckets, wantEx := window(testAggregator(prof, Limits{}), event("/new", 3, false))
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotBuckets, wantBuckets) || len(gotEx) != 0 || len(wantEx) != 0 {
		t.Fatalf("reused rows:\n%+v\n%v %v\nfresh:\n%+v\n%v %v", got, gotBuckets, gotEx, want, wantBuckets, wantEx)
	}
}

// The handles of an expired tuple and of an overflow tuple are reused for
// the next new tuples: they must count as a fresh aggregator's do, held or
// folded into overflow alike, with nothing left of the dropped tuples.
func TestDroppedHandleReuse(t *testing.T) {
	lim := Limits{MaxTuples: 1, MaxGateways: 10, ExpiryWindows: 1}
	window := func(a *Aggregator, evs ...gateway.Event) map[string]int64 {
		a.Add(evs)
		return requestsByTuple(a.Take())
	}
	a := testAggregator(&otelProfile, lim)
	window(a, otelEvent("kong", "/old"), otelEvent("kong", "/old-overflow"))
	window(a) // /old expires; the idle overflow tuple is dropped
	if n, free := a.HeldTuples(), len(a.held.free); n != 0 || free != 2 {
		t.Fatalf("after expiry: %d held, %d free handles; want 0 and 2", n, free)
	}
	evs := []gateway.Event{otelEvent("kong", "/new"), otelEvent("kong", "/new-overflow"), otelEvent("kong", "/new")}
	got := window(a, evs...)
	if free := len(a.held.free); free != 0 {
		t.Errorf("%d free handles left, want both reused", free)
	}
	if want := map[string]int64{"kong /new": 2, "kong overflow": 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("reused handles counted %v, want %v", got, want)
	}
	if want := window(testAggregator(&otelProfile, lim), evs...); !reflect.DeepEqual(got, want) {
		t.Fatalf("reused handles counted %v, a fresh aggregator %v", got, want)
	}
	if a.HeldTuples() != 1 {
		t.Fatalf("held %d, want 1", a.HeldTuples())
	}
}
