package cumulativeprocessor

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
	"github.com/otelgateway/otelgateway/internal/identity"
)

// A checkpoint is every started stream's state, written to the storage
// extension under checkpointKey every checkpoint_interval and at shutdown,
// and read back at start so that counters continue, with their start times,
// across a restart.
//
// Format (version 1), little-endian, lengths and counts as uvarints:
//
//	magic "CUMC" | uvarint version | u32 CRC-32C of the rest |
//	u64 config fingerprint (checkpointFingerprint) |
//	metrics: n, then per metric: resource attrs, resource schema URL,
//	         scope name, version, attrs, schema URL, metric name, unit,
//	         description (each a length-prefixed string; attribute sets in
//	         identity.Set's canonical encoding), type byte, monotonic byte |
//	streams: n, then per stream: metric index, attrs, flags byte
//	         (stream.flags), start, last, window start (u64 each), seen
//	         (varint unix nanos), then the value by the metric's type:
//	         sum        u64 value bits, u64 bits before the last window
//	         histogram  bounds (0: the previous histogram stream's of this
//	                    metric, else n+1 then n f64), count, moments,
//	                    counts; unless fresh, the same three before the
//	                    last window
//	         exponential  state, then 1 + the state before the last
//	                    window, or 0
//
// A checkpoint of another version, whose CRC does not match, that does not
// decode, or written under a configuration whose fingerprint differs, is
// discarded whole (counted and logged): the processor then starts empty,
// which downstream reads as a counter reset, never a wrong total.
const (
	checkpointMagic   = "CUMC"
	checkpointVersion = 1
	checkpointKey     = "streams"
	// maxAttrDepth bounds the nesting of slice and map attribute values the
	// decoder follows (a corrupt checkpoint cannot recurse without limit).
	maxAttrDepth = 64
)

// checkpointFingerprint hashes the configuration the saved state depends on:
// max_buckets bounds every exponential histogram's buckets, so state saved
// under another value could hold more than this configuration allows.
// max_streams is not in it: streams beyond a smaller limit are left out at
// restore (logged), the others keep their values.
func checkpointFingerprint(cfg *Config) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("max_buckets=" + strconv.Itoa(cfg.Limits.MaxBuckets)))
	return h.Sum64()
}

// checkpointOutcome is the outcome attribute of
// otelcol_processor_cumulative_checkpoints (internal/checkpoint's values).
type checkpointOutcome = ckpt.Outcome

const (
	ckptRestored            = ckpt.Restored
	ckptDiscardedCorrupt    = ckpt.DiscardedCorrupt
	ckptDiscardedVersion    = ckpt.DiscardedVersion
	ckptDiscardedConfig     = ckpt.DiscardedConfig
	ckptRestoreFailed       = ckpt.RestoreFailed
	ckptDiscardedUnreadable = ckpt.DiscardedUnreadable
	ckptSaved               = ckpt.Saved
	ckptSaveFailed          = ckpt.SaveFailed
)

func (p *cumulativeProcessor) countCheckpoint(ctx context.Context, o checkpointOutcome) {
	p.telemetry.ProcessorCumulativeCheckpoints.Add(ctx, 1,
		metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", string(o)))))
}

// openStorage returns the storage client of the configured extension. A
// missing extension, or one that is not a storage extension, is a
// configuration error (Start fails, as for contrib's persistent queue); a
// client the extension cannot give is logged and the processor runs without
// persistence.
func (p *cumulativeProcessor) openStorage(ctx context.Context, host component.Host) (storage.Client, error) {
	id := *p.cfg.Storage
	se, err := ckpt.Extension(host, id)
	if err != nil {
		return nil, err
	}
	client, err := se.GetClient(ctx, component.KindProcessor, p.id, "")
	if err != nil {
		p.countCheckpoint(ctx, ckptRestoreFailed)
		p.logger.Error("Storage extension gave no client; streams are kept in memory only",
			zap.Stringer("storage", id), zap.Error(err))
		return nil, nil
	}
	for _, f := range ckpt.MovedAside(client) {
		p.countCheckpoint(ctx, ckptDiscardedUnreadable)
		p.logger.Warn("Discarding the streams' checkpoint: its storage file was unreadable and moved aside; starting empty (counters reset)",
			zap.Stringer("storage", id), zap.String("moved_to", f))
	}
	return client, nil
}

// restore reads the checkpoint and installs its streams. It runs in Start,
// before any point: a failure of any kind leaves the processor empty and
// working.
func (p *cumulativeProcessor) restore(ctx context.Context) {
	b, err := p.store.Get(ctx, checkpointKey)
	switch {
	case err != nil:
		p.countCheckpoint(ctx, ckptRestoreFailed)
		p.logger.Warn("Reading the streams' checkpoint failed; starting empty (counters reset)", zap.Error(err))
		return
	case b == nil:
		return // first run
	}
	now := time.Now()
	cp, outcome, err := decodeCheckpoint(b, checkpointFingerprint(p.cfg), now.Add(-p.cfg.MaxStale).UnixNano())
	if err != nil {
		p.countCheckpoint(ctx, outcome)
		p.logger.Warn("Discarding the streams' checkpoint; starting empty (counters reset)",
			zap.String("reason", string(outcome)), zap.Int("bytes", len(b)), zap.Error(err))
		return
	}
	installed, skipped := p.install(cp, now.UnixNano())
	p.countCheckpoint(ctx, ckptRestored)
	p.telemetry.ProcessorCumulativeStreamsTracked.Add(ctx, int64(installed))
	p.logger.Info("Restored the streams' checkpoint", zap.Int("streams", installed),
		zap.Int("stale", cp.stale), zap.Int("beyond_max_streams", skipped), zap.Int("bytes", len(b)))
}

// save writes the checkpoint. Each shard is locked while its streams are
// encoded (as for an interval emission); the write itself holds no lock.
func (p *cumulativeProcessor) save(ctx context.Context) {
	b := p.encodeCheckpoint()
	if err := p.store.Set(ctx, checkpointKey, b); err != nil {
		p.countCheckpoint(ctx, ckptSaveFailed)
		p.logger.Warn("Writing the streams' checkpoint failed; a restart now loses what was accumulated since the last one",
			zap.Int("bytes", len(b)), zap.Error(err))
		return
	}
	p.lastCheckpointSize = len(b)
	p.countCheckpoint(ctx, ckptSaved)
}

// Stream flags as saved.
const (
	flagOverflow = 1 << iota
	flagStarted
	flagDirty
	flagIsInt
	flagFresh
)

func (s *stream) flags() byte {
	var f byte
	for _, b := range [...]struct {
		set  bool
		flag byte
	}{{s.overflow, flagOverflow}, {s.started, flagStarted}, {s.dirty, flagDirty}, {s.isInt, flagIsInt}, {s.fresh, flagFresh}} {
		if b.set {
			f |= b.flag
		}
	}
	return f
}

// encodeCheckpoint renders every started stream (see the format above).
func (p *cumulativeProcessor) encodeCheckpoint() []byte {
	var streams encoder
	streams.b = make([]byte, 0, p.lastCheckpointSize+p.lastCheckpointSize/8)
	index := make(map[*metricDesc]uint64)
	var descs []*metricDesc
	lastBounds := make(map[*metricDesc][]float64)
	n := 0
	for i := range p.shards {
		sh := &p.shards[i]
		sh.mu.Lock()
		for s := range sh.all() {
			if !s.started {
				continue
			}
			idx, ok := index[s.desc]
			if !ok {
				idx = uint64(len(descs))
				index[s.desc] = idx
				descs = append(descs, s.desc)
			}
			streams.uvarint(idx)
			streams.str(s.attrs.String())
			streams.byte(s.flags())
			streams.u64(uint64(s.start))
			streams.u64(uint64(s.last))
			streams.u64(uint64(s.winStart))
			streams.varint(s.seen)
			switch s.desc.typ {
			case pmetric.MetricTypeSum:
				streams.u64(s.total) // the int64 or the float64 bits, as isInt (in flags) says
				streams.u64(s.prev)
			case pmetric.MetricTypeHistogram:
				streams.hist(s, lastBounds)
			case pmetric.MetricTypeExponentialHistogram:
				streams.exp(s.exp)
			}
			n++
		}
		sh.mu.Unlock()
	}

	var e encoder
	e.b = make([]byte, 0, len(streams.b)+64*len(descs)+32)
	var crcAt int
	e.b, crcAt = ckpt.AppendHeader(e.b, checkpointMagic, checkpointVersion)
	e.u64(checkpointFingerprint(p.cfg))
	e.uvarint(uint64(len(descs)))
	for _, d := range descs {
		e.str(d.resource.String())
		e.str(d.resSchema)
		e.str(d.scopeName)
		e.str(d.scopeVersion)
		e.str(d.scopeAttrs.String())
		e.str(d.scopeSchema)
		e.str(d.name)
		e.str(d.unit)
		e.str(d.description)
		e.byte(byte(d.typ))
		e.bool(d.monotonic)
	}
	e.uvarint(uint64(n))
	e.b = append(e.b, streams.b...)
	ckpt.Seal(e.b, crcAt)
	return e.b
}

// encoder appends the checkpoint's primitives.
type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) u64(v uint64)     { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) f64(v float64)    { e.u64(math.Float64bits(v)) }
func (e *encoder) byte(v byte)      { e.b = append(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.byte(1)
	} else {
		e.byte(0)
	}
}

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) moments(m *moments) {
	var f byte
	if m.hasSum {
		f |= 1
	}
	if m.hasMin {
		f |= 2
	}
	if m.hasMax {
		f |= 4
	}
	e.byte(f)
	e.f64(m.sum)
	e.f64(m.min)
	e.f64(m.max)
}

func (e *encoder) counts(c []uint64) {
	for _, v := range c {
		e.uvarint(v)
	}
}

// hist writes a histogram stream's state; streams of one metric usually
// share their bounds (sharedBounds), written once per run of them.
func (e *encoder) hist(s *stream, last map[*metricDesc][]float64) {
	h := s.hist
	if h == nil {
		e.byte(0)
		return
	}
	e.byte(1)
	bounds := h.bounds()
	if prev, ok := last[s.desc]; ok && len(prev) > 0 && len(prev) == len(bounds) && &prev[0] == &bounds[0] {
		e.uvarint(0)
	} else {
		e.uvarint(uint64(len(bounds)) + 1)
		for _, b := range bounds {
			e.f64(b)
		}
		last[s.desc] = bounds
	}
	e.uvarint(h.count)
	e.moments(&h.moments)
	e.counts(h.counts())
	if !s.fresh {
		// A stream that is not fresh has saved its last window (saveHist).
		p := h.prev
		if p == nil {
			p = &histPrev{counts: make([]uint64, len(bounds)+1)}
		}
		e.uvarint(p.count)
		e.moments(&p.moments)
		e.counts(p.counts)
	}
}

func (e *encoder) exp(x *expState) {
	if x == nil {
		e.byte(0)
		return
	}
	e.byte(1)
	e.expValues(x)
	if x.prev == nil {
		e.byte(0)
		return
	}
	e.byte(1)
	e.expValues(x.prev)
}

func (e *encoder) expValues(x *expState) {
	e.uvarint(x.count)
	e.uvarint(x.zeroCount)
	e.varint(int64(x.scale))
	e.f64(x.zeroThreshold)
	e.moments(&x.moments)
	for _, b := range [...]*expBuckets{&x.pos, &x.neg} {
		e.varint(int64(b.offset))
		e.uvarint(uint64(len(b.counts)))
		e.counts(b.counts)
	}
}

// checkpoint is a decoded checkpoint, installed only once all of it decoded.
type checkpoint struct {
	md      pmetric.Metrics  // one ResourceMetrics → ScopeMetrics → Metric per saved metric
	metrics []pmetric.Metric // in index order
	streams []savedStream
	stale   int // streams left out: no point for max_stale
}

type savedStream struct {
	metric int
	attrs  pcommon.Map
	set    identity.Set
	s      stream // value fields only
}

// decodeCheckpoint parses b. The outcome says why it failed (err != nil).
// Streams whose last point is older than staleBefore (unix nanos) are left
// out, as the sweep would remove them.
func decodeCheckpoint(b []byte, fingerprint uint64, staleBefore int64) (*checkpoint, checkpointOutcome, error) {
	body, outcome, err := ckpt.Open(b, checkpointMagic, checkpointVersion)
	if err != nil {
		return nil, outcome, err
	}
	d := decoder{ckpt.Decoder{B: body}}
	if f := d.U64(); f != fingerprint {
		return nil, ckptDiscardedConfig, errors.New("checkpoint written under another configuration (max_buckets)")
	}
	cp, err := d.checkpoint(staleBefore)
	if err != nil {
		return nil, ckptDiscardedCorrupt, err
	}
	return cp, ckptRestored, nil
}

func (d *decoder) checkpoint(staleBefore int64) (*checkpoint, error) {
	cp := &checkpoint{md: pmetric.NewMetrics()}
	nm := d.Count(10)
	for range nm {
		rm := cp.md.ResourceMetrics().AppendEmpty()
		d.attrs(rm.Resource().Attributes())
		rm.SetSchemaUrl(d.Str())
		sm := rm.ScopeMetrics().AppendEmpty()
		sm.Scope().SetName(d.Str())
		sm.Scope().SetVersion(d.Str())
		d.attrs(sm.Scope().Attributes())
		sm.SetSchemaUrl(d.Str())
		m := sm.Metrics().AppendEmpty()
		m.SetName(d.Str())
		m.SetUnit(d.Str())
		m.SetDescription(d.Str())
		typ, mono := pmetric.MetricType(d.Byte()), d.Byte() == 1
		switch typ {
		case pmetric.MetricTypeSum:
			m.SetEmptySum().SetIsMonotonic(mono)
		case pmetric.MetricTypeHistogram:
			m.SetEmptyHistogram()
		case pmetric.MetricTypeExponentialHistogram:
			m.SetEmptyExponentialHistogram()
		default:
			d.Fail("metric type %d", typ)
		}
		if d.Err != nil {
			return nil, d.Err
		}
		cp.metrics = append(cp.metrics, m)
	}
	ns := d.Count(30)
	lastBounds := make(map[int]*[]float64)
	for range ns {
		idx := d.Uvarint()
		if d.Err == nil && idx >= uint64(len(cp.metrics)) {
			d.Fail("metric index %d of %d", idx, len(cp.metrics))
		}
		mi := int(idx)
		if d.Err != nil {
			return nil, d.Err
		}
		ss := savedStream{metric: mi, attrs: pcommon.NewMap()}
		raw := d.Str()
		d.decodeSet(raw, ss.attrs)
		ss.set = identity.SetOf(ss.attrs)
		if d.Err == nil && ss.set.String() != raw {
			d.Fail("attribute set not in canonical form")
		}
		s := &ss.s
		f := d.Byte()
		s.overflow, s.started, s.dirty = f&flagOverflow != 0, f&flagStarted != 0, f&flagDirty != 0
		s.isInt, s.fresh = f&flagIsInt != 0, f&flagFresh != 0
		s.start, s.last, s.winStart = pcommon.Timestamp(d.U64()), pcommon.Timestamp(d.U64()), pcommon.Timestamp(d.U64())
		s.seen = d.Varint()
		switch cp.metrics[mi].Type() {
		case pmetric.MetricTypeSum:
			s.total = d.U64()
			s.prev = d.U64()
		case pmetric.MetricTypeHistogram:
			s.hist = d.hist(s.fresh, mi, lastBounds)
		case pmetric.MetricTypeExponentialHistogram:
			s.exp = d.exp()
		}
		if d.Err != nil {
			return nil, d.Err
		}
		if s.seen < staleBefore {
			cp.stale++
			continue
		}
		cp.streams = append(cp.streams, ss)
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("%d bytes after the last stream", len(d.B))
	}
	return cp, d.Err
}

func (d *decoder) hist(fresh bool, metric int, last map[int]*[]float64) *histState {
	if d.Byte() == 0 {
		return nil
	}
	// The streams of a metric that share their bounds share them restored
	// too: one slice, one pointer (histState.boundsAt).
	var bounds *[]float64
	switch n := d.Uvarint(); {
	case d.Err != nil:
		return nil
	case n == 0:
		b, ok := last[metric]
		if !ok {
			d.Fail("histogram bounds refer to no earlier stream")
			return nil
		}
		bounds = b
	default:
		if n-1 > uint64(len(d.B)/8) {
			d.Fail("%d bounds in %d bytes", n-1, len(d.B))
			return nil
		}
		b := make([]float64, n-1)
		for i := range b {
			b[i] = d.F64()
		}
		bounds = &b
		last[metric] = bounds
	}
	n := len(*bounds) + 1
	h := newHistState(new(histState), bounds, func(n int) []uint64 { return make([]uint64, n) })
	h.count = d.Uvarint()
	d.moments(&h.moments)
	counts := h.counts()
	for i := range counts {
		counts[i] = d.Uvarint()
	}
	if !fresh {
		h.prev = &histPrev{count: d.Uvarint()}
		d.moments(&h.prev.moments)
		h.prev.counts = make([]uint64, n)
		for i := range h.prev.counts {
			h.prev.counts[i] = d.Uvarint()
		}
	}
	return h
}

func (d *decoder) exp() *expState {
	if d.Byte() == 0 {
		return nil
	}
	x := new(expState)
	d.expValues(x)
	if d.Byte() == 1 {
		x.prev = new(expState)
		d.expValues(x.prev)
	}
	return x
}

func (d *decoder) expValues(x *expState) {
	x.count = d.Uvarint()
	x.zeroCount = d.Uvarint()
	scale := d.Varint()
	x.zeroThreshold = d.F64()
	d.moments(&x.moments)
	// The spec's scales; our own state never leaves them (merging only
	// lowers the scale, and only as far as max_buckets needs).
	if scale < -10 || scale > 20 {
		d.Fail("scale %d", scale)
	}
	x.scale = int32(scale)
	for _, b := range [...]*expBuckets{&x.pos, &x.neg} {
		off := d.Varint()
		n := d.Count(1)
		// Every bucket index must be an int32, as the merge computes them.
		if off < math.MinInt32 || off+int64(n) > math.MaxInt32 {
			d.Fail("buckets %d..%d", off, off+int64(n))
		}
		b.offset = int32(off)
		if n > 0 {
			b.counts = make([]uint64, n)
			for i := range b.counts {
				b.counts[i] = d.Uvarint()
			}
		}
	}
}

func (d *decoder) moments(m *moments) {
	f := d.Byte()
	m.hasSum, m.hasMin, m.hasMax = f&1 != 0, f&2 != 0, f&4 != 0
	m.sum, m.min, m.max = d.F64(), d.F64(), d.F64()
}

// decoder reads the checkpoint's primitives; err latches the first failure
// and every read after it returns zero.
// decoder reads a checkpoint body: internal/checkpoint's primitives plus
// the processor's values.
type decoder struct{ ckpt.Decoder }

// attrs reads an attribute set (a length-prefixed identity.Set encoding)
// into dest.
func (d *decoder) attrs(dest pcommon.Map) {
	raw := d.Str()
	d.decodeSet(raw, dest)
	if d.Err == nil && identity.SetOf(dest).String() != raw {
		d.Fail("attribute set not in canonical form")
	}
}

// decodeSet reads an identity.Set encoding into dest, checked by
// identity.ParseSet (a corrupt checkpoint cannot make it allocate from a
// length it read, nor recurse beyond maxAttrDepth).
func (d *decoder) decodeSet(raw string, dest pcommon.Map) {
	if d.Err != nil || raw == "" {
		return
	}
	set, err := identity.ParseSet(raw, maxAttrDepth)
	if err != nil {
		d.Fail("%v", err)
		return
	}
	set.CopyTo(dest)
}

// install adds the decoded streams to the (empty, not yet started)
// processor: their metrics through the metric table, each stream into its
// shard, at most max_streams of them (overflow streams aside). It returns
// the streams installed and those left out for the limit.
func (p *cumulativeProcessor) install(cp *checkpoint, now int64) (installed, skipped int) {
	descs := make([]*metricDesc, len(cp.metrics))
	for i, m := range cp.metrics {
		rm := cp.md.ResourceMetrics().At(i)
		sm := rm.ScopeMetrics().At(0)
		si := newScopeIdentity(rm, identity.OfMap(rm.Resource().Attributes()), sm)
		descs[i] = p.metrics.get(&si, m, now)
	}
	for i := range cp.streams {
		ss := &cp.streams[i]
		d := descs[ss.metric]
		h := p.hashAttrs(ss.attrs)
		if ss.s.overflow {
			h = identity.OfMap(ss.attrs) // as overflowOf hashes it
		}
		sh := p.shardOf(d.id, h)
		sh.mu.Lock()
		old, head := sh.find(d.id, h, ss.set)
		if old != nil {
			sh.mu.Unlock()
			continue // saved twice: cannot happen short of a bug; keep the first
		}
		if !ss.s.overflow && !p.reserve() {
			sh.mu.Unlock()
			skipped++
			continue
		}
		s := sh.newStream(d, h, ss.set)
		s.overflow, s.started, s.isInt, s.fresh = ss.s.overflow, ss.s.started, ss.s.isInt, ss.s.fresh
		s.start, s.last, s.winStart, s.seen = ss.s.start, ss.s.last, ss.s.winStart, ss.s.seen
		s.total, s.prev, s.hist, s.exp = ss.s.total, ss.s.prev, ss.s.hist, ss.s.exp
		if s.hist != nil {
			// Share the metric's bounds, as foldHist does.
			if b := d.bounds.Load(); b != nil && slices.Equal(*b, s.hist.bounds()) {
				s.hist.boundsAt = b
			} else {
				d.bounds.Store(s.hist.boundsAt)
			}
		}
		if ss.s.dirty {
			s.touch() // not emitted before the restart: at the next tick
		}
		sh.insert(s, head)
		sh.mu.Unlock()
		installed++
	}
	return installed, skipped
}
