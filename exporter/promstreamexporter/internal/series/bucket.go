package series

import (
	"slices"
	"unsafe"
)

// Shard buckets (issue 12). A family's first series fill its head: up to
// headPages pages in insertion order. Once the head is full, a new series
// goes to one of NumBuckets buckets by its shard hash,
// bucket = hash % NumBuckets, and is allocated, with its rendered labels,
// from that bucket's own chunks. Every series has one page (its home,
// Series.page), in the head or in its bucket.
//
// Scrapes: a whole scrape writes the head, then bucket 0, 1, ..., each in
// insertion order, reading every bucket's series from contiguous memory. A
// shard scrape (?shard=I&shards=N) with N dividing NumBuckets reads the
// head (picking its series by the hash column, as any shard scrape did)
// and only the buckets b with b % N == I, whose series are exactly those
// with hash % N == I: hash ≡ b (mod NumBuckets) implies hash ≡ b (mod N)
// when N divides NumBuckets. The shard assignment is the one it always
// was, a function of the stored canonical hash and N alone, so every N
// splits a family exactly as before; only the cost differs.
//
// Which N skip: the divisors of NumBuckets (1, 2, 4, 8, 16, 32, 64). Any
// other N (3, 5, 100, ...) is served exactly by the hash column: every page
// visited, only the shard's series rendered, at about 0.45 of a whole
// scrape's cost for N = 4 instead of 0.3. Powers of two are what fleets of
// Prometheus scrape jobs use (examples/prometheus-sharded.yml uses 2).
//
// Why a head: the whole scrape's order is insertion order for every family
// that never held more than the head (headPages pages: 1,024 gauges or
// counters, 128 histograms or summaries), which the golden expositions and
// the line-for-line parity with Kong's and APISIX's plugins rely on, and a
// family of a few series does not pay for 64 buckets. Beyond the head, the
// order is the head's, then the buckets' (still stable from scrape to
// scrape): the text formats do not require an order, and one memory order
// cannot serve both insertion order and shard order (keeping insertion
// order for whole scrapes over bucket-allocated series made them 1.2 to
// 1.6 times slower, BenchmarkShardScrape).
//
// Memory locality is the point: a shard scrape that picks its series out of
// the insertion order reads them scattered among the other shards', a
// cache and TLB miss apiece. So a bucket hands out Series (with their Dist,
// in a histogram or summary family) from arrays of about chunkSeries, label
// bytes from arenas of up to chunkLabels and histograms' bucket counts from
// arenas of up to chunkCounts. Nothing is reused: a removed series'
// slot, bytes and counts stay unused until the whole chunk is unreachable,
// because a caller may hold a *Series past its removal (Family.Series'
// contract) and reusing the slot would let a late write land on another
// series. The price is retention: one live series keeps its chunks alive,
// at worst about 8 KiB of Series and 8 KiB of labels for that one series
// (in a histogram family, 3 KiB of series and Dists, 2 KiB of labels and 2
// KiB of counts), when churn leaves a single long-lived series per chunk;
// series removed in groups, or long-lived, free or fill their chunks
// together.
// Chunks start small and double, up to that size: smaller chunks made whole
// scrapes slower (a jump in memory every chunk; with 32 Series and 4 KiB,
// a whole scrape cost 1.14 times what it did before buckets, against about
// 1.05 at this size). A histogram or summary family's chunks are smaller
// (chunkDists, chunkDistLabels, chunkCounts): its series write a dozen
// lines or more each, so a jump every 16 series costs a scrape nothing
// measurable (BenchmarkScrapeShapes in the exporter), while the unused end
// of each bucket's last chunk is paid 64 times per family: with the gauge
// sizes, about 100 bytes per histogram series of an 11,000-series family,
// 25 with these.
//
// Locking: a bucket's page list and chunks are guarded by Family.mu, like
// the head's page list; its pages are pages like the head's (page.mu
// guards their series and those series' distributions).
const (
	// NumBuckets is the number of shard buckets of a family (a power of
	// two: bucket = hash & (NumBuckets-1)).
	NumBuckets  = 64
	headPages   = 4
	chunkSeries = 64
	chunkLabels = 8192
	// A histogram or summary family's chunks (distSeries of 192 bytes,
	// label bytes, bucket counts).
	chunkDists      = 16
	chunkDistLabels = 2048
	chunkCounts     = 256 // 2 KiB
)

// headBucket is page.bucket for a head page.
const headBucket = -1

// bucket holds the series of one family beyond its head whose shard hash
// % NumBuckets is its number. Guarded by Family.mu.
type bucket struct {
	pages []*page
	// dist: the family is a histogram or summary family, whose series
	// are distSeries.
	dist  bool
	slab  []Series     // the current chunk of Series (a gauge or counter family's): slots past len are free
	dists []distSeries // the current chunk of a histogram or summary family's series, likewise
	arena []byte       // the current chunk of label bytes: bytes past len are free
	// counts is the current chunk of histograms' bucket counts: a new
	// histogram's Dist.Counts starts out as room for as many as its
	// family's bounds, so that a scrape reads them next to its
	// neighbours' too.
	counts []uint64
}

// distSeries is what a histogram or summary series in a bucket is
// allocated as: the series and its distribution, side by side (192 bytes).
type distSeries struct {
	s Series
	d Dist
}

// distInline is the room for bucket counts a new histogram gets before its
// family's bounds are known (OpenTelemetry SDKs' default histogram has 15
// bounds, Kong's 13); maxInline bounds what it gets after (a histogram with
// more, an exponential one's often, allocates its own on its first update).
const distInline, maxInline = 16, 32

// bucketsFor reports whether a shard scrape of shards reads buckets rather
// than the hash column: buckets b with b % shards == shard.
func bucketsFor(shards uint64) bool {
	return shards > 1 && shards <= NumBuckets && NumBuckets%shards == 0
}

// bucket returns the bucket of shard hash h, creating it. The caller holds
// f.mu.
func (f *Family) bucket(h uint64) *bucket {
	if f.buckets == nil {
		f.buckets = new([NumBuckets]*bucket)
	}
	b := &f.buckets[h&(NumBuckets-1)]
	if *b == nil {
		*b = &bucket{dist: f.pageSize() == distPageSize}
	}
	return *b
}

// newSeries allocates a series from the bucket's chunk, its labels a copy
// of labels in the bucket's arena. A histogram's or summary's (dist) comes
// with its Dist and, when counts > 0, room for that many bucket counts. The
// caller holds f.mu.
func (b *bucket) newSeries(labels []byte, shared string, counts int) *Series {
	var s *Series
	if b.dist {
		if len(b.dists) == cap(b.dists) {
			b.dists = newChunk[distSeries](min(chunkDists, max(4, 2*cap(b.dists))))
		}
		b.dists = b.dists[:len(b.dists)+1]
		slot := &b.dists[len(b.dists)-1]
		s = &slot.s
		s.dist = &slot.d
		if counts > 0 {
			slot.d.Counts = b.carveCounts(counts)
		}
	} else {
		if len(b.slab) == cap(b.slab) {
			b.slab = newChunk[Series](min(chunkSeries, max(4, 2*cap(b.slab))))
		}
		b.slab = b.slab[:len(b.slab)+1]
		s = &b.slab[len(b.slab)-1]
	}
	if shared == "" {
		shared = b.intern(labels)
	}
	s.setLabels(shared)
	return s
}

// carveCounts returns an empty slice with room for n counts from the
// bucket's arena. Its capacity is n exactly, so growing it past n (other
// bounds) allocates rather than writing into a neighbour's counts.
func (b *bucket) carveCounts(n int) []uint64 {
	if cap(b.counts)-len(b.counts) < n {
		b.counts = newChunk[uint64](max(n, min(chunkCounts, max(64, 2*cap(b.counts)))))
	}
	start := len(b.counts)
	b.counts = b.counts[:start+n]
	return b.counts[start : start : start+n]
}

// newChunk returns an empty slice with room for n elements, and for as
// many more as the allocation's size class holds (as append rounds up):
// make's exact capacity leaves that room unused, and for a chunk of
// pointerful elements past 512 bytes the malloc header (8 bytes) alone can
// push a round size (64 elements of 128 bytes) into the next class, 9,472
// bytes for 8,192, 20 bytes lost per element.
func newChunk[T any](n int) []T { return slices.Grow([]T(nil), n) }

// intern copies p into the arena and returns it as a string sharing the
// arena's memory: those bytes are never written again (the arena only
// grows past them), so the string is immutable, as Go requires.
func (b *bucket) intern(p []byte) string {
	if len(p) == 0 {
		return ""
	}
	if cap(b.arena)-len(b.arena) < len(p) {
		limit := chunkLabels
		if b.dist {
			limit = chunkDistLabels
		}
		size := min(limit, max(256, 2*cap(b.arena)))
		b.arena = make([]byte, 0, max(size, len(p)))
	}
	start := len(b.arena)
	b.arena = append(b.arena, p...)
	return unsafe.String(&b.arena[start], len(p))
}

// headFull reports whether a new series goes to a bucket: the head has
// headPages pages and the last is full. The caller holds f.mu.
func (f *Family) headFull(size int) bool {
	n := len(f.pages)
	return n >= headPages && len(f.pages[n-1].series) >= size
}

// pageList returns the list page p belongs to. The caller holds f.mu.
func (f *Family) pageList(p *page) *[]*page {
	if p.bucket == headBucket {
		return &f.pages
	}
	return &f.buckets[p.bucket].pages
}

// appendPages appends the pages a scrape of q reads, in the order it writes
// them: the head, then every bucket, or only shard q.Shard's when
// bucketsFor(q.Shards). The caller holds f.mu.
func (f *Family) appendPages(dst []*page, q *Query) []*page {
	dst = append(dst, f.pages...)
	if f.buckets == nil {
		return dst
	}
	first, step := uint64(0), uint64(1)
	if bucketsFor(q.Shards) {
		first, step = q.Shard, q.Shards
	}
	for i := first; i < NumBuckets; i += step {
		if b := f.buckets[i]; b != nil {
			dst = append(dst, b.pages...)
		}
	}
	return dst
}
