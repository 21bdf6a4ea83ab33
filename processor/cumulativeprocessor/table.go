package cumulativeprocessor

import (
	"context"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/internal/identity"
	"github.com/otelgateway/otelgateway/internal/prefetch"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// reason is the outcome of one point; its telemetry attributes are bounded
// string constants (never derived from types or data).
type reason uint8

const (
	accepted      reason = iota // contiguous with what is accumulated, or a stream's first point
	gap                         // start after the last timestamp: accepted, counted
	replaced                    // the last window resent (or resent with more counts): its contribution replaced
	typeChanged                 // int ↔ double: the stream restarted from this point
	boundsChanged               // other explicit bounds: the stream restarted from this point
	outOfOrder                  // timestamp not after the last accepted one: dropped
	olderStart                  // window overlaps what is accumulated: dropped
	invalid                     // malformed point (e.g. bucket counts ≠ bounds + 1): dropped
	overflowed                  // folded into the metric's overflow stream
	replayed                    // a replayed window already counted (replay.go): skipped
	numReasons
)

func (r reason) dropped() bool { return r == outOfOrder || r == olderStart || r == invalid }

// pointAttrs are the attribute sets of otelcol_processor_cumulative_points,
// built once.
var pointAttrs = [numReasons]metric.MeasurementOption{
	accepted:      outcome("accumulated", ""),
	gap:           outcome("accumulated", "gap"),
	replaced:      outcome("accumulated", "replaced"),
	typeChanged:   outcome("accumulated", "type_changed"),
	boundsChanged: outcome("accumulated", "bounds_changed"),
	outOfOrder:    outcome("dropped", "out_of_order"),
	olderStart:    outcome("dropped", "older_start"),
	invalid:       outcome("dropped", "invalid"),
	overflowed:    outcome("overflowed", ""),
	replayed:      outcome("replayed", ""),
}

var (
	lookupHit  = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "hit")))
	lookupMiss = metric.WithAttributeSet(attribute.NewSet(attribute.String("result", "miss")))
)

func outcome(o, r string) metric.MeasurementOption {
	if r == "" {
		return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o)))
	}
	return metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", o), attribute.String("reason", r)))
}

// counts collects one batch's telemetry, recorded once at its end: counting
// per point into the SDK would cost an atomic on a shared line per point.
type counts struct {
	points                       [numReasons]int64
	hits, misses, evictions, new int64
	// replay: the scope being processed is a replayed window (replay.go).
	replay bool
	// keys is the batch's attribute key order (identity.KeyOrder), for
	// the canonicalisation of new streams' attributes.
	keys identity.KeyOrder
}

func (c *counts) record(ctx context.Context, tb *metadata.TelemetryBuilder) {
	for r, n := range c.points {
		if n != 0 {
			tb.ProcessorCumulativePoints.Add(ctx, n, pointAttrs[r])
		}
	}
	if c.hits != 0 {
		tb.ProcessorCumulativeCacheLookups.Add(ctx, c.hits, lookupHit)
	}
	if c.misses != 0 {
		tb.ProcessorCumulativeCacheLookups.Add(ctx, c.misses, lookupMiss)
	}
	if c.evictions != 0 {
		tb.ProcessorCumulativeCacheEvictions.Add(ctx, c.evictions)
	}
	if c.new != 0 {
		tb.ProcessorCumulativeStreamsTracked.Add(ctx, c.new)
	}
}

// overflowSet is the attribute set of every overflow stream.
var overflowSet, overflowHash = func() (identity.Set, uint64) {
	m := pcommon.NewMap()
	m.PutBool(overflowKey, true)
	return identity.SetOf(m), identity.OfMap(m)
}()

// window applies the data model's rules to a point's window against what s
// has accumulated (s.started):
//   - the start of the last accepted window (non-zero) and an end not before
//     it: that window resent, alone or merged with newer counts (a sender
//     retrying after a downstream error keeps its window's start), so it
//     replaces the last window (replaced);
//   - otherwise a timestamp not after the last one is out of order;
//   - a start before the last timestamp overlaps what is accumulated;
//   - a start after it is a gap, accepted.
//
// A zero start is taken as contiguous (and never matches a resend).
func (s *stream) window(start, ts pcommon.Timestamp) reason {
	switch {
	case !s.started:
		return accepted
	case start != 0 && start == s.winStart && ts >= s.last:
		return replaced
	case ts <= s.last:
		return outOfOrder
	case start != 0 && start < s.last:
		return olderStart
	case start > s.last:
		return gap
	}
	return accepted
}

// restart makes s a fresh stream starting with a point of this window: its
// start time is the point's (or the point's timestamp when the start is
// unknown), so the restart reads as a counter reset downstream.
func (s *stream) restart(start, ts pcommon.Timestamp) {
	if start == 0 {
		start = ts
	}
	s.started, s.start, s.last = true, start, 0
	s.total = 0
	s.hist, s.exp = nil, nil
	s.ex = nil // pending exemplars go with the old buckets
}

// prefetch starts loading the two cache lines of s's state (aligned in
// their slab chunk: TestStreamSize; the third, its cache entry, the
// cache's PrefetchEntry has asked for), for a point a few ahead
// (accumulate).
// s may be a stale hint (an evicted or dead stream's): only a prefetch.
func (s *stream) prefetch() {
	at := uintptr(unsafe.Pointer(s))
	prefetch.Line(at)
	prefetch.Line(at + 64)
}

// touch queues s for the next interval emission, once.
func (s *stream) touch() {
	if !s.dirty {
		s.dirty = true
		s.shard.dirty = append(s.shard.dirty, s)
	}
}

func (p *cumulativeProcessor) shardOf(metricID, h uint64) *shard {
	// The high bits: the cache uses the low ones to pick its sets.
	return &p.shards[identity.Combine(metricID, h)>>(64-6)]
}

// lockStream returns the live stream of (d, attrs), whose hash is h
// (p.hashAttrs), with its shard locked. The fast path is a cache hit on a
// live stream: one probe, one lock, no allocation.
func (p *cumulativeProcessor) lockStream(d *metricDesc, attrs pcommon.Map, h uint64, now int64, c *counts) *stream {
	s, ok := p.cache.Get(d.id, h, attrs)
	if ok {
		c.hits++
	} else {
		c.misses++
		var locked bool
		if s, locked = p.resolve(d, h, attrs, now, c); locked {
			return s // found or made under its shard's lock, kept: live
		}
	}
	for {
		s.shard.mu.Lock()
		if !s.dead {
			return s
		}
		// Swept as stale after the cache handed it out: find or make the
		// live one and replace the cache's entry.
		s.shard.mu.Unlock()
		set := identity.SetOf(attrs)
		s, _ = p.lookupOrCreate(d, h, set, now, false, c)
		if p.cache.AddEntry(d.id, h, attrs, set, s, ownEntry(s, d, h, set)) {
			c.evictions++
		}
	}
}

// resolve is the miss path (the cache's Get has missed): canonicalise once,
// find or create the stream, cache it. Concurrent first misses converge in
// the cache (one create per key) and, after evictions, in the shard index.
// locked reports that s is returned with its shard locked (found or made
// by this call, not an overflow stream), which saves lockStream a second
// lock; the cache's locks are taken before a shard's everywhere, so
// holding the shard's while Create releases them cannot deadlock.
func (p *cumulativeProcessor) resolve(d *metricDesc, h uint64, attrs pcommon.Map, now int64, c *counts) (s *stream, locked bool) {
	s, _, evicted := p.cache.CreateSharingInto(d.id, h, attrs, &c.keys, d.share, func(set identity.Set) (*stream, *identity.Entry[*stream]) {
		var s *stream
		s, locked = p.lookupOrCreate(d, h, set, now, true, c)
		return s, ownEntry(s, d, h, set)
	})
	if evicted {
		c.evictions++
	}
	return s, locked
}

// lookupOrCreate returns the stream of (d, set) from the authoritative
// table, creating it if the limit allows and returning d's overflow stream
// otherwise. Idempotent: the same key always yields the same live stream.
// With keepLocked, a stream found or created is returned with its shard
// still locked (locked); an overflow stream never is.
func (p *cumulativeProcessor) lookupOrCreate(d *metricDesc, h uint64, set identity.Set, now int64, keepLocked bool, c *counts) (_ *stream, locked bool) {
	sh := p.shardOf(d.id, h)
	sh.mu.Lock()
	s, slot := sh.find(d.id, h, set)
	if s != nil {
		if !keepLocked {
			sh.mu.Unlock()
		}
		return s, keepLocked
	}
	if p.reserve() {
		s := sh.newStream(d, h, set)
		s.seen = now
		sh.insert(s, slot)
		if !keepLocked {
			sh.mu.Unlock()
		}
		c.new++
		return s, keepLocked
	}
	sh.mu.Unlock()
	return p.overflowOf(d, set, now, c), false
}

// reserve takes one unit of max_streams, or reports that none is left. A
// compare-and-swap loop, so concurrent creators never overshoot the limit.
func (p *cumulativeProcessor) reserve() bool {
	limit := int64(p.cfg.Limits.MaxStreams)
	for {
		n := p.limited.Load()
		if n >= limit {
			return false
		}
		if p.limited.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// overflowOf returns d's overflow stream for a point whose attributes are
// set, the one with attributes {otel.metric.overflow: true} plus those of
// overflow_keep that set carries (the collector label: one value per
// collector, so one overflow stream per metric), creating it beyond the
// limit. A stream that a source itself sent with exactly that attribute set
// is the same series downstream, so it becomes the overflow stream (and
// from then on skips the window checks, as points of many streams land in
// it). Called once per new attribute set past the limit (the cache then
// maps the set to the overflow stream), so building the kept set here
// costs nothing per point.
func (p *cumulativeProcessor) overflowOf(d *metricDesc, set identity.Set, now int64, c *counts) *stream {
	attrs, h := p.overflowSetOf(set)
	sh := p.shardOf(d.id, h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, slot := sh.find(d.id, h, attrs)
	if s == nil {
		s = sh.newStream(d, h, attrs)
		s.seen = now
		sh.insert(s, slot)
		c.new++
	}
	s.overflow = true
	return s
}

// overflowSetOf is the attribute set (and its hash) of the overflow stream
// that absorbs a point with attributes set.
func (p *cumulativeProcessor) overflowSetOf(set identity.Set) (identity.Set, uint64) {
	if len(p.cfg.OverflowKeep) == 0 {
		return overflowSet, overflowHash
	}
	all := pcommon.NewMap()
	set.CopyTo(all)
	kept := pcommon.NewMap()
	kept.PutBool(overflowKey, true)
	for _, k := range p.cfg.OverflowKeep {
		if v, ok := all.Get(k); ok {
			v.CopyTo(kept.PutEmpty(k))
		}
	}
	if kept.Len() == 1 {
		return overflowSet, overflowHash
	}
	return identity.SetOf(kept), identity.OfMap(kept)
}

// sweep forgets the streams that received no point for max_stale, and the
// metrics no batch named for as long. It runs in the background, one shard
// at a time, so ConsumeMetrics never pays for expiry and never waits for
// more than one shard.
func (p *cumulativeProcessor) sweep(now time.Time) {
	cutoff := now.Add(-p.cfg.MaxStale).UnixNano()
	var removed []*stream
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		removed = sh.removeIf(func(s *stream) bool {
			if s.seen >= cutoff {
				return false
			}
			// Cached pointers see this under the shard lock and
			// re-resolve (lockStream), so a late point starts a new
			// stream instead of reviving this one.
			s.dead = true
			if !s.overflow {
				p.limited.Add(-1)
			}
			return true
		}, removed)
		sh.mu.Unlock()
	}
	for _, s := range removed {
		// Frees the cache's copy early; an entry left behind (say, one
		// mapping an overflowed label set to a swept overflow stream) only
		// costs a re-resolve on its next hit.
		p.cache.Delete(s.desc.id, s.h, s.attrs, s)
	}
	p.metrics.mu.Lock()
	for h, ds := range p.metrics.byHash {
		kept := ds[:0]
		for _, d := range ds {
			if d.seen.Load() >= cutoff {
				kept = append(kept, d)
			} else if p.metrics.lastOfScope[d.scope] == d.id {
				delete(p.metrics.lastOfScope, d.scope)
			}
		}
		if len(kept) == 0 {
			delete(p.metrics.byHash, h)
		} else {
			p.metrics.byHash[h] = kept
		}
	}
	p.metrics.mu.Unlock()
	if len(removed) > 0 {
		p.telemetry.ProcessorCumulativeStreamsTracked.Add(context.Background(), -int64(len(removed)))
		p.logger.Debug("Dropped stale streams", zap.Int("streams", len(removed)))
	}
}
