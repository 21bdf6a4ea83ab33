package series

import (
	"math/bits"
	"sync/atomic"
)

// index finds a family's series by key hash. It is an open-addressing
// table (linear probing) of pointers to immutable entries, so that an
// update of an existing series finds it without any lock (issue 11: a
// removal, an insert or an expiry must not stall the ingestion of the
// family's other series).
//
// Concurrency contract:
//   - find may run at any time, concurrently with anything: it loads the
//     current slot array once (an atomic pointer) and each slot with an
//     atomic load. Entries are never modified once stored in a slot.
//   - add, remove and rebuilding the slot array are writers: the caller
//     holds the family's lock (Family.mu), which serialises them.
//   - a writer never lets a slot array fill up (used slots, tombstones
//     included, stay under 3/4), so a probe always ends at an empty slot,
//     in the array it loaded even if a writer has since replaced it (a
//     replaced array is never written again).
//   - remove replaces an entry's slot with the tombstone, in O(1) expected
//     (one probe sequence), and never moves other entries: a concurrent find
//     of another key sees the same probe sequence before and after. add
//     fills the first empty slot or tombstone of its key's probe sequence,
//     so a find of another key still sees a non-empty slot there; a find
//     of the added key that already passed that slot misses, and its
//     caller retries under Family.mu.
//   - find may return an entry that a writer is removing at that moment;
//     the caller checks the series' gone flag after stamping it (see
//     Family.Series), never trusting the index alone.
//
// Memory: 8 bytes per slot, 1.3 to 2.7 slots per live entry (tombstones
// are dropped when the array is rebuilt, on an insert that would pass 3/4).
type index struct {
	slots atomic.Pointer[[]atomic.Pointer[entry]]
	live  int // entries in the current array (under Family.mu)
	used  int // live entries plus tombstones (under Family.mu)
}

// tombstone fills the slot of a removed entry: a probe goes on past it.
var tombstone = &entry{}

const minSlots = 8

// home is the first slot a probe for hash looks at, among n (a power of
// two): Fibonacci hashing (the top bits of hash times 2^64/φ), so that
// hashes which differ only in their low bits (as tests' sequential ones do)
// do not fill runs of adjacent slots, which linear probing would then walk.
func home(hash uint64, n int) uint64 {
	return (hash * 0x9e3779b97f4a7c15) >> (65 - bits.Len(uint(n)))
}

// find returns the entry whose hash is hash and key matches key, or nil. Safe
// for concurrent use with writers (see index).
func (x *index) find(sc *schemas, hash uint64, key *Key) *entry {
	p := x.slots.Load()
	if p == nil {
		return nil
	}
	slots := *p
	mask := uint64(len(slots) - 1)
	for i := home(hash, len(slots)); ; i = (i + 1) & mask {
		e := slots[i].Load()
		if e == nil {
			return nil
		}
		if e.hash == hash && e != tombstone && e.matches(sc, key) {
			return e
		}
	}
}

// add files e under e.hash; e must not change after. The caller holds
// Family.mu.
func (x *index) add(e *entry) {
	p := x.slots.Load()
	if p == nil || (x.used+1)*4 > len(*p)*3 {
		p = x.rebuild(x.live + 1)
	}
	slots := *p
	mask := uint64(len(slots) - 1)
	for i := home(e.hash, len(slots)); ; i = (i + 1) & mask {
		// The first free slot, a tombstone's included: e's key is not in
		// the index (the caller looked it up under Family.mu), so nothing
		// further on is e's. Reusing tombstones keeps a key that is removed
		// and set again from landing past an ever longer run of them. A
		// concurrent find of another key sees a non-empty slot before and
		// after, so its probe goes on as it would have; a find of e's key
		// that passed the slot already misses, and retries under the lock.
		switch slots[i].Load() {
		case nil:
			x.used++
		case tombstone:
		default:
			continue
		}
		slots[i].Store(e)
		x.live++
		return
	}
}

// remove replaces e's slot by the tombstone. The caller holds Family.mu.
func (x *index) remove(e *entry) {
	p := x.slots.Load()
	if p == nil {
		return
	}
	slots := *p
	mask := uint64(len(slots) - 1)
	for i := home(e.hash, len(slots)); ; i = (i + 1) & mask {
		switch slots[i].Load() {
		case nil:
			return // not filed (cannot happen for a live series' entry)
		case e:
			slots[i].Store(tombstone)
			x.live--
			return
		}
	}
}

// rebuild publishes a new slot array holding the live entries, sized for
// want entries at under half full, and returns it. Finds still probing the
// old array complete there; it is never written again. The caller holds
// Family.mu. O(slots): paid by the insert that crosses 3/4, amortised over
// the inserts since the last rebuild.
func (x *index) rebuild(want int) *[]atomic.Pointer[entry] {
	n := minSlots
	for n < want*2 {
		n *= 2
	}
	slots := make([]atomic.Pointer[entry], n)
	mask := uint64(n - 1)
	if old := x.slots.Load(); old != nil {
		for i := range *old {
			e := (*old)[i].Load()
			if e == nil || e == tombstone {
				continue
			}
			j := home(e.hash, n)
			for slots[j].Load() != nil {
				j = (j + 1) & mask
			}
			slots[j].Store(e)
		}
	}
	x.used = x.live
	x.slots.Store(&slots)
	return &slots
}
