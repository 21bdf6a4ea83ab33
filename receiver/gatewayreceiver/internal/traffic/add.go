package traffic

import (
	"hash/maphash"
	"math"
	"sort"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// Add counts events under one lock and returns what it did with them
// beyond counting: the events the profile does not count, those folded into
// an overflow tuple, and the label values it cut.
func (a *Aggregator) Add(events []gateway.Event) Counts {
	a.mu.Lock()
	before := a.counts
	for i := range events {
		a.add(&events[i])
	}
	c := a.counts
	a.mu.Unlock()
	return Counts{NotCounted: c.NotCounted - before.NotCounted, Overflowed: c.Overflowed - before.Overflowed,
		Truncated: c.Truncated - before.Truncated}
}

// add counts one event; the caller holds a.mu.
//
// Hot path: encode the event's tuple into one byte string (buf.key,
// reused), hash it once in one Go map lookup, get its handle, update every
// family's series through the handle's rows. Hashing and comparing one
// short contiguous key costs a fraction of Go's field-by-field hash and
// equality of the 19-string tuple (which was half of the aggregation
// time). No allocation once the tuple has been seen: the key is copied
// only when a tuple is first inserted.
func (a *Aggregator) add(e *gateway.Event) {
	k, ok := a.prof.key(e, &a.dims)
	if !ok {
		a.counts.NotCounted++
		return
	}
	a.buf.key = encodeTuple(a.buf.key[:0], &k)
	// No string of a tuple is longer than its whole encoding: only a long
	// encoding (rare) has strings to look at.
	if max := a.held.lim.MaxLabelBytes; max > 0 && len(a.buf.key) > max {
		if n := capStrings(&k, max); n > 0 {
			a.counts.Truncated += int64(n)
			a.buf.key = encodeTuple(a.buf.key[:0], &k)
		}
	}
	h := a.held.handles[string(a.buf.key)] // no allocation: the compiler borrows buf.key
	if h == nil {
		h = a.admit(&k) // k becomes the handle's tuple (an overflow tuple)
	}
	h.seen = true
	// Whether the event carries a trace (an exemplar) is decided once, not
	// per histogram.
	var traced *gateway.Event
	if a.keepExemplars && e.TraceID != ([16]byte{}) {
		traced = e
	}
	w := max(e.Weight, 1)
	for i := range a.fams {
		f := &a.fams[i]
		v, ok := valueOf(f.measure, e)
		if !ok {
			continue
		}
		r := h.rows[f.table]
		if r == nil {
			r = a.resolve(h, f.table, &k)
		}
		if r.add(f, v, w, traced).touch() {
			a.touched(r, f.table)
		}
	}
}

// resolve points handle h, of tuple k (a.buf.key holds its encoding), at
// its row in table ti, sharing the row that other handles already project
// onto (a latency histogram is shared by every status code), and returns
// it. k's strings may be borrowed: a new row keeps its own encoding.
func (a *Aggregator) resolve(h *handle, ti int, k *tuple) *row {
	t := &a.tables[ti]
	var r *row
	if t.mask.ok && t.mask.whole(k) {
		// The view keeps the whole tuple (the otel request families of a
		// request without GenAI fields): its encoding is the handle's.
		r = a.rowAt(t, a.buf.key, h.key)
	} else if t.mask.ok {
		a.buf.view = t.mask.encodeFrom(a.buf.view[:0], a.buf.key)
		r = a.rowAt(t, a.buf.view, "")
	} else if pk := t.view.keep(*k); pk != *k {
		a.buf.view = encodeTuple(a.buf.view[:0], &pk)
		r = a.rowAt(t, a.buf.view, "")
	} else {
		r = a.rowAt(t, a.buf.key, h.key) // a view that is not a mask kept the whole tuple
	}
	h.rows[ti] = r
	return r
}

// rowAt returns t's row of the label set encoded as enc, creating it; a
// new row keeps encStr when it is enc as a string, else a copy of enc.
func (a *Aggregator) rowAt(t *table, enc []byte, encStr string) *row {
	hash := maphash.Bytes(rowSeed, enc)
	head := t.rows[hash]
	for r := head; r != nil; r = r.next {
		if r.enc == string(enc) {
			return r
		}
	}
	r := t.newRow(a.fams)
	if encStr == "" {
		encStr = string(enc)
	}
	r.enc = encStr
	r.next = head
	if t.rows == nil {
		// Both at the most rows the bounds allow: the window's first rows
		// grow neither.
		t.rows = make(map[uint64]*row, handlesHint(a.held.lim))
		t.touched = make([]*row, 0, handlesHint(a.held.lim))
	}
	t.rows[hash] = r
	return r
}

// touched lists row r, of table ti, a series of which was just updated for
// the first time this window, among its table's touched rows, once per
// window.
func (a *Aggregator) touched(r *row, ti int) {
	if !r.touched {
		r.touched = true
		t := &a.tables[ti]
		t.touched = append(t.touched, r)
	}
}

// add records, in the row's series of family f, value v of an event that
// stands for w requests (a sampled span's adjusted count; 1 otherwise):
// sums add v·w, histograms observe v w times, and keep traced (nil for an
// event without a trace) as the bucket's exemplar. It returns the series.
func (r *row) add(f *family, v float64, w uint64, traced *gateway.Event) *series {
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
		if traced != nil {
			x.exemplar(0, 1, traced, v)
		}
		return s
	}
	// Bounds are upper-inclusive, as Prometheus' le.
	i := sort.SearchFloat64s(f.bounds, v)
	r.words[f.at+i] += w
	if traced != nil {
		r.ensureExtra(f.slot, f.cols).exemplar(i, len(f.bounds)+1, traced, v)
	}
	return s
}

// exemplar keeps e as bucket i's exemplar (the ids are copied: the event
// borrows its input).
func (x *extra) exemplar(i, buckets int, e *gateway.Event, v float64) {
	if x.ex == nil {
		ex := make([]exemplar, buckets) // once per series, on its first traced request
		x.ex = &ex
	}
	(*x.ex)[i] = exemplar{trace: e.TraceID, span: e.SpanID, value: v, set: true}
}
