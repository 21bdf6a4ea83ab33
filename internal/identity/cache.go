package identity

import (
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/internal/prefetch"
)

// ways is the associativity of the cache: a key can live in one of the 4
// slots of its set, so two hot keys that share a set do not evict each other.
const ways = 4

// Cache is a bounded map from a label set to a handle V (for example the
// state of one series), built for a read-mostly hot path.
//
// Key: a namespace ns chosen by the caller (an exact id such as a registered
// metric, so equal attributes of two metrics are two keys) plus an attribute
// set. The caller supplies h = OfMap(attrs) (or a hash of its own, which is
// how tests force collisions); the cache mixes ns into it to pick a set.
//
// Layout: a power-of-two number of 4-way sets; a key may live in either of
// two sets chosen by its hash (two-choice hashing); each slot is an atomic pointer
// to an immutable entry {ns, h, Set, V}. A hit is confirmed by comparing ns
// and the real attributes (Set.Equal), never by the hash alone, so two label
// sets whose 64-bit hashes collide stay two entries.
//
// Bound: at most 4 × (number of sets) entries, the requested capacity rounded
// up. When both candidate sets are full, the first evicts round-robin: no recency is written on a hit, so hits
// never contend on a cache line. Eviction only drops the cache's copy of the
// handle; the owner keeps the authoritative state, so an evicted key costs the
// next caller a slow path (canonicalise, look up the owner) and nothing else:
// never a value, a start time or whether a series exists.
//
// Allocation: a miss carves its entry and its Set's encoding (with the
// order table) from slabs (carve), so it allocates only a fraction of a
// chunk.
//
// Concurrency: all methods are safe for concurrent use. Get takes no lock and
// does not allocate. Add, Delete and the miss path of GetOrCreate (Create)
// take the locks of the key's two sets only (a lock guards every 1,024th
// set), in lock index order; Add and Create also one of 64 slab locks,
// briefly, to carve the entry.
type Cache[V comparable] struct {
	sets  []cacheSet[V]
	locks []setLock // locks[i&lockMask] guards the writers of sets[i]
	mask  uint64
	// lockMask maps a set to its lock: at most maxLocks locks (16 KiB),
	// so that the miss path finds them in the CPU cache instead of
	// touching two more cold lines of a per-set lock array.
	lockMask uint64
	slabs    [slabStripes]entrySlab[V]
}

// slabStripes, slabChunk and bytesChunk shape the slabs new keys are carved
// from: a miss takes one of 64 stripe locks (by set), never a cache-wide
// one; a stripe allocates 16 entries at a time, and 4 KiB of encodings (about
// 25 Sets of 6 attributes with their order tables).
//
// Why slabs: an entry and a Set per new key were two allocations of every
// new series. The price is retention: a chunk stays alive while anything
// carved from it is referenced (a cached entry, or the caller's copy of a
// Set), so keys that churn (evictions, expiry) can keep dead neighbours
// alive beside a live one: at most 15 entries (56 bytes each) and 4 KiB of
// encodings. The chunks are small to keep that bounded next to the series
// state the caller keeps per key; a Set over a quarter of a chunk gets its
// own allocation.
const (
	slabStripes = 64
	slabChunk   = 16
	bytesChunk  = 4096
)

// entrySlab hands out entries and encoding bytes from chunks.
type entrySlab[V comparable] struct {
	mu    sync.Mutex
	free  []entry[V]
	bytes []byte
	_     [64 - 8 - 24 - 24]byte // keeps two stripes' locks off one cache line
}

// entry returns a new zero entry. The caller holds s.mu.
func (s *entrySlab[V]) entry() *entry[V] {
	if len(s.free) == 0 {
		s.free = make([]entry[V], slabChunk)
	}
	e := &s.free[0]
	s.free = s.free[1:]
	return e
}

// newEntry returns a new entry, from the slab of set a's stripe.
func (c *Cache[V]) newEntry(a uint64, ns, h uint64, set Set, order string, v V) *entry[V] {
	s := &c.slabs[a%slabStripes]
	s.mu.Lock()
	e := s.entry()
	s.mu.Unlock()
	*e = entry[V]{ns: ns, h: h, set: set, order: order, v: v}
	return e
}

// carve returns a new zero entry and a copy of enc, a Set's encoding (size
// bytes) and its order table (appendSetAndOrder), from the slabs of set
// a's stripe, under one lock. The copy is never written again, which is
// what makes the strings over it immutable.
func (c *Cache[V]) carve(a uint64, enc []byte, size int) (*entry[V], Set, string) {
	s := &c.slabs[a%slabStripes]
	s.mu.Lock()
	e := s.entry()
	if len(enc) == 0 {
		s.mu.Unlock()
		return e, Set{}, ""
	}
	var b []byte
	if len(enc) > bytesChunk/4 {
		b = make([]byte, len(enc))
	} else {
		if len(s.bytes) < len(enc) {
			s.bytes = make([]byte, bytesChunk)
		}
		b = s.bytes[:len(enc):len(enc)]
		s.bytes = s.bytes[len(enc):]
	}
	s.mu.Unlock()
	copy(b, enc)
	all := unsafe.String(unsafe.SliceData(b), len(b))
	return e, Set{enc: all[:size]}, all[size:]
}

// cacheSet is exactly one 64-byte cache line, so a probe reads one line
// before it dereferences the one entry whose hash matches. hashes[i] is
// written before slots[i] and both are re-checked against the entry, so a
// reader that sees a torn pair only misses, it never returns a wrong handle.
type cacheSet[V comparable] struct {
	hashes [ways]atomic.Uint64
	slots  [ways]atomic.Pointer[entry[V]]
}

// setLock serialises the writers of one set; readers never take it. Kept
// apart from the sets so writers do not dirty the lines readers probe.
type setLock struct {
	mu   sync.Mutex
	next uint32 // round-robin victim of its sets, guarded by mu
}

type entry[V comparable] struct {
	ns, h uint64
	set   Set
	// order is the order table of the map the entry was added with
	// (setAndOrder, sharing set's allocation): sources keep their order, so
	// most hits compare each attribute in place, in one pass, instead of
	// looking each up. Empty when an attribute is not a scalar.
	order string
	v     V
}

// matches reports whether e is the entry of (ns, attrs).
func (e *entry[V]) matches(ns, h uint64, attrs pcommon.Map) bool {
	if e.h != h || e.ns != ns {
		return false
	}
	if e.order != "" {
		if eq, sure := e.set.equalOrdered(e.order, attrs); sure {
			return eq
		}
	}
	return e.set.Equal(attrs)
}

// NewCache returns a cache holding at least capacity entries (minimum 4).
func NewCache[V comparable](capacity int) *Cache[V] {
	n := max(1, (capacity+ways-1)/ways)
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	nl := min(n, maxLocks)
	c := &Cache[V]{sets: make([]cacheSet[V], n), locks: make([]setLock, nl), mask: uint64(n - 1), lockMask: uint64(nl - 1)}
	c.prefault()
	return c
}

// prefault writes one word of every page of the sets, so the pages are
// mapped now, by the constructor, and not by page faults while the first
// series arrive (a large allocation can come straight from the OS,
// unmapped; 200k entries are 3.2 MB, 800 pages).
func (c *Cache[V]) prefault() {
	const perPage = 4096 / 64 // sets are one cache line each
	for i := 0; i < len(c.sets); i += perPage {
		c.sets[i].hashes[0].Store(0)
	}
}

// Capacity returns the number of entries the cache can hold.
func (c *Cache[V]) Capacity() int { return len(c.sets) * ways }

// pair returns the two sets a key may live in (two-choice hashing: with 4
// ways and two candidate sets a cache stays conflict-free to a far higher
// load than one set could, so a working set that fits does not thrash).
// The two may be the same set.
func (c *Cache[V]) pair(ns, h uint64) (a, b uint64) {
	k := Combine(ns, h)
	return k & c.mask, (k >> 32) & c.mask
}

// maxLocks bounds the writer locks; a power of two. Writers are the miss
// path only, so 1,024 stripes keep them from meeting.
const maxLocks = 1024

// lock locks the writers of sets a and b in lock index order, so two
// writers never deadlock. (Not a returned unlock closure: that was an allocation
// per miss.)
func (c *Cache[V]) lock(a, b uint64) {
	a, b = a&c.lockMask, b&c.lockMask
	if a > b {
		a, b = b, a
	}
	c.locks[a].mu.Lock()
	if b != a {
		c.locks[b].mu.Lock()
	}
}

// unlock undoes lock(a, b).
func (c *Cache[V]) unlock(a, b uint64) {
	a, b = a&c.lockMask, b&c.lockMask
	if b != a {
		c.locks[b].mu.Unlock()
	}
	c.locks[a].mu.Unlock()
}

func (s *cacheSet[V]) find(ns, h uint64, attrs pcommon.Map) *entry[V] {
	for i := range s.hashes {
		if s.hashes[i].Load() != h {
			continue
		}
		if e := s.slots[i].Load(); e != nil && e.matches(ns, h, attrs) {
			return e
		}
	}
	return nil
}

func (s *cacheSet[V]) store(i int, e *entry[V]) {
	if e == nil {
		s.slots[i].Store(nil)
		return
	}
	s.hashes[i].Store(e.h)
	s.slots[i].Store(e)
}

// free returns the number of empty slots and the index of one of them.
func (s *cacheSet[V]) free() (n, idx int) {
	for i := range s.slots {
		if s.slots[i].Load() == nil {
			if n == 0 {
				idx = i
			}
			n++
		}
	}
	return n, idx
}

// Get returns the handle cached for (ns, attrs), whose hash is h.
//
// Return values:
//   - (v, true): an entry with this ns and exactly these attributes is cached;
//   - (zero, false): none is, either because it was never added, because it
//     was evicted or deleted, or because h differs from the hash it was added
//     with. A false is never wrong about identity, only about speed.
//
// Get takes no lock and does not allocate; it may miss an Add that has not
// returned yet.
func (c *Cache[V]) Get(ns, h uint64, attrs pcommon.Map) (V, bool) {
	a, b := c.pair(ns, h)
	if e := c.sets[a].find(ns, h, attrs); e != nil {
		return e.v, true
	}
	if b != a {
		if e := c.sets[b].find(ns, h, attrs); e != nil {
			return e.v, true
		}
	}
	var zero V
	return zero, false
}

// Prefetch starts loading the two sets (ns, h) may live in, for a Get (or
// Create) of that key soon after, and returns at once. A caller that
// knows its next key while it works on the current one (a batch's next
// point) overlaps the next lookup's cache misses, two random lines of a
// large cache, with that work. Only a hint: it changes nothing Get sees.
func (c *Cache[V]) Prefetch(ns, h uint64) {
	a, b := c.pair(ns, h)
	prefetch.Line(uintptr(unsafe.Pointer(&c.sets[a])))
	prefetch.Line(uintptr(unsafe.Pointer(&c.sets[b])))
}

// Add caches v for (ns, set) with hash h, where set is SetOf(attrs), and
// records the order of attrs (hits from a source that keeps its attribute
// order are then confirmed in one pass). It reports whether another key
// was evicted to make room.
//
// Return values:
//   - false: an entry of the same (ns, set) was replaced (there is never more
//     than one), or a free slot was used;
//   - true: both candidate sets were full and the round-robin victim of the
//     first, a different key, was evicted.
func (c *Cache[V]) Add(ns, h uint64, attrs pcommon.Map, set Set, v V) bool {
	order := set.orderOf(attrs)
	a, b := c.pair(ns, h)
	e := c.newEntry(a, ns, h, set, order, v)
	c.lock(a, b)
	defer c.unlock(a, b)
	return c.addLocked(a, b, e)
}

// addLocked stores e; the caller holds the locks of sets a and b.
func (c *Cache[V]) addLocked(a, b uint64, e *entry[V]) bool {
	sa, sb := &c.sets[a], &c.sets[b]
	// One entry per key: replace it wherever it is. The hashes first:
	// under the locks a full slot's hash is its entry's, and dereferencing
	// the other keys' entries (cold: 2 per set at half load) was most of
	// the cost of adding to a large cache.
	for _, s := range [2]*cacheSet[V]{sa, sb} {
		for i := range s.slots {
			if s.hashes[i].Load() != e.h {
				continue
			}
			if old := s.slots[i].Load(); old != nil && old.h == e.h && old.ns == e.ns && old.set == e.set {
				s.store(i, e)
				return false
			}
		}
	}
	// Place into the emptier set (the "power of two choices"): it keeps the
	// fullest set far emptier than filling a first would.
	fa, ia := sa.free()
	fb, ib := sb.free()
	switch {
	case fa > 0 && fa >= fb:
		sa.store(ia, e)
		return false
	case fb > 0:
		sb.store(ib, e)
		return false
	}
	l := &c.locks[a&c.lockMask]
	victim := int(l.next % ways)
	l.next++
	sa.store(victim, e)
	return true
}

// GetOrCreate returns the handle of (ns, attrs), calling create on a miss.
//
// Return values:
//   - (v, true, false): a hit, exactly as Get; create is not called;
//   - (v, false, evicted): a miss; create was called once with the canonical
//     Set of attrs, its result is cached and returned, and evicted says
//     whether another key made room.
//
// Concurrent first misses for one key converge: create runs under the locks
// of the key's two sets, which are re-probed first, so while the entry stays
// cached exactly one caller creates and the others receive its handle. After
// an eviction create may run again for the same key, so create must itself
// be idempotent (look the handle up in the authoritative state before making
// one). create must not call back into this cache.
func (c *Cache[V]) GetOrCreate(ns, h uint64, attrs pcommon.Map, create func(Set) V) (v V, hit, evicted bool) {
	if v, ok := c.Get(ns, h, attrs); ok {
		return v, true, false
	}
	return c.Create(ns, h, attrs, nil, create)
}

// Create is GetOrCreate for a caller whose Get has just missed: it goes
// straight to the locked re-probe, so a miss probes the two sets once
// without the locks instead of twice. Return values and concurrency are
// GetOrCreate's (hit: another caller added the key meanwhile). ko, when not
// nil, is the caller's KeyOrder (one per goroutine), which speeds up the
// canonicalisation of maps whose keys come in the order of the last.
func (c *Cache[V]) Create(ns, h uint64, attrs pcommon.Map, ko *KeyOrder, create func(Set) V) (v V, hit, evicted bool) {
	a, b := c.pair(ns, h)
	c.lock(a, b)
	defer c.unlock(a, b)
	// Re-probe under the locks: another miss for the same key may have
	// added it between our Get and the Lock.
	if e := c.sets[a].find(ns, h, attrs); e != nil {
		return e.v, true, false
	}
	if e := c.sets[b].find(ns, h, attrs); e != nil {
		return e.v, true, false
	}
	var buf [encScratch]byte
	enc, size := appendSetAndOrder(buf[:0], attrs, ko)
	e, set, order := c.carve(a, enc, size)
	v = create(set)
	*e = entry[V]{ns: ns, h: h, set: set, order: order, v: v}
	return v, false, c.addLocked(a, b, e)
}

// Delete removes the entry of (ns, set) if it still holds v, and reports
// whether it did. Comparing v keeps a late Delete (say, of an expired series)
// from removing the entry of a newer handle added for the same key.
func (c *Cache[V]) Delete(ns, h uint64, set Set, v V) bool {
	a, b := c.pair(ns, h)
	c.lock(a, b)
	defer c.unlock(a, b)
	for _, s := range [2]*cacheSet[V]{&c.sets[a], &c.sets[b]} {
		for i := range s.slots {
			if s.hashes[i].Load() != h {
				continue // as in addLocked: no cold entry for another key
			}
			if e := s.slots[i].Load(); e != nil && e.h == h && e.ns == ns && e.set == set && e.v == v {
				s.store(i, nil)
				return true
			}
		}
	}
	return false
}
