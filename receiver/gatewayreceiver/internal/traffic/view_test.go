package traffic

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// Every view of the profiles only keeps or clears fields, and its mask
// tells whether it keeps a tuple whole and encodes its projection as keep
// and encodeTuple do, for tuples with fields set or empty.
func TestMasks(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 15))
	values := []string{"", "a", "/api/v1/orders", strings.Repeat("x", 200)} // and a length of two bytes
	tuples := []tuple{{}}
	for i := range 1000 {
		var k tuple
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
	check := func(name string, p *view) {
		t.Helper()
		m := newMask(p)
		if !m.ok {
			t.Fatalf("%s: view not found to keep or clear fields", name)
		}
		for _, k := range tuples {
			pk := p.keep(k)
			if whole, want := m.whole(&k), pk == k; whole != want {
				t.Fatalf("%s, %+v: mask says whole %v, keep %v", name, k, whole, want)
			}
			if got, want := m.encodeFrom(nil, encodeTuple(nil, &k)), encodeTuple(nil, &pk); !bytes.Equal(got, want) {
				t.Fatalf("%s, %+v: mask encodes from the tuple's encoding %q, keep %q", name, k, got, want)
			}
		}
	}
	for _, prof := range profiles {
		for _, f := range prof.families {
			check(prof.name+" "+f.name, f.view)
		}
	}
	// Views that clear each of the fields no profile clears yet.
	check("no overflow", &view{keep: func(k tuple) tuple { k.overflow = false; return k }})
	check("no stream", &view{keep: func(k tuple) tuple { k.stream = false; return k }})
	check("no status, port, source", &view{keep: func(k tuple) tuple {
		k.status, k.targetPort, k.source = 0, 0, gateway.SourceUnknown
		return k
	}})
	// A view that moves or sets a field is not a mask: resolve projects
	// with keep.
	for _, p := range []*view{
		{keep: func(k tuple) tuple { return tuple{service: k.route} }},
		{keep: func(k tuple) tuple { k.status = 0; k.targetPort = 7; return k }},
		{keep: func(k tuple) tuple { k.source = gateway.SourceUpstream; return k }},
	} {
		if newMask(p).ok {
			t.Errorf("a view that moves or sets a field taken for a mask")
		}
	}
}
