package gatewayreceiver

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/extension/xextension/storage"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	ckpt "github.com/otelgateway/otelgateway/internal/checkpoint"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
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
//	u64 config fingerprint (traffic's Fingerprint) | u64 open window start |
//	windows: n, then per window: u64 start, u64 end, points (traffic's
//	AppendPoints: family, label set, total, sum, count, buckets).
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
// Only the flush goroutine (and start and stop, when it is not running)
// uses it.
type checkpointer struct {
	store       storage.Client
	fingerprint uint64
	replay      time.Duration
	windows     []flushedWindow
	buf         []byte
}

func (f *flusher) countCheckpoint(ctx context.Context, o ckpt.Outcome) {
	f.telemetry.ReceiverGatewayCheckpoints.Add(ctx, 1,
		metric.WithAttributeSet(attribute.NewSet(attribute.String("outcome", string(o)))))
}

// openCheckpoint gets the storage client and restores the last checkpoint.
// A missing or wrong extension fails Start (a configuration error); a client
// the extension cannot give is logged and the receiver runs without.
func (f *flusher) openCheckpoint(ctx context.Context, host component.Host) error {
	if f.storage == nil || f.next == nil {
		return nil
	}
	id := *f.storage
	se, err := ckpt.Extension(host, id)
	if err != nil {
		return err
	}
	client, err := se.GetClient(ctx, component.KindReceiver, f.id, "")
	if err != nil {
		f.countCheckpoint(ctx, ckpt.RestoreFailed)
		f.logger.Error("Storage extension gave no client; the open window is kept in memory only",
			zap.Stringer("storage", id), zap.Error(err))
		return nil
	}
	for _, moved := range ckpt.MovedAside(client) {
		f.countCheckpoint(ctx, ckpt.DiscardedUnreadable)
		f.logger.Warn("Discarding the receiver's checkpoint: its storage file was unreadable and moved aside; starting a new window",
			zap.Stringer("storage", id), zap.String("moved_to", moved))
	}
	f.ckpt = &checkpointer{store: client, fingerprint: f.traffic.Fingerprint(), replay: f.replay}
	f.restore(ctx)
	return nil
}

// restore reads the checkpoint, replays its windows downstream and carries
// the open window's start over.
func (f *flusher) restore(ctx context.Context) {
	b, err := f.ckpt.store.Get(ctx, checkpointKey)
	switch {
	case err != nil:
		f.countCheckpoint(ctx, ckpt.RestoreFailed)
		f.logger.Warn("Reading the receiver's checkpoint failed; starting a new window", zap.Error(err))
		return
	case b == nil:
		return // first run
	}
	cp, outcome, err := decodeCheckpoint(b, f.ckpt.fingerprint, f.traffic)
	if err != nil {
		f.countCheckpoint(ctx, outcome)
		f.logger.Warn("Discarding the receiver's checkpoint; starting a new window",
			zap.String("reason", string(outcome)), zap.Int("bytes", len(b)), zap.Error(err))
		return
	}
	replayed := 0
	for _, w := range cp.windows {
		sent, err := f.emit(ctx, w.points, w.start, w.end, true)
		replayed += sent
		if err != nil {
			f.logger.Warn("Replaying a checkpointed window failed", zap.Int("points", w.points.Len()-sent), zap.Error(err))
		}
	}
	if cp.openStart > 0 {
		f.windowStart, f.coldStart = cp.openStart, false
	}
	f.countCheckpoint(ctx, ckpt.Restored)
	f.logger.Info("Restored the receiver's checkpoint", zap.Int("windows", len(cp.windows)),
		zap.Int("points_replayed", replayed), zap.Time("window_start", cp.openStart.AsTime()))
}

// saveCheckpoint records the first sent points of window w, just flushed
// successfully, forgets windows older than checkpoint_replay, and writes
// the checkpoint.
func (f *flusher) saveCheckpoint(ctx context.Context, w *traffic.Window, sent int, start, end pcommon.Timestamp) {
	c := f.ckpt
	if c == nil {
		return
	}
	now := time.Now()
	if sent > 0 {
		c.windows = append(c.windows, flushedWindow{start: start, end: end, flushed: now, points: w.AppendPoints(nil, sent)})
	}
	drop := 0
	for drop < len(c.windows) && now.Sub(c.windows[drop].flushed) > c.replay {
		drop++
	}
	c.windows = append(c.windows[:0], c.windows[drop:]...)
	c.buf = c.encode(c.buf[:0], f.windowStart)
	if err := c.store.Set(ctx, checkpointKey, c.buf); err != nil {
		f.countCheckpoint(ctx, ckpt.SaveFailed)
		f.logger.Warn("Writing the receiver's checkpoint failed; a crash now loses the windows since the last one",
			zap.Int("bytes", len(c.buf)), zap.Error(err))
		return
	}
	f.countCheckpoint(ctx, ckpt.Saved)
}

// closeCheckpoint releases the storage client.
func (f *flusher) closeCheckpoint(ctx context.Context) error {
	if f.ckpt == nil {
		return nil
	}
	err := f.ckpt.store.Close(ctx)
	f.ckpt = nil
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

// restoredWindow is one decoded window, ready to be replayed.
type restoredWindow struct {
	start, end pcommon.Timestamp
	points     *traffic.Window
}

type restoredCheckpoint struct {
	openStart pcommon.Timestamp
	windows   []restoredWindow
}

// decodeCheckpoint checks and decodes a checkpoint against the receiver's
// configuration (fingerprint) and families.
func decodeCheckpoint(b []byte, fingerprint uint64, agg *traffic.Aggregator) (*restoredCheckpoint, ckpt.Outcome, error) {
	body, outcome, err := ckpt.Open(b, checkpointMagic, checkpointVersion)
	if err != nil {
		return nil, outcome, err
	}
	d := ckpt.Decoder{B: body}
	if fp := d.U64(); d.Err == nil && fp != fingerprint {
		return nil, ckpt.DiscardedConfig, errors.New("checkpoint written under another configuration (profile, histograms, dimensions or collector identity)")
	}
	cp := &restoredCheckpoint{openStart: pcommon.Timestamp(d.U64())}
	for n := d.Count(16); n > 0 && d.Err == nil; n-- {
		w := restoredWindow{start: pcommon.Timestamp(d.U64()), end: pcommon.Timestamp(d.U64())}
		w.points = agg.ReadPoints(&d)
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
