package gatewayreceiver

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// A set evicted after an idle window is reused for the next new tuple: its
// points must be those of a fresh aggregator's, with nothing left of the
// evicted tuple (counts, exemplars, an exponential histogram's scale).
func TestEvictedSetReuse(t *testing.T) {
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
	window := func(a *aggregator, evs ...gateway.Event) ([]point, []uint64, []exemplar) {
		a.mu.Lock()
		for i := range evs {
			a.addLocked(&evs[i])
		}
		a.mu.Unlock()
		points, buckets := a.take()
		return append([]point(nil), points...), append([]uint64(nil), buckets...), append([]exemplar(nil), a.exBuf...)
	}
	a := newAggregator(prof, dimensions{}, limits{})
	// A wide range of values lowers the series' scale; a trace leaves exemplars.
	window(a, event("/old", 0.001, true), event("/old", 1e6, true))
	window(a) // /old unused for a window: its sets are evicted
	if free := len(a.groups[0].free); free != 1 {
		t.Fatalf("%d free sets after eviction, want 1", free)
	}
	got, gotBuckets, gotEx := window(a, event("/new", 3, false))
	want, wantBuckets, wantEx := window(newAggregator(prof, dimensions{}, limits{}), event("/new", 3, false))
	if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotBuckets, wantBuckets) || len(gotEx) != 0 || len(wantEx) != 0 {
		t.Fatalf("reused sets:\n%+v\n%v %v\nfresh:\n%+v\n%v %v", got, gotBuckets, gotEx, want, wantBuckets, wantEx)
	}
}

// The bundles of an expired tuple and of an overflow tuple are reused for
// the next new tuples: they must count as a fresh aggregator's do, held or
// folded into overflow alike, with nothing left of the dropped tuples.
func TestDroppedBundleReuse(t *testing.T) {
	lim := limits{maxSeries: 1, maxGateways: 10, expiryWindows: 1}
	window := func(a *aggregator, evs ...gateway.Event) map[string]int64 {
		a.mu.Lock()
		for i := range evs {
			a.addLocked(&evs[i])
		}
		a.mu.Unlock()
		points, _ := a.take()
		return requestsByTuple(points)
	}
	a := newAggregator(&otelProfile, dimensions{}, lim)
	window(a, otelEvent("kong", "/old"), otelEvent("kong", "/old-overflow"))
	window(a) // /old expires; the idle overflow tuple is dropped
	if n, free := a.heldTuples(), len(a.freeBundles); n != 0 || free != 2 {
		t.Fatalf("after expiry: %d held, %d free bundles; want 0 and 2", n, free)
	}
	evs := []gateway.Event{otelEvent("kong", "/new"), otelEvent("kong", "/new-overflow"), otelEvent("kong", "/new")}
	got := window(a, evs...)
	if free := len(a.freeBundles); free != 0 {
		t.Errorf("%d free bundles left, want both reused", free)
	}
	if want := map[string]int64{"kong /new": 2, "kong overflow": 1}; !reflect.DeepEqual(got, want) {
		t.Fatalf("reused bundles counted %v, want %v", got, want)
	}
	if want := window(newAggregator(&otelProfile, dimensions{}, lim), evs...); !reflect.DeepEqual(got, want) {
		t.Fatalf("reused bundles counted %v, a fresh aggregator %v", got, want)
	}
	if a.heldTuples() != 1 {
		t.Fatalf("held %d, want 1", a.heldTuples())
	}
}

// Every projection of the profiles only keeps or clears fields, and its
// mask tells whether it keeps a tuple whole and encodes its projection as
// keep and encodeKey do, for tuples with fields set or empty.
func TestProjMasks(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 15))
	values := []string{"", "a", "/api/v1/orders", strings.Repeat("x", 200)} // and a length of two bytes
	tuples := []tupleKey{{}}
	for i := range 1000 {
		var k tupleKey
		for _, f := range k.strings() {
			if i%2 == 0 || rnd.IntN(8) == 0 { // half of the tuples mostly empty: projections that clear nothing set
				*f = values[rnd.IntN(len(values))]
			}
		}
		k.status = []int64{0, 200, 503, -1, 1 << 40}[rnd.IntN(5)]
		k.targetPort = []int64{0, 8080}[rnd.IntN(2)]
		k.source = gateway.Source(rnd.IntN(3))
		k.stream, k.overflow = rnd.IntN(2) == 1, rnd.IntN(2) == 1
		tuples = append(tuples, k)
	}
	check := func(name string, p *projection) {
		t.Helper()
		m := newProjMask(p)
		if !m.ok {
			t.Fatalf("%s: projection not found to keep or clear fields", name)
		}
		for _, k := range tuples {
			pk := p.keep(k)
			if whole, want := m.whole(&k), pk == k; whole != want {
				t.Fatalf("%s, %+v: mask says whole %v, keep %v", name, k, whole, want)
			}
			if got, want := m.encodeFrom(nil, encodeKey(nil, &k)), encodeKey(nil, &pk); !bytes.Equal(got, want) {
				t.Fatalf("%s, %+v: mask encodes from the tuple's encoding %q, keep %q", name, k, got, want)
			}
		}
	}
	for _, prof := range profiles {
		for _, f := range prof.families {
			check(prof.name+" "+f.name, f.project)
		}
	}
	// Projections that clear each of the fields no profile clears yet.
	check("no overflow", &projection{keep: func(k tupleKey) tupleKey { k.overflow = false; return k }})
	check("no stream", &projection{keep: func(k tupleKey) tupleKey { k.stream = false; return k }})
	check("no status, port, source", &projection{keep: func(k tupleKey) tupleKey {
		k.status, k.targetPort, k.source = 0, 0, gateway.SourceUnknown
		return k
	}})
	// A projection that moves or sets a field is not a mask: resolveLocked
	// projects with keep.
	for _, p := range []*projection{
		{keep: func(k tupleKey) tupleKey { return tupleKey{service: k.route} }},
		{keep: func(k tupleKey) tupleKey { k.status = 0; k.targetPort = 7; return k }},
		{keep: func(k tupleKey) tupleKey { k.source = gateway.SourceUpstream; return k }},
	} {
		if newProjMask(p).ok {
			t.Errorf("a projection that moves or sets a field taken for a mask")
		}
	}
}

// What the aggregator holds per tuple and per emitted point is sized on
// purpose (a window of 10k routes holds tens of thousands of each): a
// bundle carries no inline room for the most families any profile has,
// and a point no exponential layout (it rides in bucketBuf).
func TestHeldStructSizes(t *testing.T) {
	if got := unsafe.Sizeof(bundle{}); got != 72 {
		t.Errorf("bundle is %d bytes, want 72", got)
	}
	if got := unsafe.Sizeof(series{}); got != 32 {
		t.Errorf("series is %d bytes, want 32 (two per cache line)", got)
	}
	if got := unsafe.Sizeof(seriesSet{}); got != 64 {
		t.Errorf("seriesSet is %d bytes, want 64 (one cache line)", got)
	}
	if got := unsafe.Sizeof(point{}); got != 56 {
		t.Errorf("point is %d bytes, want 56", got)
	}
}

// An exponential point's layout round-trips through bucketBuf, negative
// scale and offset included.
func TestExpoLayoutInBuckets(t *testing.T) {
	want := expoPoint{scale: -3, offset: -70000, n: 2, zero: 9}
	buf := appendExpo([]uint64{42}, want, []uint64{5, 6})
	p := point{bucketsStart: 1}
	got, counts := p.expo(buf)
	if got != want || len(counts) != 2 || counts[0] != 5 || counts[1] != 6 {
		t.Errorf("layout %+v counts %v, want %+v [5 6]", got, counts, want)
	}
}
