package traffic

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sort"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// The memory layout of what an aggregator holds. With 10k routes the series
// outgrow the CPU caches, so each update is a memory access: the layout is
// made for few of them, and for a garbage collector that has little to scan.
//
//   - a handle (72 bytes, chunks of 112) is found by its tuple's encoding in
//     one map; it points at the tuple's row in each view;
//   - a row (64 bytes: one cache line, chunks of 32) holds one label set of
//     a view: its series and explicit histogram buckets are one
//     pointer-free array of words, next to each other;
//   - an exponential histogram's buckets sit in the row's extra, reached
//     only by the updates that need it;
//   - exemplars are entries of their table's exemplarStore, only the
//     buckets that kept one in the window, chained from their series.

// series is one family's stream for one row over the current window, as
// the words of the row that hold it: total and sum (float64 bits), count,
// and its flags: bit 0 whether it was updated in this window (emit it),
// bit 1+i whether explicit bucket i (i < maxFlaggedBuckets; bit 1 for an
// exponential histogram's one exemplar) kept an exemplar in this window.
// Sums use total; histograms count, sum and the family's buckets
// (len(bounds)+1, the last +Inf), which follow the row's series in its
// words, and hold in the word of total (which they do not use) their
// exemplar chain: the exemplarRef of its first entry in the table's
// exemplarStore, 0 for none.
type series [seriesWords]uint64

// seriesWords is the words of one series.
const seriesWords = 4

// maxFlaggedBuckets is the buckets whose exemplar has a flag in the
// series' flags word; a bucket beyond keeps every traced request's.
const maxFlaggedBuckets = 63

func (s *series) total() float64 { return math.Float64frombits(s[0]) }
func (s *series) count() uint64  { return s[1] }
func (s *series) sum() float64   { return math.Float64frombits(s[2]) }
func (s *series) touched() bool  { return s[3]&1 != 0 }

// touch marks s updated in this window; false if it was already.
func (s *series) touch() bool {
	if s[3]&1 != 0 {
		return false
	}
	s[3] |= 1
	return true
}

// sampled says whether a traced observation of weight w, in a bucket (i:
// its exemplar's flag) that now counts c requests in this window, becomes
// the bucket's exemplar, u being a uniform random draw: always the first
// (the bucket keeps one whenever it saw a traced request), then each with
// probability w/c, which leaves every request of the bucket the same
// chance to be the one kept (reservoir sampling of one, as the OTel SDK's
// aligned histogram bucket reservoir; "latest" wrote the exemplar on every
// traced request, a cache miss per histogram, issue 28 item 3). Reading
// and setting the flag touches only the series' words, which the
// observation updates anyway.
func (s *series) sampled(i int, c, w, u uint64) bool {
	if i >= maxFlaggedBuckets {
		return true
	}
	bit := uint64(2) << i
	if s[3]&bit == 0 {
		s[3] |= bit
		return true
	}
	hi, _ := bits.Mul64(u, c) // u·c / 2^64: uniform in [0, c)
	return hi < w
}

// addTo adds a window's total, sum and count to s (merge). A histogram's
// total is 0 and leaves its word, its exemplar chain, as it is.
func (s *series) addTo(total, sum float64, count uint64) {
	if total != 0 {
		s[0] = math.Float64bits(s.total() + total)
	}
	s[1] += count
	s[2] = math.Float64bits(s.sum() + sum)
}

// extra is what a series of a row keeps beyond its counts, when it keeps
// any.
type extra struct {
	// exp holds the buckets of an exponential histogram (nil otherwise).
	exp *expoHist
}

// exemplar is one observed request that carried a trace: its ids and
// value (in the emitted unit).
type exemplar struct {
	trace [16]byte
	span  [8]byte
	value float64
}

// exemplarStore is a table's exemplars: one entry per bucket that kept one
// in a window (series.sampled), chained from its series (series' word 0),
// in chunks without pointers, reused from window to window. It replaced an
// array of an exemplar per bucket allocated whole on a series' first
// traced request and kept with the row (issue 28 items 1 and 3): 0.92 of
// 3.98 GB live at 1M tuples of the kong profile, and, in short windows, a
// new array and a cache miss on most traced requests. An entry now goes at
// the tail of the current buffer, a cache line the previous traced request
// most likely wrote, and the store holds at most the buckets that kept an
// exemplar in two windows.
//
// Two buffers, because Take lets Add in between its steps: at its start
// Add switches to the other buffer (flip), so the exemplars of rows Take
// has drained already (the next window's) never land in the buffer of the
// window that ended, which Take empties once it has drained every row
// (resetEnded). A chain may span both buffers (a row not drained yet that
// Add updated meanwhile: its whole chain is taken with the window), so a
// chain's links say which buffer they point into (exemplarRef).
type exemplarStore struct {
	bufs [2]exemplarBuf
	// cur is the buffer keep appends to.
	cur uint64
}

// exemplarBuf is one buffer of an exemplarStore.
type exemplarBuf struct {
	chunks [][]exemplarEntry
	// n is the entries used.
	n int
	// peak is the most entries any of the last windows used: chunks
	// beyond it are let go (reset).
	peak int
}

// exemplarEntry is bucket's exemplar of a series; next is the exemplarRef
// of the series' next entry, 0 at the end of its chain. 40 bytes.
type exemplarEntry struct {
	exemplar
	bucket int32
	next   uint32
}

// An exemplarRef is how a chain points at an entry: 1 + the entry's index
// in its buffer, with the buffer in bit exemplarBufBit; 0 for none.
const exemplarBufBit = 31

// exemplarChunkBits sizes the buffers' chunks: 1024 entries, 40 KiB.
const exemplarChunkBits = 10

// at is the entry ref (not 0) points at.
func (st *exemplarStore) at(ref uint64) *exemplarEntry {
	i := ref - 1
	b := &st.bufs[i>>exemplarBufBit]
	i &= 1<<exemplarBufBit - 1
	return &b.chunks[i>>exemplarChunkBits][i&(1<<exemplarChunkBits-1)]
}

// keep makes e's request, of value v, the exemplar of bucket i of series
// s, in place of the bucket's if it has one.
func (st *exemplarStore) keep(s *series, i int, e *gateway.Event, v float64) {
	var x *exemplarEntry
	for n := s[0]; n != 0; n = uint64(x.next) {
		if x = st.at(n); x.bucket == int32(i) {
			// Field by field: a composite literal is built on the stack
			// and copied.
			x.trace, x.span, x.value = e.TraceID, e.SpanID, v
			return
		}
	}
	b := &st.bufs[st.cur]
	if b.n>>exemplarChunkBits == len(b.chunks) {
		b.chunks = append(b.chunks, make([]exemplarEntry, 1<<exemplarChunkBits))
	}
	ref := 1 + (st.cur<<exemplarBufBit | uint64(b.n))
	x = st.at(ref)
	x.trace, x.span, x.value = e.TraceID, e.SpanID, v
	x.bucket, x.next = int32(i), uint32(s[0])
	b.n++
	s[0] = ref // the chain's new head: this entry
}

// appendTo appends series s's exemplars to dst in the order of their
// buckets (the order of their values: bucket bounds are increasing).
func (st *exemplarStore) appendTo(dst []exemplar, s *series) []exemplar {
	start := len(dst)
	for n := s[0]; n != 0; {
		x := st.at(n)
		dst = append(dst, x.exemplar)
		n = uint64(x.next)
	}
	// A chain is newest first and holds a few entries: insertion sort.
	ex := dst[start:]
	for i := 1; i < len(ex); i++ {
		for j := i; j > 0 && ex[j].value < ex[j-1].value; j-- {
			ex[j], ex[j-1] = ex[j-1], ex[j]
		}
	}
	return dst
}

// flip makes keep append to the other buffer, empty since the Take before
// (resetEnded): Take calls it as it starts, before it lets Add in.
func (st *exemplarStore) flip() { st.cur ^= 1 }

// resetEnded empties the buffer of the window that ended, once Take has
// taken every chain of it.
func (st *exemplarStore) resetEnded() { st.bufs[st.cur^1].reset() }

// reset empties b: it keeps the chunks that the larger of this window and
// the previous peak needed, so a steady load allocates none, and lets go
// of the rest once the load shrank.
func (b *exemplarBuf) reset() {
	need := max(b.n, b.peak/2)
	b.peak = need
	keep := (need + 1<<exemplarChunkBits - 1) >> exemplarChunkBits
	if keep < len(b.chunks) {
		clear(b.chunks[keep:])
		b.chunks = b.chunks[:keep]
	}
	b.n = 0
}

// row is one label set of a view (a tuple as the view keeps it) with the
// series of each of the view's families: the otel profile's six request
// families of a route, method and status. They are found with one lookup,
// created together, and live as long as each other: the same handles hold
// them.
//
// enc is the projected tuple as encodeTuple writes it: the row's identity
// in its table (compared whole, after the hash), and its points' labels
// (decodeTuple, substrings of enc). A string of some 30 bytes without
// pointers in place of a 328-byte tuple per series.
//
// 64 bytes: a chunk of 32 rows fills a 2 KiB size class, so every row is
// one aligned cache line.
type row struct {
	// words are the series of the view's families, seriesWords each in
	// its order (slot j's at j·seriesWords), then the explicit
	// histograms' buckets (family f's at f.at).
	words []uint64
	// extra is, per slot, what a series keeps beyond its counts: made for
	// every row of a view with an exponential histogram, nil otherwise.
	extra *[]extra
	next  *row // the table's next row whose label set has the same hash
	enc   string
	// seen: Take drained it (it was updated in the window that ended):
	// keep it; Take's sweep clears it, and evicts the rows without it.
	seen bool
	// touched: one of its series was updated in this window (the row is
	// in its table's touched list).
	touched bool
	// dead: Take's sweep evicted it (it is in no hash chain, and will be
	// reused): a handle that still points at it finds its row again.
	dead bool
}

// at is the row's series in slot j.
func (r *row) at(j int) *series {
	return (*series)(r.words[j*seriesWords:][:seriesWords])
}

// extraAt is the extra part of the row's series in slot j, nil when the
// row keeps none.
func (r *row) extraAt(j int) *extra {
	if x := r.extra; x != nil {
		return &(*x)[j]
	}
	return nil
}

// bucketsOf is the explicit histogram buckets of family f (none for other
// families) in the row.
func (r *row) bucketsOf(f *family) []uint64 {
	n := f.explicitBuckets()
	return r.words[f.at : f.at+n : f.at+n]
}

// explicitBuckets is the number of buckets of an explicit histogram family
// (its bounds' and +Inf), 0 for other families.
func (f *family) explicitBuckets() int {
	if !f.hist || f.expoSize > 0 {
		return 0
	}
	return len(f.bounds) + 1
}

// rowsPerChunk is how many rows a table allocates at once. Slots of
// evicted rows are reused before a new chunk is allocated, so a chunk kept
// alive by one surviving row costs no more than the rows it held at its
// peak (which max_series bounds), and a new label set costs a fraction of
// an allocation.
const rowsPerChunk = 32

// table is one view's rows in an aggregator: its families, and its rows by
// the hash of their encoding, chained on collision (hashing one short
// string costs a fraction of hashing the 19-string tuple, and a hash key
// needs no string allocated per row).
type table struct {
	view *view
	// mask is view as the fields it clears, when it only keeps or clears
	// fields (every view of the profiles does).
	mask mask
	// fams are the families of the view, in profile order: slot j of a
	// row is family fams[j]'s series.
	fams []int
	// words is the length of one row's words: its series, then its
	// explicit histograms' buckets.
	words int
	// rows is made on the table's first row, sized as the handles map (a
	// tuple projects onto one row per view), so that new tuples do not
	// grow it either; a view no event reaches (the LLM families of a
	// gateway without GenAI traffic) costs no map.
	rows map[uint64]*row
	// free are evicted rows, emptied, reused before chunk; chunk, wordChunk
	// and extras are the last chunk allocated, of which the first used
	// rows are taken (an index, not a shrinking slice: a new row writes no
	// pointer to the table, and so takes no write barrier).
	free      []*row
	chunk     []row
	wordChunk []uint64
	extras    []extra
	used      int
	// chunks are every chunk of rows allocated: Take's sweep walks them
	// by index (a map cannot be walked in steps with the lock released
	// between them while Add changes it). dead are the rows the sweep
	// evicted, released when it ends.
	chunks [][]row
	dead   []*row
	// expo: a family of the view is an exponential histogram (its rows are
	// made with their extra).
	expo bool
	// touched are the rows with a series updated in this window, in the
	// order of their first update: Take emits, per family, the updated
	// series of each. One entry per row, not one per series: a new tuple
	// appends once for the six request families of the otel profile.
	touched []*row
	// ending is, while Take drains it, how many of touched are the rows
	// of the window it ends; rows listed after them are the next window's
	// (Take moves them to the front when done).
	ending int
	// hint sizes rows and touched when the first row is made: the most
	// tuples the bounds allow (handlesHint).
	hint int
	// ex holds the exemplars of the window's histogram series.
	ex exemplarStore
}

// rowSeed seeds the tables' hashes.
var rowSeed = maphash.MakeSeed()

// newRow returns an empty row of t, reusing an evicted one when it can.
func (t *table) newRow(fams []family) *row {
	if n := len(t.free); n > 0 {
		r := t.free[n-1]
		t.free[n-1] = nil
		t.free = t.free[:n-1]
		return r
	}
	if t.used == len(t.chunk) {
		t.chunk = make([]row, rowsPerChunk)
		t.chunks = append(t.chunks, t.chunk)
		t.wordChunk = make([]uint64, rowsPerChunk*t.words)
		if t.expo {
			t.extras = make([]extra, rowsPerChunk*len(t.fams))
		}
		t.used = 0
	}
	i := t.used
	t.used++
	r := &t.chunk[i]
	n, nw := len(t.fams), t.words
	r.words = t.wordChunk[i*nw : (i+1)*nw : (i+1)*nw]
	if t.expo {
		x := t.extras[i*n : (i+1)*n : (i+1)*n]
		r.extra = &x
		for j, fi := range t.fams {
			if f := &fams[fi]; f.expoSize > 0 {
				x[j].exp = newExpoHist(f.expoSize)
			}
		}
	}
	return r
}

// release empties an evicted row for reuse. Only handles may still
// point at it (a row is evicted when it is in no touched list), and they
// let go of their rows before their next use: Take moved the handles'
// epoch on (see held.epoch).
func (t *table) release(r *row) {
	r.enc, r.next, r.seen, r.touched, r.dead = "", nil, false, false, false
	clear(r.words)
	var xs []extra
	if r.extra != nil {
		xs = *r.extra
	}
	for j := range xs {
		if h := xs[j].exp; h != nil {
			h.reset()
			h.scale, h.base = expoMaxScale, 0 // as newExpoHist: a new series starts at the finest scale
		}
	}
	t.free = append(t.free, r)
}

// rowAt returns t's row of the label set encoded as enc, creating it (fams
// are the aggregator's families); a new row keeps encStr when it is enc as
// a string, else a copy of enc.
func (t *table) rowAt(enc []byte, encStr string, fams []family) *row {
	hash := maphash.Bytes(rowSeed, enc)
	head := t.rows[hash]
	for r := head; r != nil; r = r.next {
		if r.enc == string(enc) {
			return r
		}
	}
	r := t.newRow(fams)
	if encStr == "" {
		encStr = string(enc)
	}
	r.enc = encStr
	r.next = head
	if t.rows == nil {
		// Both at the most rows the bounds allow: the window's first rows
		// grow neither.
		t.rows = make(map[uint64]*row, t.hint)
		t.touched = make([]*row, 0, t.hint)
	}
	t.rows[hash] = r
	return r
}

// touch lists row r, a series of which was just updated for the first
// time this window, among t's touched rows, once per window.
func (t *table) touch(r *row) {
	if !r.touched {
		r.touched = true
		t.touched = append(t.touched, r)
	}
}

// add records, in the row's series of family f, value v of an event that
// stands for w requests (a sampled span's adjusted count; 1 otherwise):
// sums add v·w, histograms observe v w times, and may keep traced (nil for
// an event without a trace) as the bucket's exemplar in st, the row's
// table's (series.sampled, u the event's random draw). It returns the
// series.
func (r *row) add(f *family, v float64, w uint64, traced *gateway.Event, u uint64, st *exemplarStore) *series {
	s := r.at(f.slot)
	if !f.hist {
		s[0] = math.Float64bits(s.total() + v*float64(w))
		return s
	}
	v *= f.scale
	s[1] += w
	s[2] = math.Float64bits(s.sum() + v*float64(w))
	if f.expoSize > 0 {
		x := r.extraAt(f.slot) // made with the row
		x.exp.observe(v, w)
		if traced != nil && s.sampled(0, s[1], w, u) {
			st.keep(s, 0, traced, v)
		}
		return s
	}
	// Bounds are upper-inclusive, as Prometheus' le.
	i := sort.SearchFloat64s(f.bounds, v)
	b := &r.words[f.at+i]
	*b += w
	if traced != nil && s.sampled(i, *b, w, u) {
		st.keep(s, i, traced, v) // the ids are copied: the event borrows its input
	}
	return s
}

// handle is what a tuple is found by: its row in every view, reached with
// one map lookup per event. Handles are what the bounds count.
type handle struct {
	// rows is aligned with Aggregator.tables (carved from the chunk of its
	// handle: one pointer per view, not per family). A view's row is found
	// on the first event that has a value for one of its families: a
	// request without GenAI fields never needs the LLM families' row.
	rows []*row
	// key is the tuple's encoding, the handle's key in held.handles.
	key string
	// gw is the held key of the handle's gateway ("" for an overflow tuple
	// or a profile without resources), refreshed with the handle.
	gw string
	// window is the last window the handle was used in (add stamps it):
	// Take's sweep expires held handles by it, drops idle overflow
	// handles, and keeps the gateways of used ones.
	window int64
	// epoch is held.epoch when the handle's rows were last valid: add
	// lets go of them when it moved on (rows were evicted since).
	epoch uint32
	// held: the tuple counts against max_series (overflow tuples do not).
	held bool
}

// handlesPerChunk is how many handles an aggregator allocates at once: 112
// of 72 bytes fill an 8 KiB size class (their row pointers are a second
// chunk, 8 bytes per view per handle). As with rows, the handles of dropped
// tuples are reused before a new chunk is allocated, so the chunks hold no
// more handles than the peak the bounds allow, and a new tuple costs a
// fraction of an allocation (and of the collector's work on it).
const handlesPerChunk = 112
