package traffic

import (
	"math/rand/v2"
	"sync"
	"unsafe"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// Add counts events and returns what it did with them beyond counting:
// the events the profile does not count, those folded into an overflow
// tuple, and the label values it cut.
//
// What depends on an event alone is worked out before the lock (prepare):
// whether the profile counts it, its tuple and the tuple's encoding, cut to
// MaxLabelBytes, its families' values, its exemplar draw. Under the lock
// (record) only what the aggregator holds is touched: the handle lookup, a
// new tuple's admission, the rows' updates. The lock is what serializes
// concurrent Adds (issue 28 item 6); it covered all of this work, and now
// covers about half of it.
func (a *Aggregator) Add(events []gateway.Event) Counts {
	b := a.spare.Swap(nil)
	if b == nil {
		b = batches.Get().(*batch)
	}
	b.reset()
	for i := range events {
		a.prepare(&events[i], i, b)
	}
	a.mu.Lock()
	before := a.counts
	a.record(events, b)
	c := a.counts
	a.mu.Unlock()
	if b.bytes() <= maxKeptBatchBytes && !a.spare.CompareAndSwap(nil, b) {
		batches.Put(b)
	}
	return Counts{NotCounted: c.NotCounted - before.NotCounted, Overflowed: c.Overflowed - before.Overflowed,
		GatewaysOverflowed: c.GatewaysOverflowed - before.GatewaysOverflowed, Truncated: c.Truncated - before.Truncated,
		Superseded: c.Superseded - before.Superseded}
}

// batch is the working memory of one Add, taken from batches: what prepare
// found of each counted event, for record. Its own random state too, so
// drawing an exemplar needs no shared state.
type batch struct {
	// keys holds the counted events' tuple encodings, one after another;
	// obs their families' values, one after another; evs the counted
	// events, in order.
	keys []byte
	obs  []observation
	evs  []prepared
	// What prepare did beyond preparing: events not counted, superseded,
	// and label values cut.
	notCounted, superseded, truncated int64
	rng                               uint64
}

// prepared is one counted event of a batch: its index in the events, the
// end of its tuple's encoding in batch.keys and of its values in batch.obs
// (each starts where the previous event's ends), and, when it carries a
// trace and exemplars are kept, its uniform random draw (series.sampled).
type prepared struct {
	ev, end, obsEnd int32
	traced          bool
	u               uint64
}

// observation is the value of an event for one family (fams[fam]) that has
// one (valueOf) and does not leave the event to Kong's pushed metrics
// (claims.go): record updates only these, without walking every family.
type observation struct {
	v   float64
	fam int32
}

// batches are Add's batches, reused: a batch holds about 120 bytes per
// event, as many as it has held before, so an Add allocates nothing once
// the pool has batches of its size. Each aggregator keeps one batch of its
// own besides (Aggregator.spare), the one an Add without a concurrent one
// uses: sync.Pool may let go of a batch at any collection (and drops some
// on purpose under the race detector), which made one Add in a few
// allocate its batch anew.
var batches = sync.Pool{New: func() any { return &batch{rng: rand.Uint64()} }}

// maxKeptBatchBytes is the most bytes a batch goes back to batches with: a
// batch of an unusually large Add is let go rather than pinned.
const maxKeptBatchBytes = 1 << 20

// bytes is the memory b's slices hold.
func (b *batch) bytes() int {
	return cap(b.keys) + cap(b.obs)*int(unsafe.Sizeof(observation{})) + cap(b.evs)*int(unsafe.Sizeof(prepared{}))
}

func (b *batch) reset() {
	b.keys, b.obs, b.evs = b.keys[:0], b.obs[:0], b.evs[:0]
	b.notCounted, b.superseded, b.truncated = 0, 0, 0
}

// add counts one event (prepare and record); the caller holds a.mu. Add
// prepares its events before it takes the lock; this is one event's whole
// work, as the benchmarks and tests of the cached path measure it.
func (a *Aggregator) add(e *gateway.Event) {
	b := &a.one
	b.reset()
	a.prepare(e, 0, b)
	a.record(unsafe.Slice(e, 1), b) // e as events[0]
}

// prepare works out, without the lock, what counting e (events[i] of the
// Add) needs that depends on e alone, into b: whether the profile counts
// it, its tuple's encoding (hashing and comparing one short contiguous key
// costs a fraction of Go's field-by-field hash and equality of the
// 19-string tuple), its label values cut to MaxLabelBytes, its families'
// values, its exemplar draw. It reads only what New set and nothing
// changes after: the profile, dimensions, limits and families.
func (a *Aggregator) prepare(e *gateway.Event, i int, b *batch) {
	k, ok := a.prof.key(e, &a.dims)
	if !ok {
		b.notCounted++
		return
	}
	if e.Superseded != 0 && a.superseded(e) {
		b.superseded++
		return
	}
	start := len(b.keys)
	b.keys = encodeTuple(b.keys, &k)
	// No string of a tuple is longer than its whole encoding: only a long
	// encoding (rare) has strings to look at.
	if max := a.held.lim.MaxLabelBytes; max > 0 && len(b.keys)-start > max {
		if n := capStrings(&k, max); n > 0 {
			b.truncated += int64(n)
			b.keys = encodeTuple(b.keys[:start], &k)
		}
	}
	for fi := range a.fams {
		f := &a.fams[fi]
		if f.claim&e.Superseded != 0 {
			continue
		}
		if v, ok := valueOf(f.measure, e); ok {
			b.obs = append(b.obs, observation{v: v, fam: int32(fi)})
		}
	}
	p := prepared{ev: int32(i), end: int32(len(b.keys)), obsEnd: int32(len(b.obs))}
	// Whether the event carries a trace (an exemplar) is decided once, not
	// per histogram.
	if a.keepExemplars && e.TraceID != ([16]byte{}) {
		p.traced, p.u = true, b.draw()
	}
	b.evs = append(b.evs, p)
}

// record counts b's prepared events of events; the caller holds a.mu.
//
// Hot path: find the tuple's handle by its encoding in one Go map lookup,
// update the series of the families the event has a value for through the
// handle's rows. No allocation once the tuple has been seen: the key is
// copied only when a tuple is first inserted.
func (a *Aggregator) record(events []gateway.Event, b *batch) {
	a.counts.NotCounted += b.notCounted
	a.counts.Superseded += b.superseded
	a.counts.Truncated += b.truncated
	var start, obsStart int32
	for _, p := range b.evs {
		key, obs := b.keys[start:p.end], b.obs[obsStart:p.obsEnd]
		start, obsStart = p.end, p.obsEnd
		e := &events[p.ev]
		// k is the handle's tuple (a.tuple), worked out only when a row
		// of the handle has to be found (resolve): for a new tuple, or for
		// a handle whose rows a flush let go.
		var k *tuple
		h := a.held.handles[string(key)] // no allocation: the compiler borrows key
		if h == nil {
			h = a.admitEvent(e, key)
			k = &a.tuple
		}
		h.window = a.held.window
		if h.epoch != a.held.epoch { // rows were evicted, and are reused, since h last used its rows
			clear(h.rows)
			h.epoch = a.held.epoch
		}
		var traced *gateway.Event
		if p.traced {
			traced = e
		}
		w := max(e.Weight, 1)
		for _, o := range obs {
			f := &a.fams[o.fam]
			r := h.rows[f.table]
			if r == nil || r.dead { // not found yet, or evicted in the Take under way
				if k == nil {
					k = &a.tuple
					decodeTuple(h.key, k) // encodeTuple wrote it
					a.buf.key = append(a.buf.key[:0], h.key...)
				}
				r = a.resolve(h, f.table, k)
			}
			t := &a.tables[f.table]
			if r.add(f, o.v, w, traced, p.u, &t.ex).touch() {
				t.touch(r)
			}
		}
	}
}

// admitEvent finds the handle of event e, whose tuple's encoding key no
// handle has (admit), and leaves its tuple in a.tuple: e's, worked out
// again (prepare kept only its encoding; this is a new tuple's path), or
// the overflow tuple it is folded into; and a.buf.key holding the tuple's
// encoding, as resolve needs.
func (a *Aggregator) admitEvent(e *gateway.Event, key []byte) *handle {
	a.tuple, _ = a.prof.key(e, &a.dims) // prepare counted it
	if max := a.held.lim.MaxLabelBytes; max > 0 {
		capStrings(&a.tuple, max) // as prepare did (it counted the cuts)
	}
	a.buf.key = append(a.buf.key[:0], key...)
	return a.admit(&a.tuple)
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

// draw is the next of the batch's uniform random numbers (splitmix64 from
// a random seed per batch: which traced request a bucket keeps as its
// exemplar needs no more).
func (b *batch) draw() uint64 {
	b.rng += 0x9e3779b97f4a7c15
	z := b.rng
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
