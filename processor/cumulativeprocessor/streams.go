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

// streamKey is where a stream lives in its shard's map: its metric and its
// attribute hash. Streams whose keys collide (two attribute sets with one
// 64-bit hash) share the key and are chained through stream.next; the
// exact identity is the Set, compared along the chain. Hashing 16 bytes,
// not the attributes' encoding (~150 bytes for 6 attributes, hashed twice
// per new stream: lookup, then insert), is much of what keeps creating a
// stream cheap.
type streamKey struct {
	metric uint64 // metricDesc.id
	h      uint64 // stream.h
}

// stream is the cumulative state of one delta stream. All fields but the
// immutable ones (shard, desc, h, attrs) are guarded by shard.mu.
type stream struct {
	shard    *shard
	desc     *metricDesc
	h        uint64 // attribute hash, to delete the stream's cache entry
	attrs    identity.Set
	overflow bool // the otel.metric.overflow stream of desc
	// next chains the streams of one streamKey (a hash collision); guarded
	// by shard.mu, nil once the stream is removed.
	next *stream

	started bool
	dead    bool // removed from the table (stale); cached pointers must re-resolve
	dirty   bool // touched since the last interval emission
	isInt   bool
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

	// prev is a sum's value before the last window (the int64 or the
	// float64 bits, as isInt says), unless fresh. Histograms keep theirs in
	// their state.
	prev uint64

	i    int64
	f    float64
	hist *histState // explicit histograms
	exp  *expState  // exponential histograms
	// ex holds exemplars waiting for an emission that is not their point's
	// own (emit: interval; an overflow stream's batch): see exemplars.go.
	// nil until the stream keeps its first one.
	ex *exemplarSet
}

// shard owns the streams whose (metric, attribute hash) falls in it.
//
// Concurrency: mu guards the map, the dirty list and every mutable field of
// the shard's streams; it is held for one point at a time on the hot path,
// for one shard's sweep, and for one shard's emission.
type shard struct {
	mu      sync.Mutex
	streams map[streamKey]*stream
	dirty   []*stream
	// Where the shard's new streams and histogram states come from
	// (slab.go).
	streamSlab slab[stream]
	histSlab   slab[histState]
	countsSlab slab[uint64]
	// pad keeps two shards' locks off one cache line.
	_ [128 - 8 - 8 - 24 - 3*24]byte
}

// find returns the stream of (metric, h, attrs), or nil, and the head of
// the key's chain (for insert). The caller holds sh.mu.
func (sh *shard) find(metric, h uint64, attrs identity.Set) (s, head *stream) {
	head = sh.streams[streamKey{metric, h}]
	for s := head; s != nil; s = s.next {
		if s.attrs == attrs {
			return s, head
		}
	}
	return nil, head
}

// insert adds s, which find has just not found, before head, the chain
// find returned: one map write, no second lookup. The caller holds sh.mu
// since that find.
func (sh *shard) insert(s, head *stream) {
	s.next = head
	sh.streams[streamKey{s.desc.id, s.h}] = s
}

// all yields every stream of the shard. The caller holds sh.mu and does not
// insert or remove while iterating.
func (sh *shard) all() iter.Seq[*stream] {
	return func(yield func(*stream) bool) {
		for _, head := range sh.streams {
			for s := head; s != nil; s = s.next {
				if !yield(s) {
					return
				}
			}
		}
	}
}

// removeIf unlinks the streams for which remove is true and appends them to
// removed. The caller holds sh.mu.
func (sh *shard) removeIf(remove func(*stream) bool, removed []*stream) []*stream {
	for k, head := range sh.streams {
		var kept *stream
		changed := false
		for s := head; s != nil; {
			next := s.next
			if remove(s) {
				s.next = nil // a dead stream must not keep live ones reachable
				removed = append(removed, s)
				changed = true
			} else {
				s.next, kept = kept, s
			}
			s = next
		}
		switch {
		case kept == nil:
			delete(sh.streams, k)
		case changed:
			sh.streams[k] = kept
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
