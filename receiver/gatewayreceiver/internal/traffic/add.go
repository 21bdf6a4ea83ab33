package traffic

import "github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"

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
		GatewaysOverflowed: c.GatewaysOverflowed - before.GatewaysOverflowed, Truncated: c.Truncated - before.Truncated,
		Superseded: c.Superseded - before.Superseded}
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
	if e.Superseded != 0 && a.superseded(e) {
		a.counts.Superseded++
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
	h.window = a.held.window
	if h.epoch != a.held.epoch { // rows were evicted, and are reused, since h last used its rows
		clear(h.rows)
		h.epoch = a.held.epoch
	}
	// Whether the event carries a trace (an exemplar) is decided once, not
	// per histogram.
	var traced *gateway.Event
	var u uint64
	if a.keepExemplars && e.TraceID != ([16]byte{}) {
		traced, u = e, a.draw()
	}
	w := max(e.Weight, 1)
	for i := range a.fams {
		f := &a.fams[i]
		if f.claim&e.Superseded != 0 {
			continue
		}
		v, ok := valueOf(f.measure, e)
		if !ok {
			continue
		}
		r := h.rows[f.table]
		if r == nil || r.dead { // not found yet, or evicted in the Take under way
			r = a.resolve(h, f.table, &k)
		}
		t := &a.tables[f.table]
		if r.add(f, v, w, traced, u, &t.ex).touch() {
			t.touch(r)
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
		r = t.rowAt(a.buf.key, h.key, a.fams)
	} else if t.mask.ok {
		a.buf.view = t.mask.encodeFrom(a.buf.view[:0], a.buf.key)
		r = t.rowAt(a.buf.view, "", a.fams)
	} else if pk := t.view.keep(*k); pk != *k {
		a.buf.view = encodeTuple(a.buf.view[:0], &pk)
		r = t.rowAt(a.buf.view, "", a.fams)
	} else {
		r = t.rowAt(a.buf.key, h.key, a.fams) // a view that is not a mask kept the whole tuple
	}
	h.rows[ti] = r
	return r
}

// draw is the next of the aggregator's uniform random numbers (splitmix64:
// which traced request a bucket keeps as its exemplar needs no more; the
// caller holds a.mu).
func (a *Aggregator) draw() uint64 {
	a.rng += 0x9e3779b97f4a7c15
	z := a.rng
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
