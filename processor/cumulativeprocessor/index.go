package cumulativeprocessor

import (
	"sync/atomic"
	"unsafe"

	"github.com/otelgateway/otelgateway/internal/identity"
	"github.com/otelgateway/otelgateway/internal/prefetch"
)

// streamIndex is a shard's map from a stream's key (metric, attribute
// hash: see stream) to the head of the key's chain of streams
// (stream.next): open addressing with linear probing over a power-of-two
// array of 16-byte slots, filled to at most 7/8 (indexLoad).
//
// Why not a Go map: creating a stream looked its key up (a miss, which
// touched a cold group of the map) and then inserted it (a second hash of
// the 16-byte key, a second probe). Here one probe finds the key or the
// empty slot it goes into (find returns it, insert fills it), the key's
// hash is identity.Combine(metric, h), already mixed, and a slot keeps it,
// so that growing moves slots without touching the streams.
//
// Identity: a slot matches a key when its hash does and its head stream's
// (desc.id, h) is the key: two keys whose combined hashes collide take two
// slots. Removal rebuilds the array (removeIf, the sweep's), so probing
// never meets a hole. Guarded by the shard's lock.
type streamIndex struct {
	slots []indexSlot // nil until the first stream
	n     int         // occupied slots (keys, not streams)
	// at is where slots lives and its mask (len-1), published for
	// prefetchSlot, which reads them without the shard's lock: they are
	// written with slots (under the lock) and may be stale or torn when
	// read, which only makes a prefetch useless, never a lookup wrong.
	at   atomic.Uintptr
	mask atomic.Uint64
}

// setSlots replaces the array, and publishes where it lives for
// prefetchSlot.
func (x *streamIndex) setSlots(slots []indexSlot) {
	x.slots = slots
	if len(slots) == 0 {
		x.at.Store(0)
		return
	}
	x.mask.Store(uint64(len(slots) - 1))
	x.at.Store(uintptr(unsafe.Pointer(unsafe.SliceData(slots))))
}

// prefetchSlot starts loading the slot where find(metric, h) begins its
// probe, for a stream about to be created. Lock-free and a hint only: see
// at.
func (x *streamIndex) prefetchSlot(metric, h uint64) {
	if at := x.at.Load(); at != 0 {
		i := identity.Combine(metric, h) & x.mask.Load()
		prefetch.Line(at + uintptr(i)*unsafe.Sizeof(indexSlot{}))
	}
}

type indexSlot struct {
	k    uint64  // identity.Combine(metric, h)
	head *stream // nil: empty
}

// indexLoadNum/indexLoadDen is the load at which an index doubles: 7/8.
// The index is probed only when a stream is created or re-resolved (hits
// are the identity cache's), and its keys are mixed hashes, so a creation's
// probe for the empty slot is ~8 slots (2 cache lines, in order) on average
// over a doubling, against ~4 at 3/4; what it saves is memory written while
// streams are created: at 100k streams (1,562 keys a shard) 3/4 had doubled
// to 4,096 slots, 7/8 stays at 2,048, and the arrays grown and dropped on the
// way are halved too: 8 MiB → 4 MiB allocated in the burst (84 → 42 bytes
// per stream), which is what brings its garbage collection forward.
const (
	indexLoadNum = 7
	indexLoadDen = 8
)

// minIndexSlots is the size of a shard's first array; it doubles from
// there as streams arrive, so an idle processor holds none.
const minIndexSlots = 8

// find returns the head of the chain of (metric, h), or nil, and the slot
// where that key is or would go. The slot is valid until the next insert.
func (x *streamIndex) find(metric, h uint64) (head *stream, slot int) {
	if len(x.slots) == 0 {
		return nil, -1
	}
	k := identity.Combine(metric, h)
	mask := len(x.slots) - 1
	for i := int(k) & mask; ; i = (i + 1) & mask {
		sl := &x.slots[i]
		if sl.head == nil {
			return nil, i
		}
		if sl.k == k && sl.head.desc.id == metric && sl.head.h == h {
			return sl.head, i
		}
	}
}

// insert makes s the head of its key's chain, at slot, which find has just
// returned for s's key (no insert since).
func (x *streamIndex) insert(s *stream, slot int) {
	if slot >= 0 && x.slots[slot].head != nil {
		x.slots[slot].head = s // a new head for the key's chain
		return
	}
	if (x.n+1)*indexLoadDen > len(x.slots)*indexLoadNum {
		x.grow()
		_, slot = x.find(s.desc.id, s.h)
	}
	x.slots[slot] = indexSlot{k: identity.Combine(s.desc.id, s.h), head: s}
	x.n++
}

// grow doubles the array (or makes the first), moving the slots by their
// kept hashes.
func (x *streamIndex) grow() {
	old := x.slots
	x.setSlots(make([]indexSlot, max(minIndexSlots, 2*len(old))))
	x.place(old)
}

// place puts every occupied slot of from into x.slots, which has room.
func (x *streamIndex) place(from []indexSlot) {
	mask := len(x.slots) - 1
	for _, sl := range from {
		if sl.head == nil {
			continue
		}
		i := int(sl.k) & mask
		for x.slots[i].head != nil {
			i = (i + 1) & mask
		}
		x.slots[i] = sl
	}
}

// len returns the number of keys.
func (x *streamIndex) len() int { return x.n }
