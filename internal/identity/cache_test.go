package identity

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestCacheHitMissAndNamespaces(t *testing.T) {
	c := NewCache[int](16)
	a := gatewayAttrs("/a")
	if _, ok := c.Get(1, OfMap(a), a); ok {
		t.Fatal("hit on an empty cache")
	}
	if c.Add(1, OfMap(a), a, SetOf(a), 10) {
		t.Fatal("Add into an empty cache evicted")
	}
	if v, ok := c.Get(1, OfMap(a), a); !ok || v != 10 {
		t.Fatalf("Get = %d, %v; want 10, true", v, ok)
	}
	// Same attributes in another namespace (another metric) are another key.
	if _, ok := c.Get(2, OfMap(a), a); ok {
		t.Fatal("namespace 2 hit the entry of namespace 1")
	}
	// Re-adding a key replaces its entry instead of duplicating it.
	c.Add(1, OfMap(a), a, SetOf(a), 11)
	if v, _ := c.Get(1, OfMap(a), a); v != 11 {
		t.Fatalf("after replace Get = %d, want 11", v)
	}
	if c.Delete(1, OfMap(a), SetOf(a), 10) {
		t.Fatal("Delete removed an entry holding another value")
	}
	if !c.Delete(1, OfMap(a), SetOf(a), 11) {
		t.Fatal("Delete did not remove the entry")
	}
	if _, ok := c.Get(1, OfMap(a), a); ok {
		t.Fatal("hit after Delete")
	}
}

// TestCacheForcedCollision gives two different label sets the same hash, as
// a 64-bit (or 128-bit) collision would: they must stay two entries.
func TestCacheForcedCollision(t *testing.T) {
	const h = 42 // the test hook: callers pass the hash
	c := NewCache[string](4)
	a, b := gatewayAttrs("/a"), gatewayAttrs("/b")
	c.Add(7, h, a, SetOf(a), "a")
	c.Add(7, h, b, SetOf(b), "b")
	if v, ok := c.Get(7, h, a); !ok || v != "a" {
		t.Fatalf("Get(a) = %q, %v; want a, true", v, ok)
	}
	if v, ok := c.Get(7, h, b); !ok || v != "b" {
		t.Fatalf("Get(b) = %q, %v; want b, true", v, ok)
	}
	other := gatewayAttrs("/c")
	if _, ok := c.Get(7, h, other); ok {
		t.Fatal("a third set with the same hash hit")
	}
}

func TestCacheEvictionIsBoundedAndRoundRobin(t *testing.T) {
	c := NewCache[int](4) // one set of 4 ways
	if c.Capacity() != 4 {
		t.Fatalf("capacity = %d, want 4", c.Capacity())
	}
	maps := make([]pcommon.Map, 6)
	evictions := 0
	for i := range maps {
		maps[i] = gatewayAttrs(string(rune('a' + i)))
		if c.Add(0, OfMap(maps[i]), maps[i], SetOf(maps[i]), i) {
			evictions++
		}
	}
	if evictions != 2 {
		t.Fatalf("evictions = %d, want 2", evictions)
	}
	// Round-robin: the first two added were evicted, the last four remain.
	for i, m := range maps {
		v, ok := c.Get(0, OfMap(m), m)
		if want := i >= 2; ok != want || (ok && v != i) {
			t.Errorf("entry %d: Get = %d, %v; want present=%v", i, v, ok, want)
		}
	}
}

func TestCacheGetOrCreate(t *testing.T) {
	c := NewCache[*int](8)
	m := gatewayAttrs("/a")
	var created int
	create := func(s Set) *int {
		created++
		if s != SetOf(m) {
			t.Errorf("create got set %q, want %q", s, SetOf(m))
		}
		return new(int)
	}
	v1, hit, _ := c.GetOrCreate(3, OfMap(m), m, create)
	v2, hit2, _ := c.GetOrCreate(3, OfMap(m), m, create)
	if hit || !hit2 || v1 != v2 || created != 1 {
		t.Fatalf("hit=%v hit2=%v same=%v created=%d; want false true true 1", hit, hit2, v1 == v2, created)
	}
}

// TestCacheConcurrentFirstMissesConverge starts many goroutines that miss
// on the same key at once: create must run once and all must get its handle.
func TestCacheConcurrentFirstMissesConverge(t *testing.T) {
	const goroutines = 16
	c := NewCache[*int](1024)
	var created atomic.Int32
	got := make([]*int, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			m := gatewayAttrs("/same") // each goroutine has its own map
			<-start
			got[g], _, _ = c.GetOrCreate(1, OfMap(m), m, func(Set) *int {
				created.Add(1)
				return new(int)
			})
		})
	}
	close(start)
	wg.Wait()
	if n := created.Load(); n != 1 {
		t.Fatalf("create ran %d times, want 1", n)
	}
	for g := range got {
		if got[g] != got[0] {
			t.Fatalf("goroutine %d got another handle", g)
		}
	}
}

func TestCacheHitDoesNotAllocate(t *testing.T) {
	c := NewCache[*int](1024)
	m := gatewayAttrs("/a")
	h := OfMap(m)
	c.Add(1, h, m, SetOf(m), new(int))
	allocs := testing.AllocsPerRun(100, func() {
		if _, ok := c.Get(1, h, m); !ok {
			t.Fatal("miss")
		}
	})
	if allocs != 0 {
		t.Fatalf("Get hit allocated %.1f times, want 0", allocs)
	}
	create := func(Set) *int { panic("create on a hit") }
	allocs = testing.AllocsPerRun(100, func() { c.GetOrCreate(1, h, m, create) })
	if allocs != 0 {
		t.Fatalf("GetOrCreate hit allocated %.1f times, want 0", allocs)
	}
}

// TestCacheHitInAnotherOrder: the entry records the order it was added in;
// the same set arriving in another order (or differing in one value at the
// recorded place) must still be judged exactly.
func TestCacheHitInAnotherOrder(t *testing.T) {
	c := NewCache[int](16)
	a := pcommon.NewMap()
	a.PutStr("x", "1")
	a.PutStr("y", "2")
	a.PutInt("z", 3)
	c.Add(1, OfMap(a), a, SetOf(a), 5)

	reordered := pcommon.NewMap()
	reordered.PutInt("z", 3)
	reordered.PutStr("x", "1")
	reordered.PutStr("y", "2")
	if v, ok := c.Get(1, OfMap(reordered), reordered); !ok || v != 5 {
		t.Fatalf("reordered: Get = %d, %v; want 5, true", v, ok)
	}
	changed := pcommon.NewMap()
	a.CopyTo(changed)
	changed.PutStr("y", "3")
	if _, ok := c.Get(1, OfMap(a), changed); ok { // same hash forced: only the labels differ
		t.Fatal("a map with another value hit")
	}
	renamed := pcommon.NewMap()
	renamed.PutStr("x", "1")
	renamed.PutStr("w", "2")
	renamed.PutInt("z", 3)
	if _, ok := c.Get(1, OfMap(a), renamed); ok {
		t.Fatal("a map with another key hit")
	}
}

// TestCreateSharing: a key created with share naming a namespace that holds
// the same attributes, in the same order, takes that entry's encoding (one
// copy for both); with share holding other attributes, the same ones in
// another order (its order table would send every hit to the slow
// comparison), or none, it gets its own. Either way its Set is exactly
// SetOf(attrs), and later hits find it.
func TestCreateSharing(t *testing.T) {
	c := NewCache[int](64)
	a, b := gatewayAttrs("/a"), gatewayAttrs("/b")
	reordered := pcommon.NewMap()
	for _, k := range []string{"consumer", "upstream", "service.name", "http.response.status_code", "http.request.method", "http.route"} {
		v, _ := a.Get(k)
		v.CopyTo(reordered.PutEmpty(k))
	}
	created := map[string]Set{}
	create := func(name string) func(Set) int {
		return func(s Set) int { created[name] = s; return len(created) }
	}
	c.Create(1, OfMap(a), a, nil, create("1/a"))
	c.CreateSharing(2, OfMap(a), a, nil, 1, create("2/a shared"))
	c.CreateSharing(3, OfMap(b), b, nil, 1, create("3/b share misses"))
	c.CreateSharing(4, OfMap(a), a, nil, 0, create("4/a no share"))
	c.CreateSharing(5, OfMap(reordered), reordered, nil, 1, create("5/a reordered"))
	data := func(name string) *byte { return unsafe.StringData(created[name].enc) }
	if data("2/a shared") != data("1/a") {
		t.Error("2/a: did not take 1/a's encoding")
	}
	for _, name := range []string{"3/b share misses", "4/a no share", "5/a reordered"} {
		if data(name) == data("1/a") {
			t.Errorf("%s: took 1/a's encoding", name)
		}
	}
	for name, want := range map[string]Set{"1/a": SetOf(a), "2/a shared": SetOf(a), "3/b share misses": SetOf(b),
		"4/a no share": SetOf(a), "5/a reordered": SetOf(a)} {
		if created[name] != want {
			t.Errorf("%s: Set %q, want %q", name, created[name].enc, want.enc)
		}
	}
	for ns, m := range map[uint64]pcommon.Map{1: a, 2: a, 3: b, 4: a, 5: reordered} {
		if _, ok := c.Get(ns, OfMap(m), m); !ok {
			t.Errorf("namespace %d: created key not found", ns)
		}
	}
}

// TestPrefetchValue: the pipelined lookup's hints return the handle of the
// entry whose namespace and hash match, unconfirmed (a colliding label set
// gets its collider's: only a hint), nothing for a key not cached, and
// neither allocates nor changes what Get returns.
func TestPrefetchValue(t *testing.T) {
	c := NewCache[*int](1024)
	a, b := gatewayAttrs("/a"), gatewayAttrs("/b")
	va := new(int)
	c.Add(1, OfMap(a), a, SetOf(a), va)
	c.Add(2, 42, a, SetOf(a), new(int)) // a forced hash

	c.PrefetchEntry(1, OfMap(a))
	if v, ok := c.PrefetchValue(1, OfMap(a)); !ok || v != va {
		t.Fatalf("PrefetchValue of a cached key = %p, %v; want %p, true", v, ok, va)
	}
	c.PrefetchEntry(1, OfMap(b))
	if v, ok := c.PrefetchValue(1, OfMap(b)); ok {
		t.Fatalf("PrefetchValue of a key not cached = %p, true", v)
	}
	if _, ok := c.PrefetchValue(3, OfMap(a)); ok {
		t.Fatal("PrefetchValue found a key of another namespace")
	}
	// b under a's forced hash: the candidate is a's handle, which Get
	// (the lookup) never returns for b.
	if _, ok := c.PrefetchValue(2, 42); !ok {
		t.Fatal("PrefetchValue missed the entry of ns 2, hash 42")
	}
	if _, ok := c.Get(2, 42, b); ok {
		t.Fatal("Get returned a colliding label set's handle")
	}
	allocs := testing.AllocsPerRun(100, func() {
		c.Prefetch(1, OfMap(a))
		c.PrefetchEntry(1, OfMap(a))
		c.PrefetchValue(1, OfMap(a))
	})
	if allocs != 0 {
		t.Fatalf("the prefetch steps allocated %.1f times, want 0", allocs)
	}
	if v, ok := c.Get(1, OfMap(a), a); !ok || v != va {
		t.Fatalf("Get after the prefetches = %p, %v; want %p, true", v, ok, va)
	}
}

// held is a handle that holds its own cache entry (Entry).
type held struct {
	n     int
	entry Entry[*held]
}

// TestEntryHeldByItsHandle: CreateSharingInto caches a handle in the entry
// the handle holds (no entry of the cache's own), fills it once, and takes
// it back after an eviction without writing it again; a nil entry gets one
// of the cache's own; an entry filled for one key refuses another.
func TestEntryHeldByItsHandle(t *testing.T) {
	c := NewCache[*held](4) // one set of 4 ways: the fifth key evicts
	maps := make([]pcommon.Map, 5)
	hs := make([]*held, 5)
	for i := range maps {
		maps[i] = gatewayAttrs("/" + string(rune('a'+i)))
		hs[i] = &held{n: i}
	}
	into := func(i int) func(Set) (*held, *Entry[*held]) {
		return func(Set) (*held, *Entry[*held]) { return hs[i], &hs[i].entry }
	}
	for i := range 4 {
		if v, hit, _ := c.CreateSharingInto(1, OfMap(maps[i]), maps[i], nil, 0, into(i)); hit || v != hs[i] {
			t.Fatalf("create %d = %v, hit %v", i, v, hit)
		}
		if e := c.t.Load().lookup(1, OfMap(maps[i]), maps[i]); e != &hs[i].entry {
			t.Fatalf("key %d is cached in %p, not in its handle's entry %p", i, e, &hs[i].entry)
		}
		if hs[i].entry.order == "" || !hs[i].entry.filled {
			t.Fatalf("key %d: entry not filled with its order table", i)
		}
	}
	// The fifth key evicts one of the four, whose entry stays filled.
	if _, _, evicted := c.CreateSharingInto(1, OfMap(maps[4]), maps[4], nil, 0, into(4)); !evicted {
		t.Fatal("the fifth key evicted nothing")
	}
	gone := -1
	for i := range 4 {
		if _, ok := c.Get(1, OfMap(maps[i]), maps[i]); !ok {
			gone = i
		}
	}
	if gone < 0 {
		t.Fatal("no key was evicted")
	}
	before := hs[gone].entry
	c.AddEntry(1, OfMap(maps[gone]), maps[gone], SetOf(maps[gone]), hs[gone], &hs[gone].entry)
	if v, ok := c.Get(1, OfMap(maps[gone]), maps[gone]); !ok || v != hs[gone] {
		t.Fatalf("the evicted key added back = %v, %v", v, ok)
	}
	if hs[gone].entry != before {
		t.Fatal("adding an entry back rewrote it")
	}
	// A handle that is not the key's own: the cache's own entry.
	other := gatewayAttrs("/other")
	c.CreateSharingInto(2, OfMap(other), other, nil, 0, func(Set) (*held, *Entry[*held]) { return hs[0], nil })
	if e := c.t.Load().lookup(2, OfMap(other), other); e == nil || e == &hs[0].entry || e.v != hs[0] {
		t.Fatalf("a nil entry: cached in %p (the handle's own is %p)", e, &hs[0].entry)
	}
	defer func() {
		if recover() == nil {
			t.Error("an entry filled for one key was added under another")
		}
	}()
	c.AddEntry(3, OfMap(other), other, SetOf(other), hs[1], &hs[1].entry)
}
