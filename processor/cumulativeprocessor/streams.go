package cumulativeprocessor

import (
	"iter"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/internal/identity"
)

// overflowKey is the attribute of the stream that absorbs a metric's points
// beyond max_streams, per the OTel metrics SDK spec ("cardinality limits").
const overflowKey = "otel.metric.overflow"

// shardCount is a power of two well above the core counts a collector runs
// on, so concurrent batches rarely meet on one shard lock.
const shardCount = 64

// metricDesc identifies one metric of one resource and scope: everything of
// a stream's identity but the point attributes. Its id is the namespace of
// its streams in the identity cache and the stream table.
//
// Immutable after creation except seen (atomic).
type metricDesc struct {
	id   uint64
	hash uint64 // identityOf: resource, scope and metric
	// scope hashes the resource and scope (scopeIdentity.hash); share is
	// the id of the metric of that scope created before this one, whose
	// streams likely carry the same attribute sets: a new stream takes the
	// encoding of its sibling's there instead of a copy (CreateSharing).
	// 0 for the first metric of a scope.
	scope, share uint64
	// Identity, compared on every lookup so that a hash collision between
	// two metrics keeps them apart.
	resource     identity.Set
	scopeName    string
	scopeVersion string
	scopeAttrs   identity.Set
	name, unit   string
	typ          pmetric.MetricType
	monotonic    bool
	// description is not identity: the first one seen is emitted.
	description string
	// bounds are the explicit histogram bounds the metric's streams last
	// started with: streams with the same bounds share this read-only slice
	// instead of a copy each (less memory, hotter cache lines).
	bounds      atomic.Pointer[[]float64]
	resSchema   string
	scopeSchema string

	seen atomic.Int64 // wall clock (unix nanos) of the last batch that named it
}

// A stream's key is where it lives in its shard's index (index.go): its
// metric (metricDesc.id) and its attribute hash (stream.h). Streams whose
// keys collide (two attribute sets with one 64-bit hash) share the key and
// are chained through stream.next; the exact identity is the Set, compared
// along the chain. Keying by 16 bytes, not the attributes' encoding (~150
// bytes for 6 attributes), is much of what keeps creating a stream cheap.

// stream is the cumulative state of one delta stream. All fields but the
// immutable ones (shard, desc, h, attrs) are guarded by shard.mu.
type stream struct {
	shard *shard
	desc  *metricDesc
	h     uint64 // attribute hash, to delete the stream's cache entry
	attrs identity.Set
	// next chains the streams of one key (a hash collision); guarded
	// by shard.mu, nil once the stream is removed.
	next *stream

	overflow bool // the otel.metric.overflow stream of desc
	started  bool
	dead     bool // removed from the table (stale); cached pointers must re-resolve
	dirty    bool // touched since the last interval emission
	isInt    bool
	// fresh: the last accepted window (re)started the stream, so there is
	// no value before it (see prev).
	fresh bool
	start pcommon.Timestamp // emitted start time, fixed for the stream's life
	last  pcommon.Timestamp // timestamp of the last accepted point: the end of the last window
	// winStart is the start of the last accepted window. A point with this
	// start (non-zero) ending at or after last is that window resent, or
	// resent with more counts merged in: it replaces the window's
	// contribution (stream.window, accumulate).
	winStart pcommon.Timestamp
	seen     int64 // wall clock (unix nanos) of the last accepted point, for the sweep

	// prev is a sum's value before the last window (as total), unless
	// fresh. Histograms keep theirs in their state.
	prev uint64
	// total is a sum's running total: the int64, or the float64's bits, as
	// isInt says. One word for either type (and overflow beside the other
	// flags) keeps a stream's state at 128 bytes, two cache lines, and its
	// cache entry on a third (TestStreamSize): streams of other sizes,
	// packed in a slab, straddle one line more.
	total uint64

	hist *histState // explicit histograms
	exp  *expState  // exponential histograms
	// ex holds exemplars waiting for an emission that is not their point's
	// own (emit: interval; an overflow stream's batch): see exemplars.go.
	// nil until the stream keeps its first one.
	ex *exemplarSet

	// entry is the stream's own identity cache entry (its key is the
	// stream's), filled by the cache when it first holds it: one carve
	// from the shard's slab makes both, where an entry of the cache's own
	// was a second allocation (and lock) per new stream, on a line of its
	// own that a hit reads before the stream. Label sets folded into an
	// overflow stream get entries of the cache's own (ownEntry).
	entry identity.Entry[*stream]
}

// ownEntry returns s's entry if (d, h, set) is s's own key, else nil: s is
// the overflow stream a label set past the limit was folded into, and the
// cache gives that set an entry of its own (identity.Entry: one key each).
func ownEntry(s *stream, d *metricDesc, h uint64, set identity.Set) *identity.Entry[*stream] {
	if s.desc == d && s.h == h && s.attrs == set {
		return &s.entry
	}
	return nil
}

// shard owns the streams whose (metric, attribute hash) falls in it.
//
// Concurrency: mu guards the index, the dirty list and every mutable field
// of the shard's streams; it is held for one point at a time on the hot
// path, for one shard's sweep, and for one shard's emission.
type shard struct {
	mu      sync.Mutex
	streams streamIndex // index.go
	dirty   []*stream
	// Where the shard's new streams and histogram states come from
	// (slab.go).
	streamSlab slab[stream]
	histSlab   slab[histState]
	prevSlab   slab[histPrev]
	countsSlab slab[uint64]
	// pad keeps two shards' locks off one cache line.
	_ [192 - 8 - 48 - 24 - 4*24]byte
}

// find returns the stream of (metric, h, attrs), or nil, and where insert
// puts a new one (the key's slot in the index). The caller holds sh.mu.
func (sh *shard) find(metric, h uint64, attrs identity.Set) (s *stream, slot int) {
	head, slot := sh.streams.find(metric, h)
	for s := head; s != nil; s = s.next {
		if s.attrs == attrs {
			return s, slot
		}
	}
	return nil, slot
}

// insert adds s, which find has just not found, at the slot find returned:
// before the key's chain (a hash collision), or in the slot, without a
// second probe. The caller holds sh.mu since that find.
func (sh *shard) insert(s *stream, slot int) {
	if slot >= 0 {
		s.next = sh.streams.slots[slot].head
	}
	sh.streams.insert(s, slot)
}

// all yields every stream of the shard. The caller holds sh.mu and does not
// insert or remove while iterating.
func (sh *shard) all() iter.Seq[*stream] {
	return func(yield func(*stream) bool) {
		for _, sl := range sh.streams.slots {
			for s := sl.head; s != nil; s = s.next {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// removeIf unlinks the streams for which remove is true and appends them to
// removed. The caller holds sh.mu. When a key loses all its streams, the
// index is rebuilt (into an array sized for what is left), so that linear
// probing never meets a hole.
func (sh *shard) removeIf(remove func(*stream) bool, removed []*stream) []*stream {
	x := &sh.streams
	emptied := 0
	for i := range x.slots {
		sl := &x.slots[i]
		if sl.head == nil {
			continue
		}
		var kept *stream
		for s := sl.head; s != nil; {
			next := s.next
			if remove(s) {
				s.next = nil // a dead stream must not keep live ones reachable
				removed = append(removed, s)
			} else {
				s.next, kept = kept, s
			}
			s = next
		}
		if sl.head = kept; kept == nil {
			emptied++
		}
	}
	if emptied > 0 {
		old := x.slots
		x.n -= emptied
		x.setSlots(nil)
		if x.n > 0 {
			size := minIndexSlots
			for x.n*2 > size { // half full at most: room to grow
				size *= 2
			}
			x.setSlots(make([]indexSlot, size))
			x.place(old)
		}
	}
	return removed
}

// metricTable finds the metricDesc of a metric, once per metric per batch.
//
// Concurrency: lookups take mu for reading, creation and the sweep for
// writing.
type metricTable struct {
	mu     sync.RWMutex
	byHash map[uint64][]*metricDesc
	nextID uint64
	// lastOfScope is the id of the metric created last in each resource
	// and scope (metricDesc.share); the sweep drops a removed metric's.
	lastOfScope map[uint64]uint64
}

// scopeIdentity is the part of a metric's identity shared by all metrics of
// one ScopeMetrics: hashed once per ResourceMetrics and ScopeMetrics.
type scopeIdentity struct {
	res   pcommon.Resource
	rm    pmetric.ResourceMetrics
	sm    pmetric.ScopeMetrics
	hash  uint64
	scope pcommon.InstrumentationScope
}

func newScopeIdentity(rm pmetric.ResourceMetrics, resHash uint64, sm pmetric.ScopeMetrics) scopeIdentity {
	scope := sm.Scope()
	h := identity.Combine(resHash, identity.OfString(scope.Name()))
	h = identity.Combine(h, identity.OfString(scope.Version()))
	h = identity.Combine(h, identity.OfMap(scope.Attributes()))
	return scopeIdentity{res: rm.Resource(), rm: rm, sm: sm, hash: h, scope: scope}
}

func isMonotonic(m pmetric.Metric) bool {
	return m.Type() == pmetric.MetricTypeSum && m.Sum().IsMonotonic()
}

// metricHash hashes what makes a metric's streams distinct from those of
// other metrics (all but the point attributes).
func metricHash(si *scopeIdentity, m pmetric.Metric) uint64 {
	h := identity.Combine(si.hash, identity.OfString(m.Name()))
	h = identity.Combine(h, identity.OfString(m.Unit()))
	h = identity.Combine(h, uint64(m.Type()))
	if isMonotonic(m) {
		h = identity.Combine(h, 1)
	}
	return h
}

func (d *metricDesc) matches(si *scopeIdentity, m pmetric.Metric) bool {
	return d.name == m.Name() && d.unit == m.Unit() && d.typ == m.Type() && d.monotonic == isMonotonic(m) &&
		d.scopeName == si.scope.Name() && d.scopeVersion == si.scope.Version() &&
		d.scopeAttrs.Equal(si.scope.Attributes()) && d.resource.Equal(si.res.Attributes())
}

// get returns the metricDesc of m, creating it on first sight.
func (t *metricTable) get(si *scopeIdentity, m pmetric.Metric, now int64) *metricDesc {
	h := metricHash(si, m)
	t.mu.RLock()
	d := t.find(h, si, m)
	if d != nil {
		// Stamped under the read lock, which the sweep's write lock
		// excludes: a metric a batch has just found is never removed
		// before that batch adds its streams.
		d.seen.Store(now)
	}
	t.mu.RUnlock()
	if d != nil {
		return d
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// Re-check: a concurrent batch may have created it meanwhile.
	if d = t.find(h, si, m); d == nil {
		t.nextID++
		d = &metricDesc{
			id:           t.nextID,
			hash:         h,
			scope:        si.hash,
			share:        t.lastOfScope[si.hash],
			resource:     identity.SetOf(si.res.Attributes()),
			scopeName:    si.scope.Name(),
			scopeVersion: si.scope.Version(),
			scopeAttrs:   identity.SetOf(si.scope.Attributes()),
			name:         m.Name(),
			unit:         m.Unit(),
			typ:          m.Type(),
			monotonic:    isMonotonic(m),
			description:  m.Description(),
			resSchema:    si.rm.SchemaUrl(),
			scopeSchema:  si.sm.SchemaUrl(),
		}
		t.byHash[h] = append(t.byHash[h], d)
		t.lastOfScope[si.hash] = d.id
	}
	d.seen.Store(now)
	return d
}

func (t *metricTable) find(h uint64, si *scopeIdentity, m pmetric.Metric) *metricDesc {
	for _, d := range t.byHash[h] {
		if d.matches(si, m) {
			return d
		}
	}
	return nil
}
