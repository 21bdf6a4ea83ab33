package traffic

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
// one. Rows no handle used for a whole window are dropped (reused; every
// handle lets go of its rows, found again on next use, and overflow
// handles are dropped), which bounds the series by the tuples active in two
// consecutive windows; a held tuple keeps only its handle until it
// expires. The window returned is reused by the next Take.
func (a *Aggregator) Take() *Window {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &a.win
	w.points, w.buckets, w.exemplars = w.points[:0], w.buckets[:0], w.exemplars[:0]
	for i := range a.fams {
		f := &a.fams[i]
		for _, r := range a.tables[f.table].touched {
			if s := r.at(f.slot); s.touched() { // else another family of the row was updated, not this one
				w.take(int32(i), f, r, s, &a.tables[f.table].ex)
			}
		}
	}
	for i := range a.tables {
		t := &a.tables[i]
		for _, r := range t.touched {
			r.touched = false
		}
		clear(t.touched)
		t.touched = t.touched[:0]
		t.ex.reset() // every chain was taken
	}
	a.endWindow()
	return w
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

// endWindow keeps what was used in the window that ended and lets go of the
// rest: a row stays while a handle that holds it was used, and the handle's
// tuple and gateway stay held; tuples and gateways unused for ExpiryWindows
// are let go (expire).
func (a *Aggregator) endWindow() {
	h := &a.held
	for _, b := range h.handles {
		if b.seen {
			for _, r := range b.rows {
				if r != nil {
					r.seen = true
				}
			}
			b.seen = false
			b.window = h.window
			if b.gw != "" {
				h.gateways[b.gw] = heldGateway{key: b.gw, window: h.window}
			}
		}
	}
	h.expire()
	h.window++
	evicted := false
	for i := range a.tables {
		t := &a.tables[i]
		for hash, head := range t.rows {
			kept, removed := t.unchainUnseen(head)
			switch {
			case kept == nil:
				delete(t.rows, hash)
			case kept != head:
				t.rows[hash] = kept
			}
			evicted = evicted || removed
		}
	}
	if evicted {
		// Drop every pointer to a row: an evicted row is reused.
		for key, b := range h.handles {
			if b.held {
				clear(b.rows)
			} else {
				h.drop(key, b)
			}
		}
	}
}

// unchainUnseen drops the rows no handle used this window from a hash
// chain (released for reuse), clears seen on the others, and returns the
// chain's new head.
func (t *table) unchainUnseen(head *row) (kept *row, removed bool) {
	var last *row
	for r := head; r != nil; {
		next := r.next
		if !r.seen {
			removed = true
			t.release(r)
			r = next
			continue
		}
		r.seen = false
		if last == nil {
			kept = r
		} else {
			last.next = r
		}
		last = r
		r = next
	}
	if last != nil {
		last.next = nil
	}
	return kept, removed
}

// Merge adds a window's points back, when a flush failed with a retryable
// error: the next Take returns them again, with what was added since.
func (a *Aggregator) Merge(w *Window) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range w.points {
		f := &a.fams[p.fam]
		a.buf.view = append(a.buf.view[:0], p.enc...)
		t := &a.tables[f.table]
		r := t.rowAt(a.buf.view, p.enc, a.fams)
		r.seen = true
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
