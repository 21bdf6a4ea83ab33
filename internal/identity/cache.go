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
// how tests force collisions); the cache mixes ns into it, k = Combine(ns, h),
// to pick a set.
//
// Layout: a table of a power-of-two number of 4-way sets; a key may live in
// either of two sets chosen by k (two-choice hashing); each slot is an atomic
// pointer to an immutable entry {ns, h, Set, V}, beside k. A hit is confirmed
// by comparing ns and the real attributes (Set.Equal), never by the hash
// alone, so two label sets whose 64-bit hashes collide stay two entries.
//
// Growth: the table starts with initialSets sets (or fewer, for a smaller
// capacity) and is replaced by one twice its size when half its slots are
// taken (growLoad), or when an insert would evict from it while it is at
// least a quarter full (crowded), until it reaches the capacity asked for, so the memory follows the keys held
// rather than the bound. The writer after the insert that reached half,
// or the inserting writer before it creates, grows the table before it
// holds locks of its own (lockKey); with all the old table's writer locks
// held, it moves the entry pointers (not the entries) by the k kept in
// each slot, in order, without reading the entries (copyFrom).
//
// Bound: at most Capacity entries, the requested capacity rounded up to 4
// × a power of two. When both candidate sets are full, the first evicts
// round-robin: no recency is written on a hit, so hits never contend on a
// cache line. Eviction only drops the cache's copy of the handle; the owner
// keeps the authoritative state, so an evicted key costs the next caller a
// slow path (canonicalise, look up the owner) and nothing else: never a
// value, a start time or whether a series exists. Below the bound an
// insert that finds both its sets full grows the table instead, if it is
// at least a quarter full (crowded; random keys do not conflict below
// that); a growth keeps every entry (copyFrom).
//
// Allocation: a miss carves its entry and its Set's encoding (with the
// order table) from slabs (carve), so it allocates only a fraction of a
// chunk; a growth allocates the new table (and its locks) and nothing per
// entry.
//
// Concurrency: all methods are safe for concurrent use. Get and Prefetch
// take no lock and do not allocate; they read the table current when they
// start, old or new, and never wait for a growth. Add, Delete and the miss
// path of GetOrCreate (Create) take the locks of the key's two sets in the
// current table only (a lock guards every 1,024th set), in lock index
// order, and retry in the new table if the one they locked was replaced
// meanwhile; Add and Create also take one of 64 slab locks, briefly, to
// carve the entry. A grower takes all the old table's locks, in order, so
// it waits for the writers inside it, and no writer changes the old table
// from then on: the new table starts from exactly what the old one held,
// and a write (a Create's entry, a Delete) is never lost across a growth.
// Writers wait for the growth (one copy of at most half a table of
// pointers); readers do not. So a caller must not call Add, Create or
// Delete while it holds a lock that its create functions take: the call
// may wait for every writer, one of which may be waiting in create for
// that lock. (create may return holding such a lock, to be released by
// its caller after Create returns: Create never grows after create.)
//
// What a Get sees: what the cache held for the key at some moment during
// the call (a replaced table, frozen from the moment its grower holds its
// locks, holds what the cache held until the new one was stored). So after
// Delete returns true, a Get that starts later does not return that handle
// unless it was added again; a Get running meanwhile may, as it may without
// growth. A caller that deletes a handle still reachable by a concurrent
// Get (say, an expired series) must recognise a stale one when it uses it.
type Cache[V comparable] struct {
	// t is the current table. Only a grower stores it, holding all the
	// locks of the table it replaces.
	t atomic.Pointer[table[V]]
	// maxSets is the size of the largest table, Capacity()/ways.
	maxSets int
	slabs   [slabStripes]entrySlab[V]
}

// table is one generation of the cache's sets. Readers use only sets and
// mask, which never change; n, written by every insert and delete below
// the final size, is kept a cache line away from them.
type table[V comparable] struct {
	sets  []cacheSet[V]
	locks []setLock // locks[i&lockMask] guards the writers of sets[i]
	mask  uint64
	// lockMask maps a set to its lock: at most maxLocks locks (12 KiB),
	// so that the miss path finds them in the CPU cache instead of
	// touching two more cold lines of a per-set lock array.
	lockMask uint64
	// growAt is the number of entries at which the table is replaced by
	// one twice its size; 0 for a table of the final size, which keeps no
	// count.
	growAt int64
	_      [64]byte
	n      atomic.Int64 // entries held, when growAt > 0; changed under the key's locks
	// growing is set once, by the one caller that grows this table.
	growing atomic.Bool
	_       [64 - 8 - 4]byte
}

// initialSets is the size of a new cache's first table: 16,384 sets,
// 65,536 entries, 1 MiB plus 48 KiB of locks, enough for 32k keys before
// the first growth. A growth is cheap in itself (pointer copies) but the
// new table is a large allocation in the middle of creating streams, and
// the collection it brings forward marks whatever the process holds: in
// bench/cumulative (20k streams, its input batches marked by every
// collection) a first table of 1,024 entries took sums' creation from
// ~1,450 to ~2,700 CPU ns per point; from this one, ~1,700. The processor
// is the one user, one per pipeline; 1 MiB is what it held for 22k
// streams anyway (the preallocation before was 4 MiB at the default
// max_streams).
const initialSets = 16384

// growBy is how many times more sets a growth makes (up to the capacity):
// four, so that a cache on its way from 65k to 262k entries (the default
// max_streams) grows once, not twice, while streams are being created.
const growBy = 4

// growLoad is the fraction of a table's slots taken at which it grows:
// half. Two-choice 4-way sets that insert into the emptier set stay
// conflict-free to about that load, and not much beyond (measured with
// random keys, 1k to 256k slots: an insert found both sets full in
// ~0.001% of inserts up to half load, 0.03% at 60%, 0.6% at 75%; the first
// conflict came at 42% to 67%). A conflict below the bound grows the table
// rather than evict (crowded), so a higher load factor would save little
// memory: most tables would grow at their first conflict anyway, near
// half. A table grown at half load holds between a quarter and half of
// its slots, 32 to 64 bytes of slots per key (less after a crowded
// growth, from a quarter; tables never shrink).
const growLoad = 2 // slots / growLoad

// slabStripes, slabChunk and bytesChunk shape the slabs new keys are carved
// from: a miss takes one of 64 stripe locks (by key), never a cache-wide
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

// newEntry returns a new entry, from the slab of key k's stripe.
func (c *Cache[V]) newEntry(k uint64, ns, h uint64, set Set, order string, v V) *entry[V] {
	s := &c.slabs[k%slabStripes]
	s.mu.Lock()
	e := s.entry()
	s.mu.Unlock()
	*e = entry[V]{ns: ns, h: h, set: set, order: order, v: v, filled: true}
	return e
}

// carve returns a new zero entry (unless noEntry: the caller brings its
// own, Entry) and a copy of enc, a Set's encoding (size bytes) and its
// order table (appendSetAndOrder), from the slabs of key k's stripe, under
// one lock. The copy is never written again, which is what makes the
// strings over it immutable.
func (c *Cache[V]) carve(k uint64, enc []byte, size int, noEntry bool) (*entry[V], Set, string) {
	s := &c.slabs[k%slabStripes]
	s.mu.Lock()
	var e *entry[V]
	if !noEntry {
		e = s.entry()
	}
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
// before it dereferences the one entry whose key matches. keys[i] is the
// k = Combine(ns, h) of slots[i]'s entry: a growth places the entries by it
// without reading them. keys[i] is written before slots[i] and both are
// re-checked against the entry, so a reader that sees a torn pair only
// misses, it never returns a wrong handle; under the locks a full slot's
// key is its entry's.
type cacheSet[V comparable] struct {
	keys  [ways]atomic.Uint64
	slots [ways]atomic.Pointer[entry[V]]
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
	// filled: the fields above are set, by the writer that first put the
	// entry in a table; never written again (readers read them without
	// locks once they load the entry from a slot).
	filled bool
}

// Entry is a cache entry that its caller holds inside its own handle (a
// field of the state V points to), so that a new key costs the caller's
// one allocation instead of two: CreateSharingInto and AddEntry put it in
// the cache instead of an entry of the cache's own. Its zero value is
// ready; the cache fills it when it first holds it, and it is never
// written again, so it may go in and out of the cache (evicted, added
// again) but belongs to one key and one handle for its life.
type Entry[V comparable] = entry[V]

// fill sets e's fields on its first insertion, or checks that an entry
// already filled is the entry of (ns, h, set, v): an Entry belongs to one
// key. The caller holds the key's locks and e is in no table (nor was it
// ever put in one unfilled), so no reader sees the writes until the slot's
// store publishes them.
func (e *entry[V]) fill(ns, h uint64, set Set, order string, v V) {
	if e.filled {
		if e.ns != ns || e.h != h || e.set != set || e.v != v {
			panic("identity: an Entry added under a key or handle it was not filled with")
		}
		return
	}
	e.ns, e.h, e.set, e.order, e.v, e.filled = ns, h, set, order, v, true
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

// NewCache returns a cache holding up to capacity entries (at least 4,
// rounded up to 4 × a power of two: Capacity). Its first table holds at
// most 65,536 (initialSets); it grows as keys arrive.
func NewCache[V comparable](capacity int) *Cache[V] { return newCache[V](capacity, initialSets) }

// newCache is NewCache with a first table of at most first sets (a power
// of two): the tests of growth start small.
func newCache[V comparable](capacity, first int) *Cache[V] {
	n := max(1, (capacity+ways-1)/ways)
	n = 1 << bits.Len(uint(n-1)) // round up to a power of two
	c := &Cache[V]{maxSets: n}
	c.t.Store(newTable[V](min(n, first), n))
	return c
}

// newTable returns an empty table of n sets (a power of two), mapped
// (prefault); maxSets is the cache's final size, at which it stops counting.
func newTable[V comparable](n, maxSets int) *table[V] {
	nl := min(n, maxLocks)
	t := &table[V]{sets: make([]cacheSet[V], n), locks: make([]setLock, nl), mask: uint64(n - 1), lockMask: uint64(nl - 1)}
	if n < maxSets {
		t.growAt = int64(n * ways / growLoad)
	}
	t.prefault()
	return t
}

// prefault writes one word of every page of the sets, so the pages are
// mapped now, by the constructor or the grower, and not by page faults
// while the series arrive (a large allocation can come straight from the
// OS, unmapped; the largest table of 200k entries is 4 MiB, 1,024 pages).
func (t *table[V]) prefault() {
	const perPage = 4096 / 64 // sets are one cache line each
	for i := 0; i < len(t.sets); i += perPage {
		t.sets[i].keys[0].Store(0)
	}
}

// Capacity returns the number of entries the cache can hold: the bound
// it grows to, not what it holds or has allocated (Slots).
func (c *Cache[V]) Capacity() int { return c.maxSets * ways }

// Slots returns the number of entries the current table has room for (16
// bytes each), at most Capacity. It follows the most entries the cache
// has held at once (Growth, in Cache: two to four times as many, after a
// growth at half load), and never shrinks.
func (c *Cache[V]) Slots() int { return len(c.t.Load().sets) * ways }

// pair returns the two sets a key k = Combine(ns, h) may live in
// (two-choice hashing: with 4 ways and two candidate sets a cache stays
// conflict-free to a far higher load than one set could, so a working set
// that fits does not thrash). The two may be the same set.
func (t *table[V]) pair(k uint64) (a, b uint64) {
	return k & t.mask, (k >> 32) & t.mask
}

// maxLocks bounds the writer locks of a table; a power of two. Writers
// are the miss path only, so 1,024 stripes keep them from meeting.
const maxLocks = 1024

// lock locks the writers of sets a and b in lock index order, so two
// writers (or a writer and a grower, lockAll) never deadlock. (Not a
// returned unlock closure: that was an allocation per miss.)
func (t *table[V]) lock(a, b uint64) {
	a, b = a&t.lockMask, b&t.lockMask
	if a > b {
		a, b = b, a
	}
	t.locks[a].mu.Lock()
	if b != a {
		t.locks[b].mu.Lock()
	}
}

// unlock undoes lock(a, b).
func (t *table[V]) unlock(a, b uint64) {
	a, b = a&t.lockMask, b&t.lockMask
	if b != a {
		t.locks[b].mu.Unlock()
	}
	t.locks[a].mu.Unlock()
}

// lockKey returns the current table with the locks of key k's two sets
// held, and the sets. A table replaced while its locks were awaited holds
// nothing its replacement does not (grow), so the writer retries in the
// new one: what it writes is never left behind in a dead table.
//
// The writer after the one that filled a table to growAt grows it, here,
// before it locks anything of its own: not the filling writer after its
// create returned, because create may return holding a lock its caller
// takes inside create (the cumulative processor keeps the new stream's
// shard locked), and a grower waits for every writer, some of which may
// be waiting for that lock.
func (c *Cache[V]) lockKey(k uint64) (t *table[V], a, b uint64) {
	for {
		t = c.t.Load()
		if t.growAt != 0 && t.n.Load() >= t.growAt && c.grow(t) {
			continue
		}
		a, b = t.pair(k)
		t.lock(a, b)
		if c.t.Load() == t {
			return t, a, b
		}
		t.unlock(a, b)
	}
}

// grow replaces t, the current table, by one twice its size holding the
// same entries, and reports whether it did. One caller grows a given
// table; the others return false at once and wait in lock, not spinning.
func (c *Cache[V]) grow(t *table[V]) bool {
	if !t.growing.CompareAndSwap(false, true) {
		return false
	}
	// Allocate and map the new table before locking: writers wait only
	// for the copy.
	nt := newTable[V](min(growBy*len(t.sets), c.maxSets), c.maxSets)
	t.lockAll()
	nt.copyFrom(t)
	c.t.Store(nt)
	t.unlockAll()
	return true
}

// lockAll takes every lock of t, in index order (lock's order, so it
// cannot deadlock with a writer holding two): then no writer is inside t,
// and every writer that gets a lock of t afterwards finds t replaced.
func (t *table[V]) lockAll() {
	for i := range t.locks {
		t.locks[i].mu.Lock()
	}
}

func (t *table[V]) unlockAll() {
	for i := range t.locks {
		t.locks[i].mu.Unlock()
	}
}

// copyFrom places the entries of old, whose writers are locked out, into
// t, not yet published, which has 2 or growBy times old's sets: the same
// entry pointers, by their keys. An entry lives in old's set i as its
// first choice (k&old.mask == i) or its second ((k>>32)&old.mask == i);
// that choice is set i + m·len(old.sets) in t, m < growBy, by more bits of
// k, so each set of t receives entries of one set of old only: the copy
// never drops one (at most 4 per set), and it reads old in order.
func (t *table[V]) copyFrom(old *table[V]) {
	n := uint64(len(old.sets))
	var held int64
	for i := range old.sets {
		s := &old.sets[i]
		var used [growBy]int // slots taken in t.sets[i+m·n]
		for w := range s.slots {
			e := s.slots[w].Load()
			if e == nil {
				continue
			}
			k := s.keys[w].Load()
			j := k & t.mask
			if k&old.mask != uint64(i) {
				j = (k >> 32) & t.mask
			}
			m := j / n
			t.sets[j].store(used[m], k, e)
			used[m]++
			held++
		}
	}
	t.n.Store(held)
}

func (s *cacheSet[V]) find(k, ns, h uint64, attrs pcommon.Map) *entry[V] {
	for i := range s.keys {
		if s.keys[i].Load() != k {
			continue
		}
		if e := s.slots[i].Load(); e != nil && e.matches(ns, h, attrs) {
			return e
		}
	}
	return nil
}

func (s *cacheSet[V]) store(i int, k uint64, e *entry[V]) {
	s.keys[i].Store(k)
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
// returned yet, and reads the table current when it starts (Cache).
func (c *Cache[V]) Get(ns, h uint64, attrs pcommon.Map) (V, bool) {
	if e := c.t.Load().lookup(ns, h, attrs); e != nil {
		return e.v, true
	}
	var zero V
	return zero, false
}

// lookup returns the entry of (ns, attrs) in t, or nil. It takes no lock
// (Get).
func (t *table[V]) lookup(ns, h uint64, attrs pcommon.Map) *entry[V] {
	k := Combine(ns, h)
	a, b := t.pair(k)
	if e := t.sets[a].find(k, ns, h, attrs); e != nil {
		return e
	}
	if b != a {
		return t.sets[b].find(k, ns, h, attrs)
	}
	return nil
}

// sharable returns the entry of (share, attrs) whose encoding and order
// table a new entry for attrs can take as its own, or nil (share 0: none).
// The order table must be attrs' own order too: a hit on an entry whose
// table does not match its source's order pays the slow comparison every
// time, so an entry added with its attributes in another order is not
// shared (equalOrdered is sure only when every key is where it says).
func (t *table[V]) sharable(share, h uint64, attrs pcommon.Map) *entry[V] {
	if share == 0 {
		return nil
	}
	se := t.lookup(share, h, attrs)
	if se == nil || se.order == "" {
		return se // no table: attrs has none either (it is what equals the entry)
	}
	if eq, sure := se.set.equalOrdered(se.order, attrs); !eq || !sure {
		return nil
	}
	return se
}

// Prefetch starts loading the two sets (ns, h) may live in, for a Get (or
// Create) of that key soon after, and returns at once. A caller that
// knows its next key while it works on the current one (a batch's next
// point) overlaps the next lookup's cache misses, two random lines of a
// large cache, with that work. Only a hint: it changes nothing Get sees,
// and is wasted if the table is replaced before that Get.
func (c *Cache[V]) Prefetch(ns, h uint64) {
	t := c.t.Load()
	a, b := t.pair(Combine(ns, h))
	prefetch.Line(uintptr(unsafe.Pointer(&t.sets[a])))
	prefetch.Line(uintptr(unsafe.Pointer(&t.sets[b])))
}

// PrefetchEntry is the second step of a lookup pipelined over a caller's
// keys: for a key whose sets Prefetch asked for an iteration ago (so they
// are in the CPU cache or on their way), it starts loading the entry whose
// stored key matches, which a hit's confirmation reads next (one more
// random line of a large cache: entries are carved where their keys were
// created, not where they are looked up). It reads the sets' keys and
// slot pointers, never an entry, and returns at once; lock-free, no
// allocation, a hint only (as Prefetch).
func (c *Cache[V]) PrefetchEntry(ns, h uint64) {
	t := c.t.Load()
	k := Combine(ns, h)
	a, b := t.pair(k)
	t.sets[a].prefetchEntry(k)
	if b != a {
		t.sets[b].prefetchEntry(k)
	}
}

func (s *cacheSet[V]) prefetchEntry(k uint64) {
	for i := range s.keys {
		if s.keys[i].Load() == k {
			prefetch.Line(uintptr(unsafe.Pointer(s.slots[i].Load())))
		}
	}
}

// PrefetchValue is the third step (after Prefetch and PrefetchEntry): it
// reads the entry whose stored key and hash match (ns, h), starts loading
// the first lines of its attribute encoding (what Get compares next), and
// returns its handle, for the caller to prefetch its own state too. The
// handle is unconfirmed (the attributes are not compared): use it as a
// hint and nothing else; Get is the lookup. Lock-free, no allocation.
func (c *Cache[V]) PrefetchValue(ns, h uint64) (v V, ok bool) {
	t := c.t.Load()
	k := Combine(ns, h)
	a, b := t.pair(k)
	e := t.sets[a].candidate(k, ns, h)
	if e == nil && b != a {
		e = t.sets[b].candidate(k, ns, h)
	}
	if e == nil {
		return v, false
	}
	if enc := e.set.enc; enc != "" {
		// An encoding of 6 gateway attributes and its order table span
		// three or four lines; the two first hold the attributes a hit
		// compares first. More prefetches would crowd the fill buffers
		// the caller's own prefetches need.
		p := uintptr(unsafe.Pointer(unsafe.StringData(enc)))
		prefetch.Line(p)
		prefetch.Line(p + 64)
		if len(enc)+len(e.order) > 128 {
			prefetch.Line(p + 128)
		}
	}
	return e.v, true
}

// candidate returns the entry of s whose stored key is k and whose ns and
// hash match, without comparing attributes, or nil.
func (s *cacheSet[V]) candidate(k, ns, h uint64) *entry[V] {
	for i := range s.keys {
		if s.keys[i].Load() != k {
			continue
		}
		if e := s.slots[i].Load(); e != nil && e.h == h && e.ns == ns {
			return e
		}
	}
	return nil
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
	return c.AddEntry(ns, h, attrs, set, v, nil)
}

// AddEntry is Add with the entry the caller holds for (ns, set) and v (nil:
// one of the cache's own, as Add). The cache fills e on its first
// insertion; an e already filled must be the entry of this key and v
// (Entry).
func (c *Cache[V]) AddEntry(ns, h uint64, attrs pcommon.Map, set Set, v V, e *Entry[V]) bool {
	order := set.orderOf(attrs)
	k := Combine(ns, h)
	if e == nil {
		e = c.newEntry(k, ns, h, set, order, v)
	}
	for {
		t, a, b := c.lockKey(k)
		e.fill(ns, h, set, order, v)
		if t.replace(a, b, k, e) {
			t.unlock(a, b)
			return false
		}
		if !t.crowded(a, b) {
			evicted := t.insert(a, b, k, e)
			t.unlock(a, b)
			return evicted
		}
		t.unlock(a, b)
		c.grow(t)
	}
}

// replace stores e, whose key is k, in place of the entry of the same key
// in sets a or b, if there is one (there is never more than one), and
// reports whether it did. The caller holds the sets' locks (lockKey).
func (t *table[V]) replace(a, b, k uint64, e *entry[V]) bool {
	// The keys first: under the locks a full slot's key is its entry's,
	// and dereferencing the other keys' entries (cold: 2 per set at half
	// load) was most of the cost of adding to a large cache.
	for _, s := range [2]*cacheSet[V]{&t.sets[a], &t.sets[b]} {
		for i := range s.slots {
			if s.keys[i].Load() != k {
				continue
			}
			if old := s.slots[i].Load(); old != nil && old.h == e.h && old.ns == e.ns && old.set == e.set {
				s.slots[i].Store(e)
				return true
			}
		}
	}
	return false
}

// crowded reports that sets a and b are both full in a table that should
// grow rather than evict: one below the final size and at least a quarter
// full. (Below a quarter a conflict is too unlikely for random keys to be
// anything but keys built to collide, which growing would not part: their
// k, not just its low bits, is the same.) The caller holds the sets' locks.
func (t *table[V]) crowded(a, b uint64) bool {
	if t.growAt == 0 {
		return false
	}
	if n, _ := t.sets[a].free(); n > 0 {
		return false
	}
	if n, _ := t.sets[b].free(); n > 0 {
		return false
	}
	return t.n.Load() >= t.growAt/2
}

// insert stores e, whose key k is in neither set a nor b, in a free slot
// of either, or else in place of the round-robin victim of set a; it
// reports whether it evicted. The caller holds the sets' locks.
func (t *table[V]) insert(a, b, k uint64, e *entry[V]) bool {
	if t.place(a, b, k, e) {
		if t.growAt != 0 {
			t.n.Add(1)
		}
		return false
	}
	l := &t.locks[a&t.lockMask]
	victim := int(l.next % ways)
	l.next++
	t.sets[a].store(victim, k, e)
	return true
}

// place stores e, whose key is k, in a free slot of the emptier of sets a
// and b (the "power of two choices": it keeps the fullest set far emptier
// than filling a first would), or reports that both are full.
func (t *table[V]) place(a, b, k uint64, e *entry[V]) bool {
	sa, sb := &t.sets[a], &t.sets[b]
	fa, ia := sa.free()
	fb, ib := sb.free()
	switch {
	case fa > 0 && fa >= fb:
		sa.store(ia, k, e)
		return true
	case fb > 0:
		sb.store(ib, k, e)
		return true
	}
	return false
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
// cached exactly one caller creates and the others receive its handle (a
// growth keeps the entry: Cache). After an eviction create may run again for
// the same key, so create must itself be idempotent (look the handle up in
// the authoritative state before making one). create must not call back
// into this cache.
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
	return c.CreateSharing(ns, h, attrs, ko, 0, create)
}

// CreateSharing is Create for a caller that knows another namespace, share
// (0: none), likely to hold the same attributes already: the metric whose
// points came before this one's in the same resource and scope (a gateway
// request's counter and its duration histograms carry one label set). When
// (share, attrs) is cached, the new entry and the Set passed to create use
// its encoding instead of a copy of their own: one label set's bytes (~120
// for five labels) stored once for all the metrics that carry it. Shared
// strings are never written (carve), so sharing is safe; the probe of
// share's sets is Get's, lock-free. A miss there costs one more probe of a
// creation, never a wrong Set: the entry found equals attrs. Its order table
// is taken only if attrs comes in the same order (sharable).
func (c *Cache[V]) CreateSharing(ns, h uint64, attrs pcommon.Map, ko *KeyOrder, share uint64, create func(Set) V) (v V, hit, evicted bool) {
	return c.createSharing(ns, h, attrs, ko, share, create, nil)
}

// CreateSharingInto is CreateSharing for a caller whose handles hold their
// own entries (Entry): create returns the handle and the entry to cache it
// in, or nil for one of the cache's own (say, a handle that is not the
// key's own, which already holds its entry for another key). The entry
// may be one create found rather than made, out of the cache since an
// eviction: already filled, it must be this key's (Entry).
func (c *Cache[V]) CreateSharingInto(ns, h uint64, attrs pcommon.Map, ko *KeyOrder, share uint64, create func(Set) (V, *Entry[V])) (v V, hit, evicted bool) {
	return c.createSharing(ns, h, attrs, ko, share, nil, create)
}

// createSharing is CreateSharing (create) and CreateSharingInto (into),
// one of the two not nil.
func (c *Cache[V]) createSharing(ns, h uint64, attrs pcommon.Map, ko *KeyOrder, share uint64, create func(Set) V, into func(Set) (V, *Entry[V])) (v V, hit, evicted bool) {
	k := Combine(ns, h)
	t, a, b := c.lockKey(k)
	for {
		// Re-probe under the locks: another miss for the same key may
		// have added it between our Get and the Lock.
		if e := t.sets[a].find(k, ns, h, attrs); e != nil {
			t.unlock(a, b)
			return e.v, true, false
		}
		if e := t.sets[b].find(k, ns, h, attrs); e != nil {
			t.unlock(a, b)
			return e.v, true, false
		}
		if !t.crowded(a, b) {
			break
		}
		// Grow now, before create: not after it (lockKey).
		t.unlock(a, b)
		c.grow(t)
		t, a, b = c.lockKey(k)
	}
	defer t.unlock(a, b)
	var (
		e     *entry[V]
		set   Set
		order string
	)
	if se := t.sharable(share, h, attrs); se != nil {
		if into == nil {
			e, _, _ = c.carve(k, nil, 0, false) // a zero entry: the encoding is se's
		}
		set, order = se.set, se.order
	} else {
		var buf [encScratch]byte
		enc, size := appendSetAndOrder(buf[:0], attrs, ko)
		e, set, order = c.carve(k, enc, size, into != nil)
	}
	if into != nil {
		v, e = into(set)
		if e == nil {
			e, _, _ = c.carve(k, nil, 0, false)
		}
	} else {
		v = create(set)
	}
	e.fill(ns, h, set, order, v)
	// The key is in neither set (re-probed under the locks held since).
	return v, false, t.insert(a, b, k, e)
}

// Delete removes the entry of (ns, set) if it still holds v, and reports
// whether it did. Comparing v keeps a late Delete (say, of an expired series)
// from removing the entry of a newer handle added for the same key. A
// Delete is never undone by a concurrent growth (Cache), but a Get running
// meanwhile may still return v.
func (c *Cache[V]) Delete(ns, h uint64, set Set, v V) bool {
	k := Combine(ns, h)
	t, a, b := c.lockKey(k)
	defer t.unlock(a, b)
	for _, s := range [2]*cacheSet[V]{&t.sets[a], &t.sets[b]} {
		for i := range s.slots {
			if s.keys[i].Load() != k {
				continue // as in replace: no cold entry for another key
			}
			if e := s.slots[i].Load(); e != nil && e.h == h && e.ns == ns && e.set == set && e.v == v {
				s.slots[i].Store(nil)
				if t.growAt != 0 {
					t.n.Add(-1)
				}
				return true
			}
		}
	}
	return false
}
