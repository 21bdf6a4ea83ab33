package identity

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// fixedKeys returns n distinct attribute maps and hashes for them from a
// seeded generator (the cache takes the caller's hash), so a test's sets,
// and so its evictions, are the same in every run.
func fixedKeys(n int, seed uint64) ([]pcommon.Map, []uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = r.Uint64()
	}
	return attrMaps(n), hashes
}

// TestCacheStartsSmallAndGrowsKeepingEntries fills a cache bounded at the
// processor's default (200k) with 20k keys: its table starts at 1,024
// entries, ends between two and four times the keys held, and every entry
// added before a growth is found after it: below its capacity the cache
// neither evicts nor drops.
func TestCacheStartsSmallAndGrowsKeepingEntries(t *testing.T) {
	const n = 20_000
	c := newCache[int](200_000, firstSets)
	if c.Capacity() != 262_144 || c.Slots() != firstSets*ways {
		t.Fatalf("new cache: capacity %d, slots %d; want 262144, %d", c.Capacity(), c.Slots(), firstSets*ways)
	}
	// Two label sets whose hashes collide stay two entries through every
	// growth.
	a, b := gatewayAttrs("/a"), gatewayAttrs("/b")
	c.Add(2, 42, a, SetOf(a), -1)
	c.Add(2, 42, b, SetOf(b), -2)

	maps, hashes := fixedKeys(n, 1)
	evicted := 0
	for i, m := range maps {
		_, hit, ev := c.GetOrCreate(1, hashes[i], m, func(Set) int { return i })
		if hit {
			t.Fatalf("key %d hit before it was created", i)
		}
		if ev {
			evicted++
		}
	}
	if s := c.Slots(); s < 2*n || s > 4*n {
		t.Errorf("%d keys in %d slots, want between %d and %d", n, s, 2*n, 4*n)
	}
	lost := 0
	for i, m := range maps {
		v, ok := c.Get(1, hashes[i], m)
		if !ok {
			lost++
		} else if v != i {
			t.Fatalf("key %d: Get = %d", i, v)
		}
	}
	if evicted != 0 || lost != 0 {
		t.Errorf("below the capacity: %d evicted, %d of %d keys lost", evicted, lost, n)
	}
	if v, ok := c.Get(2, 42, a); !ok || v != -1 {
		t.Errorf("colliding key a: Get = %d, %v", v, ok)
	}
	if v, ok := c.Get(2, 42, b); !ok || v != -2 {
		t.Errorf("colliding key b: Get = %d, %v", v, ok)
	}
}

// TestCacheGrowthKeepsDeletes: the writer after the insert that filled the
// table to half grows it before its own write; deletes made before and
// after the growth stay deleted, the other entries stay.
func TestCacheGrowthKeepsDeletes(t *testing.T) {
	c := newCache[int](4096, firstSets)
	half := firstSets * ways / growLoad
	maps, hashes := fixedKeys(half+1, 2)
	set := func(i int) Set { return SetOf(maps[i]) }
	for i := range half {
		c.Add(1, hashes[i], maps[i], set(i), i)
	}
	if c.Slots() != firstSets*ways {
		t.Fatalf("grew before the next write: %d slots", c.Slots())
	}
	if !c.Delete(1, hashes[0], set(0), 0) {
		t.Fatal("Delete(0) found nothing")
	}
	if c.Slots() != growBy*firstSets*ways {
		t.Fatalf("the write after half load did not grow the table: %d slots", c.Slots())
	}
	if !c.Delete(1, hashes[1], set(1), 1) {
		t.Fatal("Delete(1) after the growth found nothing")
	}
	if c.Delete(1, hashes[2], set(2), -2) {
		t.Fatal("Delete of another handle removed the entry")
	}
	c.Add(1, hashes[half], maps[half], set(half), half)
	for i := range half + 1 {
		v, ok := c.Get(1, hashes[i], maps[i])
		if want := i > 1; ok != want || (ok && v != i) {
			t.Errorf("key %d: Get = %d, %v; want present=%v", i, v, ok, want)
		}
	}
}

// TestCacheGrowthStopsAtCapacity adds ten times the capacity: the table
// grows to exactly the capacity and no further, then evicts as a cache
// created at its full size does.
func TestCacheGrowthStopsAtCapacity(t *testing.T) {
	c := newCache[int](5000, firstSets) // 1,250 sets, rounded up: 2,048 sets, 8,192 entries
	if c.Capacity() != 8192 {
		t.Fatalf("capacity %d, want 8192", c.Capacity())
	}
	n := 10 * c.Capacity()
	maps, hashes := fixedKeys(n, 3)
	evicted := 0
	for i, m := range maps {
		if c.Add(1, hashes[i], m, SetOf(m), i) {
			evicted++
		}
		if s := c.Slots(); s > c.Capacity() {
			t.Fatalf("after %d keys: %d slots, over the capacity %d", i+1, s, c.Capacity())
		}
	}
	if c.Slots() != c.Capacity() {
		t.Fatalf("%d slots after %d keys, want the capacity %d", c.Slots(), n, c.Capacity())
	}
	held := 0
	for i, m := range maps {
		if v, ok := c.Get(1, hashes[i], m); ok {
			if v != i {
				t.Fatalf("key %d: Get = %d", i, v)
			}
			held++
		}
	}
	if held != n-evicted || held > c.Capacity() {
		t.Errorf("%d held of %d added, %d evicted; capacity %d", held, n, evicted, c.Capacity())
	}
	// The newest key is never the victim of its own insert.
	if _, ok := c.Get(1, hashes[n-1], maps[n-1]); !ok {
		t.Error("the last key added is not cached")
	}
}

// keysInSets returns n hashes whose keys, in namespace 1, all live in sets
// 0 and 1 of a table of firstSets sets, and differ beyond.
func keysInSets(n int) []uint64 {
	r := rand.New(rand.NewPCG(6, 1))
	var hs []uint64
	for len(hs) < n {
		h := r.Uint64()
		if k := Combine(1, h); k%firstSets == 0 && (k>>32)%firstSets == 1 {
			hs = append(hs, h)
		}
	}
	return hs
}

// TestCacheGrowsRatherThanEvicts: a quarter full, a table whose two sets
// of a new key are full grows instead of evicting; below a quarter (keys
// whose hashes fully collide, which no growth parts) it evicts.
func TestCacheGrowsRatherThanEvicts(t *testing.T) {
	c := newCache[int](1<<20, firstSets)
	quarter := firstSets * ways / 4
	maps, hashes := fixedKeys(quarter+2*ways+1, 7)
	for i := range quarter {
		c.Add(2, hashes[i], maps[i], SetOf(maps[i]), i)
	}
	crafted := keysInSets(2*ways + 1)
	for j, h := range crafted {
		m := maps[quarter+j]
		if c.Add(1, h, m, SetOf(m), j) {
			t.Fatalf("crafted key %d evicted at %d slots", j, c.Slots())
		}
	}
	if c.Slots() != growBy*firstSets*ways {
		t.Fatalf("%d slots after the conflict, want %d", c.Slots(), growBy*firstSets*ways)
	}
	for j, h := range crafted {
		if v, ok := c.Get(1, h, maps[quarter+j]); !ok || v != j {
			t.Errorf("crafted key %d: Get = %d, %v", j, v, ok)
		}
	}

	// Nine label sets with one hash: the same two sets in every table.
	c = newCache[int](1<<20, firstSets)
	evicted := 0
	for i := range 2*ways + 1 {
		if c.Add(1, 42, maps[i], SetOf(maps[i]), i) {
			evicted++
		}
	}
	if evicted == 0 || c.Slots() != firstSets*ways {
		t.Errorf("colliding keys: %d evicted, %d slots; want an eviction, %d slots", evicted, c.Slots(), firstSets*ways)
	}
}

// handle is a stress test's V: it knows its key.
type handle struct {
	key int
	set Set
}

// TestCacheConcurrentGrowth runs creators, a deleter and a reader on new
// caches while they grow from 1,024 entries to 64k (race detector
// included), for about a second:
//   - concurrent first misses converge across growths: creates beyond one
//     per key are accounted for by evictions;
//   - a Get never returns another key's handle;
//   - a Delete is never undone by a growth: after it returns, the
//     deleter's own Get misses (no one else writes its keys);
//   - every created key is cached at the end but those evicted.
func TestCacheConcurrentGrowth(t *testing.T) {
	const (
		keys      = 20_000 // creators' keys: 30% of the last table
		delKeys   = 2_000  // the deleter's own keys, after them
		creators  = 4
		capacity  = 1 << 16
		roundTime = time.Second
	)
	budget := roundTime
	if testing.Short() {
		budget = roundTime / 5
	}
	maps, hashes := fixedKeys(keys+delKeys, 4)
	deadline := time.Now().Add(budget)
	for round := 0; round == 0 || time.Now().Before(deadline); round++ {
		c := newCache[*handle](capacity, firstSets)
		var (
			mu        sync.Mutex
			auth      = map[int]*handle{} // authoritative: create is idempotent
			creates   atomic.Int64
			evictions atomic.Int64
			stop      atomic.Bool
			wg, cwg   sync.WaitGroup // all, the creators
		)
		create := func(i int) func(Set) *handle {
			return func(s Set) *handle {
				creates.Add(1)
				mu.Lock()
				defer mu.Unlock()
				if h, ok := auth[i]; ok {
					return h
				}
				h := &handle{key: i, set: s}
				auth[i] = h
				return h
			}
		}
		for g := range creators {
			cwg.Go(func() {
				// Each creator walks the keys from another point, so
				// first misses of one key meet.
				for j := range keys {
					i := (j + g*keys/creators/2) % keys
					h, _, ev := c.GetOrCreate(1, hashes[i], maps[i], create(i))
					if ev {
						evictions.Add(1)
					}
					if h.key != i {
						t.Errorf("key %d: got the handle of %d", i, h.key)
						return
					}
				}
			})
		}
		wg.Go(func() { // the deleter: Create or Add, Delete, Get must miss
			for j := 0; !stop.Load(); j++ {
				i := keys + j%delKeys
				h := &handle{key: i, set: SetOf(maps[i])}
				if j%2 == 0 {
					if c.Add(1, hashes[i], maps[i], h.set, h) {
						evictions.Add(1)
					}
				} else {
					var ev bool
					h, _, ev = c.Create(1, hashes[i], maps[i], nil, func(Set) *handle { return h })
					if ev {
						evictions.Add(1)
					}
				}
				c.Delete(1, hashes[i], h.set, h) // false if evicted meanwhile
				if got, ok := c.Get(1, hashes[i], maps[i]); ok {
					t.Errorf("deleted key %d still cached (same handle: %v)", i, got == h)
					return
				}
			}
		})
		wg.Go(func() { // the reader
			r := rand.New(rand.NewPCG(uint64(round), 5))
			for !stop.Load() {
				i := r.IntN(keys)
				if h, ok := c.Get(1, hashes[i], maps[i]); ok && h.key != i {
					t.Errorf("key %d: Get returned the handle of %d", i, h.key)
					return
				}
			}
		})
		cwg.Wait()
		stop.Store(true) // the deleter and the reader
		wg.Wait()
		if t.Failed() {
			return
		}
		lost := 0
		for i := range keys {
			if h, ok := c.Get(1, hashes[i], maps[i]); !ok {
				lost++
			} else if h != auth[i] {
				t.Fatalf("round %d: key %d: another handle than the authoritative one", round, i)
			}
		}
		if extra := creates.Load() - keys; extra > evictions.Load() {
			t.Fatalf("round %d: %d creates beyond one per key, %d evictions", round, extra, evictions.Load())
		}
		if int64(lost) > evictions.Load() {
			t.Fatalf("round %d: %d keys lost, %d evictions", round, lost, evictions.Load())
		}
		t.Logf("round %d: %d creates, %d evictions, %d keys lost", round, creates.Load(), evictions.Load(), lost)
		if c.Slots() <= 2*keys || c.Slots() > c.Capacity() {
			t.Fatalf("round %d: %d slots for %d keys, capacity %d", round, c.Slots(), keys, c.Capacity())
		}
	}
}

// firstSets is the first table of the caches these tests grow: small, so
// that they grow after a few hundred keys.
const firstSets = 256
