package gatewayreceiver

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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

	// replayScopeAttr marks a replayed batch's scope; the cumulative
	// processor (processor/cumulativeprocessor, replay.go) removes it and
	// counts the points it already holds as replayed, not dropped.
	replayScopeAttr = "otelgateway.replay"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// checkpointOutcome is the outcome attribute of
// otelcol_receiver_gateway_checkpoints.
type checkpointOutcome string

const (
	ckptSaved            checkpointOutcome = "saved"
	ckptSaveFailed       checkpointOutcome = "save_failed"
	ckptRestored         checkpointOutcome = "restored"
	ckptDiscardedCorrupt checkpointOutcome = "discarded_corrupt"
	ckptDiscardedVersion checkpointOutcome = "discarded_version"
	ckptDiscardedConfig  checkpointOutcome = "discarded_config"
	ckptRestoreFailed    checkpointOutcome = "restore_failed"
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

func (r *gatewayReceiver) countCheckpoint(ctx context.Context, o checkpointOutcome) {
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
	ext, ok := host.GetExtensions()[id]
	if !ok {
		return fmt.Errorf("storage: extension %q not found", id)
	}
	se, ok := ext.(storage.Extension)
	if !ok {
		return fmt.Errorf("storage: extension %q is not a storage extension", id)
	}
	client, err := se.GetClient(ctx, component.KindReceiver, r.settings.ID, "")
	if err != nil {
		r.countCheckpoint(ctx, ckptRestoreFailed)
		r.settings.Logger.Error("Storage extension gave no client; the open window is kept in memory only",
			zap.Stringer("storage", id), zap.Error(err))
		return nil
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
		r.countCheckpoint(ctx, ckptRestoreFailed)
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
		md := r.agg.toMetrics(w.points, w.buckets, w.start, w.end)
		markReplay(md)
		if err := r.next.ConsumeMetrics(ctx, md); err != nil {
			r.settings.Logger.Warn("Replaying a checkpointed window failed", zap.Int("points", len(w.points)), zap.Error(err))
			continue
		}
		replayed += len(w.points)
	}
	if cp.openStart > 0 {
		r.windowStart = cp.openStart
	}
	r.countCheckpoint(ctx, ckptRestored)
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
		r.countCheckpoint(ctx, ckptSaveFailed)
		r.settings.Logger.Warn("Writing the receiver's checkpoint failed; a crash now loses the windows since the last one",
			zap.Int("bytes", len(c.buf)), zap.Error(err))
		return
	}
	r.countCheckpoint(ctx, ckptSaved)
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
			sms.At(j).Scope().Attributes().PutBool(replayScopeAttr, true)
		}
	}
}

func (c *checkpointer) encode(dst []byte, openStart pcommon.Timestamp) []byte {
	dst = append(dst, checkpointMagic...)
	dst = binary.AppendUvarint(dst, checkpointVersion)
	crcAt := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, c.fingerprint)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(openStart))
	dst = binary.AppendUvarint(dst, uint64(len(c.windows)))
	for _, w := range c.windows {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.start))
		dst = binary.LittleEndian.AppendUint64(dst, uint64(w.end))
		dst = append(dst, w.points...)
	}
	binary.LittleEndian.PutUint32(dst[crcAt:], crc32.Checksum(dst[crcAt+4:], crcTable))
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
		n := bucketsOf(f, p)
		dst = binary.AppendUvarint(dst, uint64(n))
		for _, b := range buckets[p.bucketsStart:][:n] {
			dst = binary.AppendUvarint(dst, b)
		}
		if f.expoSize > 0 {
			dst = binary.AppendVarint(dst, int64(p.expo.scale))
			dst = binary.AppendVarint(dst, int64(p.expo.offset))
			dst = binary.AppendUvarint(dst, p.expo.zero)
		}
	}
	return dst
}

// bucketsOf is the number of bucket counts a point of f holds in bucketBuf.
func bucketsOf(f *family, p *point) int {
	switch {
	case f.expoSize > 0:
		return p.expo.n
	case f.hist:
		return len(f.bounds) + 1
	}
	return 0
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

var errCorrupt = errors.New("corrupt checkpoint")

// decodeCheckpoint checks and decodes a checkpoint against the receiver's
// configuration (fingerprint) and families.
func decodeCheckpoint(b []byte, fingerprint uint64, agg *aggregator) (*restoredCheckpoint, checkpointOutcome, error) {
	if !bytes.HasPrefix(b, []byte(checkpointMagic)) {
		return nil, ckptDiscardedCorrupt, fmt.Errorf("%w: no %q magic", errCorrupt, checkpointMagic)
	}
	d := ckptDecoder{b: b[len(checkpointMagic):]}
	if v := d.uvarint(); d.err != nil || v != checkpointVersion {
		if d.err != nil {
			return nil, ckptDiscardedCorrupt, d.err
		}
		return nil, ckptDiscardedVersion, fmt.Errorf("checkpoint version %d, this receiver reads %d", v, checkpointVersion)
	}
	if len(d.b) < 4 || binary.LittleEndian.Uint32(d.b) != crc32.Checksum(d.b[4:], crcTable) {
		return nil, ckptDiscardedCorrupt, fmt.Errorf("%w: CRC mismatch", errCorrupt)
	}
	d.b = d.b[4:]
	if fp := d.u64(); d.err == nil && fp != fingerprint {
		return nil, ckptDiscardedConfig, errors.New("checkpoint written under another configuration (profile, histograms, dimensions or collector identity)")
	}
	cp := &restoredCheckpoint{openStart: pcommon.Timestamp(d.u64())}
	for n := d.count(16); n > 0 && d.err == nil; n-- {
		w := restoredWindow{start: pcommon.Timestamp(d.u64()), end: pcommon.Timestamp(d.u64())}
		for m := d.count(8); m > 0 && d.err == nil; m-- {
			w.points = append(w.points, d.point(agg, &w.buckets))
		}
		cp.windows = append(cp.windows, w)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return nil, ckptDiscardedCorrupt, d.err
	}
	return cp, ckptRestored, nil
}

// ckptDecoder reads a checkpoint; the first error sticks and every later
// read returns zero values.
type ckptDecoder struct {
	b   []byte
	err error
}

func (d *ckptDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{errCorrupt}, args...)...)
	}
	d.b = nil
}

func (d *ckptDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *ckptDecoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *ckptDecoder) u64() uint64 {
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

// count reads a count of items that take at least min bytes each, refusing
// counts the remaining bytes cannot hold (no allocation from a corrupt
// length).
func (d *ckptDecoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail("count %d exceeds the remaining %d bytes", n, len(d.b))
		return 0
	}
	return int(n)
}

func (d *ckptDecoder) bytes() []byte {
	n := d.count(1)
	b := d.b[:n]
	d.b = d.b[n:]
	return b
}

// point reads one point, its buckets appended to *buckets.
func (d *ckptDecoder) point(agg *aggregator, buckets *[]uint64) point {
	fam := d.uvarint()
	if d.err != nil || fam >= uint64(len(agg.prof.families)) {
		d.fail("family %d of %d", fam, len(agg.prof.families))
		return point{}
	}
	f := &agg.prof.families[fam]
	p := point{fam: int(fam), enc: string(d.bytes())}
	var k tupleKey
	if !decodeKey(p.enc, &k) {
		d.fail("bad tuple")
	}
	p.total = math.Float64frombits(d.u64())
	p.sum = math.Float64frombits(d.u64())
	p.count = d.uvarint()
	n := d.count(1)
	p.bucketsStart = len(*buckets)
	for range n {
		*buckets = append(*buckets, d.uvarint())
	}
	switch {
	case f.expoSize > 0:
		p.expo = expoPoint{scale: int32(d.varint()), offset: int32(d.varint()), n: n, zero: d.uvarint()}
		if n > f.expoSize || p.expo.scale > expoMaxScale {
			d.fail("exponential point of %d buckets at scale %d", n, p.expo.scale)
		}
	case f.hist && n != len(f.bounds)+1, !f.hist && n != 0:
		d.fail("%d buckets for %s", n, f.name)
	}
	return p
}
