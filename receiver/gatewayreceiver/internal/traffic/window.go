package traffic

import (
	"hash/maphash"
	"runtime"
	"slices"
)

// Window is the points of one flush window: every series updated in it,
// with their buckets and exemplars, as Take took them out of the
// aggregator (or a checkpoint decoded them). Metrics renders them as pdata.
type Window struct {
	points []point
	// buckets holds the points' bucket counts (and an exponential point's
	// layout ahead of its counts); exemplars their exemplars.
	buckets   []uint64
	exemplars []exemplar
	// a is the aggregator whose families and labels the points refer to.
	a *Aggregator
}

// Len is the number of points in w.
func (w *Window) Len() int { return len(w.points) }

// point is one emitted point of the window: 56 bytes, as a window holds
// one per active series (tens of thousands at 10k routes, kept between
// flushes for reuse).
type point struct {
	// enc is the point's label set as encodeTuple writes it (its row's;
	// 16 bytes per point where a tuple takes 328): tuple decodes it.
	enc        string
	total, sum float64
	count      uint64
	fam        int32
	// bucketsStart indexes Window.buckets: a histogram's counts start
	// there; an exponential histogram's layout (expoHeader words) precedes
	// its counts.
	bucketsStart   int32
	exStart, exEnd int32 // into Window.exemplars
}

// expoPoint is the layout of an exponential histogram point: n buckets,
// the first of index offset at scale.
type expoPoint struct {
	scale, offset int32
	n             int
	zero          uint64
}

// expoHeader is the number of bucket words an exponential point's layout
// takes ahead of its counts: scale and offset, n, zero.
const expoHeader = 3

// expoWords is an exponential point's layout as Window.buckets holds it.
func expoWords(e expoPoint) [expoHeader]uint64 {
	return [expoHeader]uint64{uint64(uint32(e.scale))<<32 | uint64(uint32(e.offset)), uint64(e.n), e.zero}
}

// appendExpo appends an exponential point's layout and counts to buf.
func appendExpo(buf []uint64, e expoPoint, counts []uint64) []uint64 {
	w := expoWords(e)
	return append(append(buf, w[:]...), counts...)
}

// expo is exponential point p's layout and counts, as appendExpo wrote them.
func (p *point) expo(buf []uint64) (expoPoint, []uint64) {
	h := buf[p.bucketsStart:]
	e := expoPoint{scale: int32(uint32(h[0] >> 32)), offset: int32(uint32(h[0])), n: int(h[1]), zero: h[2]}
	return e, h[expoHeader:][:e.n]
}

// counts is explicit histogram point p's n bucket counts.
func (p *point) counts(buf []uint64, n int) []uint64 { return buf[p.bucketsStart:][:n] }

// Take returns the points of the window that just ended and starts a new
// one. Rows not updated in a whole window are dropped (reused: a handle
// lets go of its rows, found again on next use, once rows were), and
// overflow handles unused for a window are dropped, which bounds the
// series by the tuples active in two consecutive windows; a held tuple
// keeps only its handle until it expires. The window returned is reused by
// the next Take.
//
// Take works in steps of a few thousand rows or handles and lets Add in
// between them (yield): at a million tuples the window is millions of
// points, and holding the lock for all of it stopped ingest for seconds.
// It drains the rows each table's touched list held when it started: an
// event Add counts meanwhile in a row not drained yet is taken with this
// window, one in a row drained already goes to the next (the row is
// listed again, after them), so every event is in exactly one window. Then
// it sweeps the handles (expiry) and the rows (eviction) step by step.
func (a *Aggregator) Take() *Window {
	a.takeMu.Lock()
	defer a.takeMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &a.win
	w.points, w.buckets, w.exemplars = w.points[:0], w.buckets[:0], w.exemplars[:0]
	ended := a.held.window
	a.held.window++ // add stamps the next window's handles from here on
	for i := range a.tables {
		a.tables[i].ending = len(a.tables[i].touched)
		a.tables[i].ex.flip() // Add keeps the next window's exemplars apart
	}
	for i := range a.tables {
		t := &a.tables[i]
		for from := 0; from < t.ending; from += drainStep {
			a.yield()
			to := min(from+drainStep, t.ending)
			w.room(a, (to-from)*len(t.fams), (to-from)*t.maxBuckets(a.fams))
			w.drain(a, t, t.touched[from:to]) // t.touched re-read: Add may have grown it
			clear(t.touched[from:to])
		}
		// The rows listed since Take started are the next window's.
		next := copy(t.touched, t.touched[t.ending:])
		clear(t.touched[max(next, t.ending):])
		t.touched, t.ending = t.touched[:next], 0
		t.ex.resetEnded() // every chain of the window that ended was taken
	}
	a.endWindow(ended)
	return w
}

// maxBuckets is the most bucket words the families of one row of t take
// in a window, an exponential histogram's counts aside (they are few but
// may be max_size: reserving that would cost more than appending them).
func (t *table) maxBuckets(fams []family) int {
	n := 0
	for _, fi := range t.fams {
		f := &fams[fi]
		n += f.explicitBuckets()
		if f.expoSize > 0 {
			n += expoHeader
		}
	}
	return n
}

// room makes room in w for points more points and buckets more bucket
// words (a step's most) without the lock, growing as append does: grown
// by append under the lock, a window of millions of points copied
// hundreds of MB in one step. The caller is Take, holding a.mu; nothing
// else uses w meanwhile.
func (w *Window) room(a *Aggregator, points, buckets int) {
	if cap(w.points)-len(w.points) >= points && cap(w.buckets)-len(w.buckets) >= buckets {
		return
	}
	a.mu.Unlock()
	w.points, w.buckets = slices.Grow(w.points, points), slices.Grow(w.buckets, buckets)
	a.mu.Lock()
}

// drainStep is the most rows Take drains under the lock at once (a
// variable so tests can make steps small): 1,024 rows of the otel
// profile's request view are 6,144 points.
var drainStep = 1024

// sweepStep is the most handles or rows one step of Take's sweeps looks
// at under the lock (a step reads each once).
var sweepStep = 8192

// yield lets Add in between two steps of Take, which holds a.mu (and
// a.takeMu); Gosched gives a goroutine woken by the unlock its turn before
// Take takes the lock again.
func (a *Aggregator) yield() {
	a.mu.Unlock()
	if yieldHook != nil {
		yieldHook(a)
	}
	runtime.Gosched()
	a.mu.Lock()
}

// yieldHook, when set (by tests only), runs in yield without the lock: what
// an Add between two of Take's steps does is then deterministic.
var yieldHook func(*Aggregator)

// drain takes the updated series of rows, a step of t's touched list,
// into w, grouped per family (so a chunk Metrics renders holds few
// families), and marks the rows drained: not listed (an update lists them
// again, for the next window), and seen (kept by the sweep). The caller
// holds a.mu.
func (w *Window) drain(a *Aggregator, t *table, rows []*row) {
	for _, fi := range t.fams {
		f := &a.fams[fi]
		for _, r := range rows {
			if s := r.at(f.slot); s.touched() { // else another family of the row was updated, not this one
				w.take(int32(fi), f, r, s, &t.ex)
			}
		}
	}
	for _, r := range rows {
		r.touched, r.seen = false, true
	}
}

// take moves series s of family f (index fam), in row r, into a point of
// w, with its exemplars from st, and empties it for the next window.
func (w *Window) take(fam int32, f *family, r *row, s *series, st *exemplarStore) {
	p := point{fam: fam, enc: r.enc, sum: s.sum(), count: s.count(),
		bucketsStart: int32(len(w.buckets)), exStart: int32(len(w.exemplars))}
	if f.hist {
		w.exemplars = st.appendTo(w.exemplars, s) // a histogram's word 0 is its exemplar chain
	} else {
		p.total = s.total()
	}
	p.exEnd = int32(len(w.exemplars))
	if x := r.extraAt(f.slot); x != nil && x.exp != nil {
		h := x.exp
		off, counts := h.buckets()
		w.buckets = appendExpo(w.buckets, expoPoint{scale: h.scale, offset: off, n: len(counts), zero: h.zero}, counts)
		h.reset()
	}
	buckets := r.bucketsOf(f)
	w.buckets = append(w.buckets, buckets...)
	w.points = append(w.points, p)
	*s = series{}
	clear(buckets)
}

// endWindow lets go of what was not used in window ended, step by step
// (yield between steps; the caller holds a.mu): tuples and gateways unused
// for ExpiryWindows (expire), overflow handles unused in it, and the rows
// no Add updated since ended started (evict).
func (a *Aggregator) endWindow(ended int64) {
	h := &a.held
	if h.lim.ExpiryWindows > 0 {
		for ci := 0; ci < len(h.chunks); {
			a.yield()
			ci = h.sweepHandles(ci, ended)
		}
		h.expireGateways(ended)
	}
	evicted := false
	for i := range a.tables {
		t := &a.tables[i]
		for ci := 0; ci < len(t.chunks); {
			a.yield()
			ci = t.sweepRows(ci)
		}
		evicted = evicted || len(t.dead) > 0
	}
	if !evicted {
		return
	}
	// Every handle lets go of its rows before its next use: none can then
	// reach an evicted row, which can be reused.
	h.epoch++
	for i := range a.tables {
		t := &a.tables[i]
		for from := 0; from < len(t.dead); from += sweepStep {
			a.yield()
			for _, r := range t.dead[from:min(from+sweepStep, len(t.dead))] {
				t.release(r)
			}
		}
		clear(t.dead)
		t.dead = t.dead[:0]
	}
}

// sweepRows evicts the rows of t that were not drained (seen) and are not
// listed for the next window (touched), from chunk ci of t's rows, at most
// sweepStep rows, and returns where it stopped (len(t.chunks) when done).
// It clears seen on the rows it keeps. Rows Add makes or reuses meanwhile
// are touched, and kept.
func (t *table) sweepRows(ci int) int {
	for n := 0; ci < len(t.chunks) && n < sweepStep; ci++ {
		chunk := t.chunks[ci]
		n += len(chunk)
		for i := range chunk {
			r := &chunk[i]
			switch {
			case r.enc == "" || r.dead: // free, not used yet, or evicted already
			case r.seen || r.touched:
				r.seen = false
			default:
				t.evict(r)
			}
		}
	}
	return ci
}

// evict takes row r out of its hash chain, so no new handle finds it, and
// marks it dead, so none that points at it uses it again; endWindow
// releases it for reuse once every handle lets go of its rows.
func (t *table) evict(r *row) {
	hash := maphash.String(rowSeed, r.enc)
	var prev *row
	for c := t.rows[hash]; c != r; c = c.next { // r is in its chain
		prev = c
	}
	switch {
	case prev != nil:
		prev.next = r.next
	case r.next != nil:
		t.rows[hash] = r.next
	default:
		delete(t.rows, hash)
	}
	r.next, r.dead = nil, true
	t.dead = append(t.dead, r)
}

// Merge adds a window's points back, when a flush failed with a retryable
// error: the next Take returns them again, with what was added since. It
// lets Add in every drainStep points, as Take does (a window of millions
// of points takes seconds to merge).
func (a *Aggregator) Merge(w *Window) {
	a.takeMu.Lock() // not in the middle of a Take: w may be the window it fills
	defer a.takeMu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, p := range w.points {
		if i > 0 && i%drainStep == 0 {
			a.yield()
		}
		f := &a.fams[p.fam]
		a.buf.view = append(a.buf.view[:0], p.enc...)
		t := &a.tables[f.table]
		r := t.rowAt(a.buf.view, p.enc, a.fams)
		s := r.at(f.slot)
		s.addTo(p.total, p.sum, p.count)
		held := r.bucketsOf(f)
		for i, c := range p.counts(w.buckets, len(held)) {
			held[i] += c
		}
		if x := r.extraAt(f.slot); x != nil && x.exp != nil {
			e, counts := p.expo(w.buckets)
			x.exp.merge(e.scale, e.offset, counts, e.zero)
		}
		if s.touch() {
			t.touch(r)
		}
	}
}
