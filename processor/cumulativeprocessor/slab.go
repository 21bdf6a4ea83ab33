package cumulativeprocessor

import "github.com/otelgateway/otelgateway/internal/identity"

// slab hands out small slices of T carved from chunks of chunk elements,
// so that creating a stream (its struct, a histogram's state and buckets)
// costs a fraction of an allocation instead of one each. A slab belongs to
// one shard and is used under its lock.
//
// The price is retention: a chunk stays alive while any slice carved from
// it is referenced, so after streams expire (or restart with new bounds)
// their dead neighbours in a chunk can stay alive beside a live one.
// Chunks are kept small (a few KiB) to bound that, and a request larger
// than a quarter of a chunk gets its own allocation instead.
type slab[T any] struct {
	free []T
}

// take returns n zero elements, with length and capacity n.
func (s *slab[T]) take(n, chunk int) []T {
	if n > chunk/4 {
		return make([]T, n)
	}
	if len(s.free) < n {
		s.free = make([]T, chunk)
	}
	t := s.free[:n:n]
	s.free = s.free[n:]
	return t
}

// Chunk sizes, about 2–4 KiB each.
const (
	streamChunk = 16  // streams of 192 bytes (TestStreamSize)
	histChunk   = 32  // histStates of 64 bytes (TestStreamSize)
	prevChunk   = 32  // histPrevs of 64 bytes
	countsChunk = 512 // uint64s: a 13-bucket histogram takes 13, and 13 more for its histPrev
)

// takeCounts returns n zero bucket counts. The caller holds sh.mu.
func (sh *shard) takeCounts(n int) []uint64 { return sh.countsSlab.take(n, countsChunk) }

// takePrev returns a zero histPrev of n counts. The caller holds sh.mu.
func (sh *shard) takePrev(n int) *histPrev {
	p := &sh.prevSlab.take(1, prevChunk)[0]
	p.counts = sh.takeCounts(n)
	return p
}

// newStream returns a zero stream of sh for d and the identity (h, attrs).
// The caller holds sh.mu. A stream is never reused: a swept one stays dead
// for the cached pointers that still reach it.
func (sh *shard) newStream(d *metricDesc, h uint64, attrs identity.Set) *stream {
	s := &sh.streamSlab.take(1, streamChunk)[0]
	s.shard, s.desc, s.h, s.attrs = sh, d, h, attrs
	return s
}
