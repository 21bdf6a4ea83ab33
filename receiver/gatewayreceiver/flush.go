package gatewayreceiver

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// flusher ends a window every flush_interval: it takes the window's points
// out of traffic, hands them downstream as delta metrics, and checkpoints
// what was sent (checkpoint.go).
type flusher struct {
	traffic   *traffic.Aggregator
	next      consumer.Metrics // nil when only in a traces pipeline: nothing is flushed
	telemetry *metadata.TelemetryBuilder
	logger    *zap.Logger
	interval  time.Duration

	// windowStart is the start of the delta window being accumulated; only
	// the flush goroutine (and start and stop, when it is not running)
	// touches it.
	windowStart pcommon.Timestamp
	// coldStart: no window was carried over at start (no storage, or
	// nothing restored), so the first flush dates its window's start just
	// before its end (flush says why).
	coldStart bool
	stopLoop  chan struct{}
	loopDone  chan struct{}

	// The checkpoint (storage): the receiver's id, the storage extension
	// (nil: none) and checkpoint_replay; ckpt writes the checkpoint after
	// each flush, nil without storage.
	id      component.ID
	storage *component.ID
	replay  time.Duration
	ckpt    *checkpointer
}

// start opens the checkpoint (restoring and replaying what it holds) and
// starts the flush loop.
func (f *flusher) start(ctx context.Context, host component.Host) error {
	f.windowStart = pcommon.NewTimestampFromTime(time.Now())
	f.coldStart = true // until a checkpoint carries a window over
	// Before the flush loop and the servers: the restored windows are
	// replayed downstream and the open window's start carried over.
	if err := f.openCheckpoint(ctx, host); err != nil {
		return err
	}
	f.stopLoop = make(chan struct{})
	f.loopDone = make(chan struct{})
	go f.loop()
	return nil
}

// stop stops the flush loop, flushes what was counted since the last flush
// (so a clean restart loses no requests) and closes the checkpoint.
func (f *flusher) stop(ctx context.Context) error {
	if f.stopLoop != nil {
		close(f.stopLoop)
		<-f.loopDone
		f.stopLoop = nil
		f.flush(ctx)
	}
	return f.closeCheckpoint(ctx)
}

func (f *flusher) loop() {
	defer close(f.loopDone)
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-f.stopLoop:
			return
		case <-t.C:
			f.flush(context.Background())
		}
	}
}

// flush emits the window that just ended, in chunks (emitChunk). On a
// retryable downstream error the whole window goes back into traffic (the
// chunks already accepted too) and keeps its start, so the next flush
// resends it, with the counts since, under the same start: the cumulative
// processor takes a window resent with the same start as a replacement of
// the one it accepted, so nothing is counted twice through it. A permanent
// error drops the chunks not yet accepted (counted in
// otelcol_receiver_gateway_flushed_points).
func (f *flusher) flush(ctx context.Context) {
	if f.next == nil {
		return
	}
	w := f.traffic.Take()
	if w.Len() == 0 {
		// Nothing happened: the next point's window still starts at
		// windowStart, which is correct for a delta covering the quiet time.
		return
	}
	now := pcommon.NewTimestampFromTime(time.Now())
	if f.coldStart {
		// The first window since a start that carried none over begins
		// just before it ends. Its points start every stream the
		// processor makes in this process, and that start is their
		// created time downstream (OpenMetrics _created, protobuf
		// created_timestamp). A pull exporter serves them only from this
		// flush on, and after a restart without storage Prometheus has
		// marked their series stale at a scrape made before it; with
		// created-timestamp zero ingestion it refuses a zero sample dated
		// before that marker (out of order), and a counter that came back
		// higher than it was then shows no reset at all: under
		// Prometheus 3.16, resets() found 0 of 12 and increase() read 96
		// of 156. Dated after the marker, the zero sample is taken. The
		// counts are the same; only the first window's requests are dated
		// at its end. Set before emitting, so a window resent after a
		// retryable error keeps it.
		f.windowStart = now - 1
		f.coldStart = false
	}
	sent, err := f.emit(ctx, w, f.windowStart, now, false)
	n := int64(w.Len())
	switch {
	case err == nil || consumererror.IsPermanent(err):
		// The window is over: what was accepted (all of it without an
		// error) is sent and checkpointed, the rest dropped.
		start := f.windowStart
		f.windowStart = now
		if sent > 0 {
			f.telemetry.ReceiverGatewayFlushedPoints.Add(ctx, int64(sent), metric.WithAttributeSet(pointsSent))
			f.saveCheckpoint(ctx, w, sent, start, now)
		}
		if err != nil {
			f.telemetry.ReceiverGatewayFlushedPoints.Add(ctx, n-int64(sent), metric.WithAttributeSet(pointsDrop))
			f.logger.Error("Dropping gateway metrics refused downstream", zap.Int64("points", n-int64(sent)), zap.Error(err))
		}
	default:
		f.traffic.Merge(w)
		f.telemetry.ReceiverGatewayFlushedPoints.Add(ctx, n, metric.WithAttributeSet(pointsRetry))
		f.logger.Warn("Downstream refused gateway metrics; keeping them for the next flush", zap.Int64("points", n), zap.Error(err))
	}
}

// emitChunk is the most points one ConsumeMetrics carries. A window of
// 10k routes is tens of thousands of points: as one pdata.Metrics it is
// ~14 MB built at once and alive until the pipeline returns, and a GC that
// marks meanwhile sets the next heap goal twice that higher (the
// collector's RSS follows the goal). In chunks of 512 (~0.3 MB of pdata)
// the window's pdata never outweighs the series state: in bench/distribution
// (22k series) the live heap a GC found during a flush went from ~53 MB
// (one batch) to ~45 (chunks of 2,048) to ~42 (512). 512 histogram points
// are still ~9k samples, a full remote-write request.
const emitChunk = 512

// emit hands window w (start to end) downstream in chunks of emitChunk
// points, marked as a replay when replay is set, and returns how many
// points were accepted before the first error.
func (f *flusher) emit(ctx context.Context, w *traffic.Window, start, end pcommon.Timestamp, replay bool) (int, error) {
	for sent := 0; sent < w.Len(); {
		n := min(emitChunk, w.Len()-sent)
		md := w.Metrics(sent, sent+n, start, end)
		if replay {
			markReplay(md)
		}
		if err := f.next.ConsumeMetrics(ctx, md); err != nil {
			return sent, err
		}
		sent += n
	}
	return w.Len(), nil
}

var (
	pointsSent  = attribute.NewSet(attribute.String("outcome", "sent"))
	pointsRetry = attribute.NewSet(attribute.String("outcome", "retried"))
	pointsDrop  = attribute.NewSet(attribute.String("outcome", "dropped"))
)
