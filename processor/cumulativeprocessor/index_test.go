package cumulativeprocessor

import (
	"math/rand/v2"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/internal/identity"
)

// TestStreamIndexAgainstAMap: inserts through growth, chains on shared
// keys, and sweeps (removeIf's rebuilds) keep the index equal to a Go map
// of the same streams.
func TestStreamIndexAgainstAMap(t *testing.T) {
	type key struct{ metric, h uint64 }
	var sh shard
	want := map[key][]*stream{}
	descs := []*metricDesc{{id: 1}, {id: 2}, {id: 3}}
	rng := rand.New(rand.NewPCG(1, 2))
	add := func(i int) {
		d := descs[rng.IntN(len(descs))]
		h := uint64(rng.IntN(3000)) // repeats: chains of one key
		m := pcommon.NewMap()
		m.PutStr("i", strconv.Itoa(i))
		set := identity.SetOf(m)
		if s, _ := sh.find(d.id, h, set); s != nil {
			t.Fatalf("stream %d found before its insert", i)
		}
		_, slot := sh.find(d.id, h, set)
		s := sh.newStream(d, h, set)
		s.seen = int64(i)
		sh.insert(s, slot)
		want[key{d.id, h}] = append(want[key{d.id, h}], s)
	}
	check := func(stage string) {
		t.Helper()
		n := 0
		for k, ss := range want {
			for _, s := range ss {
				if got, _ := sh.find(k.metric, k.h, s.attrs); got != s {
					t.Fatalf("%s: stream of %v not found", stage, k)
				}
				n++
			}
		}
		if sh.streams.len() != len(want) {
			t.Fatalf("%s: %d keys, want %d", stage, sh.streams.len(), len(want))
		}
		for range sh.all() {
			n--
		}
		if n != 0 {
			t.Fatalf("%s: all yields %d streams more than the map holds", stage, -n)
		}
	}
	i := 0
	for ; i < 5000; i++ {
		add(i)
	}
	check("after inserts")
	for _, cut := range []int64{2500, 4000, 5000} {
		sh.removeIf(func(s *stream) bool { return s.seen < cut }, nil)
		for k, ss := range want {
			kept := ss[:0]
			for _, s := range ss {
				if s.seen >= cut {
					kept = append(kept, s)
				}
			}
			if len(kept) == 0 {
				delete(want, k)
			} else {
				want[k] = kept
			}
		}
		check("after a sweep to " + strconv.FormatInt(cut, 10))
		for range 700 {
			add(i)
			i++
		}
		check("after more inserts")
	}
}

// TestStreamIndexLoad: an index holds up to 7/8 of its slots before it
// doubles (indexLoadNum), so the 1,562 keys a shard holds at 100k streams
// fit 2,048 slots, not 4,096 (as at 3/4): the memory a creation burst
// writes. Every key is still found after the growths.
func TestStreamIndexLoad(t *testing.T) {
	var sh shard
	d := &metricDesc{id: 1}
	var set identity.Set
	streams := make([]*stream, 0, 1792)
	for i := range 1792 { // 7/8 of 2,048
		h := identity.Combine(uint64(i), 7)
		_, slot := sh.find(d.id, h, set)
		s := sh.newStream(d, h, set)
		sh.insert(s, slot)
		streams = append(streams, s)
		if i == 1561 && len(sh.streams.slots) != 2048 {
			t.Fatalf("1,562 keys in %d slots, want 2,048", len(sh.streams.slots))
		}
	}
	if len(sh.streams.slots) != 2048 {
		t.Fatalf("1,792 keys (7/8) in %d slots, want 2,048", len(sh.streams.slots))
	}
	for _, s := range streams {
		if got, _ := sh.find(d.id, s.h, set); got != s {
			t.Fatalf("stream of hash %x not found", s.h)
		}
	}
	h := identity.Combine(1792, 7)
	_, slot := sh.find(d.id, h, set)
	sh.insert(sh.newStream(d, h, set), slot)
	if len(sh.streams.slots) != 4096 {
		t.Fatalf("one key past 7/8: %d slots, want 4,096", len(sh.streams.slots))
	}
}
