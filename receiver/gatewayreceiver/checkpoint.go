package gatewayreceiver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
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
)

// With `storage` set, the receiver makes a crash cost at most the window
// being accumulated (≤ flush_interval of traffic):
//
//   - after every flush it writes a checkpoint: the start of the new window,
//     and every window flushed within checkpoint_replay, as the points it
//     sent;
//   - at start it reads it back, sends those windows again, marked with the
//     scope attribute otelgateway.replay, and starts its window where the
//     last flushed one ended.
//
// The cumulative processor's own checkpoint (every checkpoint_interval) may
// lack the windows flushed since: the replay gives them back. A replayed
// window the processor already holds is recognized there (same start as the
// stream's last window: replaced by itself; older: skipped as already
// counted, outcome "replayed"), so nothing is counted twice. The window
// start carried over makes the first window after the restart contiguous
// with the last one, so no counter resets.
//
// Format (version 1), little-endian, lengths and counts as uvarints:
//
//	magic "GWRC" | uvarint version | u32 CRC-32C of the rest |
//	u64 config fingerprint (checkpointFingerprint) | u64 open window start |
//	windows: n, then per window: u64 start, u64 end, points: n, then per
//	point: family index, tuple (encodeKey, length-prefixed), f64 total,
//	f64 sum, count, buckets: n then n uvarints, and for an exponential
//	family: scale, offset (varints), zero count.
//
// Exemplars are not kept. A checkpoint of another version, whose CRC does
// not match, that does not decode, or written under a configuration whose
// fingerprint differs (profile, families, histogram layout, dimensions,
// collector identity) is discarded whole, logged and counted in
// otelcol_receiver_gateway_checkpoints.
const (
	checkpointMagic   = "GWRC"
	checkpointVersion = 1
	checkpointKey     = "windows"
)

// flushedWindow is one window as sent, encoded (its points section).
type flushedWindow struct {
	start, end pcommon.Timestamp
	flushed    time.Time
	points     []byte
}

// checkpointer keeps the receiver's recent windows and writes them.
// Only the flush goroutine (and Start and Shutdown, when it is not running)
// uses it.
type checkpointer struct {
	store       storage.Client
	fingerprint uint64
	replay      time.Duration
	windows     []flushedWindow
	buf         []byte
}

// checkpointFingerprint hashes what the meaning of saved points depends on:
// family indexes, bucket layouts and tuple fields.
func checkpointFingerprint(agg *aggregator) uint64 {
	h := fnv.New64a()
	w := func(s string) { _, _ = h.Write(append([]byte(s), 0)) }
	w(agg.prof.name)
	for _, f := range agg.prof.families {
		w(f.name)
		w(strconv.Itoa(f.expoSize))
		for _, b := range f.bounds {
			w(strconv.FormatFloat(b, 'g', -1, 64))
		}
	}
	d := agg.dims
	w(fmt.Sprint(d.service, d.upstream, d.target, d.consumer, d.source, d.preferName, d.node))
	if d.perConsumer {
		w("per_consumer") // only when set: a checkpoint of a config without it still matches
	}
	for _, sd := range d.span {
		w(sd.name)
		if sd.def != nil {
			w("=" + *sd.def)
		}
	}
	w(agg.identity.Key + "=" + agg.identity.Value)
	w(agg.nodeLabel)
	return h.Sum64()
}

func (r *gatewayReceiver) countCheckpoint(ctx context.Context, o ckpt.Outcome) {
	r.telemetry.ReceiverGatewayCheckpoints.Add(ctx, 1,
		metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", string(o)))))
}

// openCheckpoint gets the storage client and restores the last checkpoint.
// A missing or wrong extension fails Start (a configuration error); a client
// the extension cannot give is logged and the receiver runs without.
func (r *gatewayReceiver) openCheckpoint(ctx context.Context, host component.Host) error {
	if r.cfg.Storage == nil || r.next == nil {
		return nil
	}
	id := *r.cfg.Storage
	se, err := ckpt.Extension(host, id)
	if err != nil {
		return err
	}
	client, err := se.GetClient(ctx, component.KindReceiver, r.settings.ID, "")
	if err != nil {
		r.countCheckpoint(ctx, ckpt.RestoreFailed)
		r.settings.Logger.Error("Storage extension gave no client; the open window is kept in memory only",
			zap.Stringer("storage", id), zap.Error(err))
		return nil
	}
	for _, f := range ckpt.MovedAside(client) {
		r.countCheckpoint(ctx, ckpt.DiscardedUnreadable)
		r.settings.Logger.Warn("Discarding the receiver's checkpoint: its storage file was unreadable and moved aside; starting a new window",
			zap.Stringer("storage", id), zap.String("moved_to", f))
	}
	r.ckpt = &checkpointer{store: client, fingerprint: checkpointFingerprint(r.agg), replay: r.cfg.CheckpointReplay}
	r.restore(ctx)
	return nil
}

// restore reads the checkpoint, replays its windows downstream and carries
// the open window's start over.
func (r *gatewayReceiver) restore(ctx context.Context) {
	b, err := r.ckpt.store.Get(ctx, checkpointKey)
	switch {
	case err != nil:
		r.countCheckpoint(ctx, ckpt.RestoreFailed)
		r.settings.Logger.Warn("Reading the receiver's checkpoint failed; starting a new window", zap.Error(err))
		return
	case b == nil:
		return // first run
	}
	cp, outcome, err := decodeCheckpoint(b, r.ckpt.fingerprint, r.agg)
	if err != nil {
		r.countCheckpoint(ctx, outcome)
		r.settings.Logger.Warn("Discarding the receiver's checkpoint; starting a new window",
			zap.String("reason", string(outcome)), zap.Int("bytes", len(b)), zap.Error(err))
		return
	}
	replayed := 0
	for _, w := range cp.windows {
		sent, err := r.emit(ctx, w.points, w.buckets, w.start, w.end, true)
		replayed += sent
		if err != nil {
			r.settings.Logger.Warn("Replaying a checkpointed window failed", zap.Int("points", len(w.points)-sent), zap.Error(err))
		}
	}
	if cp.openStart > 0 {
		r.windowStart, r.coldStart = cp.openStart, false
	}
	r.countCheckpoint(ctx, ckpt.Restored)
	r.settings.Logger.Info("Restored the receiver's checkpoint", zap.Int("windows", len(cp.windows)),
		zap.Int("points_replayed", replayed), zap.Time("window_start", cp.openStart.AsTime()))
}

// saved records a window just flushed successfully, forgets windows older
// than checkpoint_replay, and writes the checkpoint.
func (r *gatewayReceiver) saveCheckpoint(ctx context.Context, items []point, buckets []uint64, start, end pcommon.Timestamp) {
	c := r.ckpt
	if c == nil {
		return
	}
	now := time.Now()
	if len(items) > 0 {
		c.windows = append(c.windows, flushedWindow{start: start, end: end, flushed: now, points: encodePoints(nil, items, buckets, r.agg)})
	}
	drop := 0
	for drop < len(c.windows) && now.Sub(c.windows[drop].flushed) > c.replay {
		drop++
	}
	c.windows = append(c.windows[:0], c.windows[drop:]...)
	c.buf = c.encode(c.buf[:0], r.windowStart)
	if err := c.store.Set(ctx, checkpointKey, c.buf); err != nil {
		r.countCheckpoint(ctx, ckpt.SaveFailed)
		r.settings.Logger.Warn("Writing the receiver's checkpoint failed; a crash now loses the windows since the last one",
			zap.Int("bytes", len(c.buf)), zap.Error(err))
		return
	}
	r.countCheckpoint(ctx, ckpt.Saved)
}

// closeCheckpoint releases the storage client.
func (r *gatewayReceiver) closeCheckpoint(ctx context.Context) error {
	if r.ckpt == nil {
		return nil
	}
	err := r.ckpt.store.Close(ctx)
	r.ckpt = nil
	return err
}

// markReplay marks every scope of a replayed batch.
func markReplay(md pmetric.Metrics) {
	rms := md.ResourceMetrics()
	for i := 0; i < rms.Len(); i++ {
		sms := rms.At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			sms.At(j).Scope().Attributes().PutBool(ckpt.ReplayScopeAttr, true)
		}
	}
}

func (c *checkpointer) encode(dst []byte, openStart pcommon.Timestamp) []byte {
	dst, crcAt := ckpt.AppendHeader(dst, checkpointMagic, checkpointVersion)
	dst = binary.LittleEndian.AppendUint64(dst, c.fingerprint)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(openStart))
	dst = binary.AppendUvarint(dst, uint64(len(c.windows)))
	for _, w := range c.windows {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.start))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.end))
		dst = append(dst, w.points...)
	}
	ckpt.Seal(dst, crcAt)
	return dst
}

// encodePoints appends a window's points section.
func encodePoints(dst []byte, items []point, buckets []uint64, agg *aggregator) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(items)))
	for i := range items {
		p := &items[i]
		f := &agg.prof.families[p.fam]
		dst = binary.AppendUvarint(dst, uint64(p.fam))
		dst = binary.AppendUvarint(dst, uint64(len(p.enc)))
		dst = append(dst, p.enc...)
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.total))
		dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(p.sum))
		dst = binary.AppendUvarint(dst, p.count)
		var counts []uint64
		var e expoPoint
		switch {
		case f.expoSize > 0:
			e, counts = p.expo(buckets)
		case f.hist:
			counts = p.counts(buckets, len(f.bounds)+1)
		}
		dst = binary.AppendUvarint(dst, uint64(len(counts)))
		for _, b := range counts {
			dst = binary.AppendUvarint(dst, b)
		}
		if f.expoSize > 0 {
			dst = binary.AppendVarint(dst, int64(e.scale))
			dst = binary.AppendVarint(dst, int64(e.offset))
			dst = binary.AppendUvarint(dst, e.zero)
		}
	}
	return dst
}

// restoredWindow is one decoded window, ready for toMetrics.
type restoredWindow struct {
	start, end pcommon.Timestamp
	points     []point
	buckets    []uint64
}

type restoredCheckpoint struct {
	openStart pcommon.Timestamp
	windows   []restoredWindow
}

// decodeCheckpoint checks and decodes a checkpoint against the receiver's
// configuration (fingerprint) and families.
func decodeCheckpoint(b []byte, fingerprint uint64, agg *aggregator) (*restoredCheckpoint, ckpt.Outcome, error) {
	body, outcome, err := ckpt.Open(b, checkpointMagic, checkpointVersion)
	if err != nil {
		return nil, outcome, err
	}
	d := ckptDecoder{ckpt.Decoder{B: body}}
	if fp := d.U64(); d.Err == nil && fp != fingerprint {
		return nil, ckpt.DiscardedConfig, errors.New("checkpoint written under another configuration (profile, histograms, dimensions or collector identity)")
	}
	cp := &restoredCheckpoint{openStart: pcommon.Timestamp(d.U64())}
	for n := d.Count(16); n > 0 && d.Err == nil; n-- {
		w := restoredWindow{start: pcommon.Timestamp(d.U64()), end: pcommon.Timestamp(d.U64())}
		for m := d.Count(8); m > 0 && d.Err == nil; m-- {
			w.points = append(w.points, d.point(agg, &w.buckets))
		}
		cp.windows = append(cp.windows, w)
	}
	if d.Err == nil && len(d.B) != 0 {
		d.Fail("%d trailing bytes", len(d.B))
	}
	if d.Err != nil {
		return nil, ckpt.DiscardedCorrupt, d.Err
	}
	return cp, ckpt.Restored, nil
}

// ckptDecoder reads the receiver's checkpoint body.
type ckptDecoder struct{ ckpt.Decoder }

// point reads one point, its buckets appended to *buckets.
func (d *ckptDecoder) point(agg *aggregator, buckets *[]uint64) point {
	fam := d.Uvarint()
	if d.Err != nil || fam >= uint64(len(agg.prof.families)) {
		d.Fail("family %d of %d", fam, len(agg.prof.families))
		return point{}
	}
	f := &agg.prof.families[fam]
	p := point{fam: int32(fam), enc: string(d.Bytes())}
	var k tupleKey
	if !decodeKey(p.enc, &k) {
		d.Fail("bad tuple")
	}
	p.total = math.Float64frombits(d.U64())
	p.sum = math.Float64frombits(d.U64())
	p.count = d.Uvarint()
	n := d.Count(1)
	p.bucketsStart = int32(len(*buckets))
	if f.expoSize > 0 {
		var layout [expoHeader]uint64 // written below, once read (it follows the counts)
		*buckets = append(*buckets, layout[:]...)
	}
	for range n {
		*buckets = append(*buckets, d.Uvarint())
	}
	switch {
	case f.expoSize > 0:
		e := expoPoint{scale: int32(d.Varint()), offset: int32(d.Varint()), n: n, zero: d.Uvarint()}
		if n > f.expoSize || e.scale > expoMaxScale {
			d.Fail("exponential point of %d buckets at scale %d", n, e.scale)
		}
		w := expoWords(e)
		copy((*buckets)[p.bucketsStart:], w[:])
	case f.hist && n != len(f.bounds)+1, !f.hist && n != 0:
		d.Fail("%d buckets for %s", n, f.name)
	}
	return p
}
