package gatewayreceiver

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

func TestPeriodicFlushEmitsDeltas(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.FlushInterval = 20 * time.Millisecond })
	h.r.ingest.traces(context.Background(), kongExport("GET", "/a", 200))
	waitFor(t, func() bool { return len(sink.AllMetrics()) == 1 })
	h.r.ingest.traces(context.Background(), kongExport("GET", "/a", 200))
	waitFor(t, func() bool { return len(sink.AllMetrics()) == 2 })

	all := sink.AllMetrics()
	first := all[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	second := all[1].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if first.IntValue() != 1 || second.IntValue() != 1 {
		t.Fatalf("delta values %d, %d; want 1, 1", first.IntValue(), second.IntValue())
	}
	// Consecutive delta windows must tile time: the second starts where the
	// first ended.
	if second.StartTimestamp() != first.Timestamp() || first.StartTimestamp() >= first.Timestamp() {
		t.Fatalf("windows [%v, %v] and [%v, %v] do not tile", first.StartTimestamp(), first.Timestamp(), second.StartTimestamp(), second.Timestamp())
	}
}

// flakyConsumer fails its first calls with err, then records like a sink.
type flakyConsumer struct {
	consumertest.MetricsSink
	mu       sync.Mutex
	failures int
	err      error
}

func (f *flakyConsumer) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	f.mu.Lock()
	if f.failures > 0 {
		f.failures--
		f.mu.Unlock()
		return f.err
	}
	f.mu.Unlock()
	return f.MetricsSink.ConsumeMetrics(ctx, md)
}

func TestRetryableFlushErrorKeepsCounts(t *testing.T) {
	next := &flakyConsumer{failures: 1, err: errors.New("downstream busy")}
	h := start(t, next, nil)
	ctx := context.Background()
	h.r.ingest.traces(ctx, kongExport("GET", "/a", 200))
	h.r.flusher.flush(ctx) // refused: counts go back
	// The start the refused window was sent with (the first window after a
	// start without a checkpoint is dated at the flush: coldStart).
	start := h.r.flusher.windowStart
	h.r.ingest.traces(ctx, kongExport("GET", "/a", 200))
	h.r.flusher.flush(ctx)

	all := next.AllMetrics()
	assertCounts(t, countsOf(t, all), map[string]int64{"kong GET /a 200": 2})
	dp := all[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if dp.StartTimestamp() != start {
		t.Errorf("retried window starts at %v, want the failed window's start %v", dp.StartTimestamp(), start)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "retried")); n != 1 {
		t.Errorf("retried points = %d, want 1", n)
	}
}

func TestPermanentFlushErrorDrops(t *testing.T) {
	next := &flakyConsumer{failures: 1, err: consumererror.NewPermanent(errors.New("bad data"))}
	h := start(t, next, nil)
	ctx := context.Background()
	h.r.ingest.traces(ctx, kongExport("GET", "/a", 200))
	h.r.flusher.flush(ctx)
	h.r.ingest.traces(ctx, kongExport("GET", "/b", 200))
	h.r.flusher.flush(ctx)
	assertCounts(t, countsOf(t, next.AllMetrics()), map[string]int64{"kong GET /b 200": 1})
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "dropped")); n != 1 {
		t.Errorf("dropped points = %d, want 1", n)
	}
}

// failNth fails its nth call (1-based) with err, once, and passes every
// other call on to next.
type failNth struct {
	next  consumer.Metrics
	nth   int
	err   error
	calls int
}

func (f *failNth) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	f.calls++
	if f.calls == f.nth {
		return f.err
	}
	return f.next.ConsumeMetrics(ctx, md)
}

func (*failNth) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: true} }

// ingestRoutes ingests one Kong request for each of n routes.
func ingestRoutes(t *testing.T, h *harness, n int) {
	t.Helper()
	for i := range n {
		h.r.ingest.traces(context.Background(), kongExport("GET", "/r/"+strconv.Itoa(i), 200))
	}
}

// A window of more points than emitChunk goes downstream in chunks. When a
// later chunk is refused (retryable), the whole window is kept, the chunks
// already accepted too, and resent with the next window's counts under the
// same start: through the cumulative processor every request is counted
// exactly once. (Keeping only the refused chunks would send the accepted
// series' next window under the old start with the new counts alone, which
// the processor takes as a replacement of the window: counts lost.)
func TestChunkRefusedMidWindowIsResentWhole(t *testing.T) {
	const routes = 5000
	sink := new(consumertest.MetricsSink)
	proc := cumulative(t, testutil.NewMemClient(), sink)
	t.Cleanup(func() { _ = proc.Shutdown(context.Background()) })
	next := &failNth{next: proc, nth: 2, err: errors.New("downstream busy")}
	h := start(t, next, nil)
	ctx := context.Background()

	ingestRoutes(t, h, routes)
	h.r.flusher.flush(ctx)
	retried := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "retried"))
	if retried <= emitChunk || next.calls != 2 || len(sink.AllMetrics()) != 1 {
		t.Fatalf("first flush: %d points retried, %d calls, %d chunks through; want > %d points, the second of 2+ chunks refused", retried, next.calls, len(sink.AllMetrics()), emitChunk)
	}
	ingestRoutes(t, h, routes)
	h.r.flusher.flush(ctx)
	ingestRoutes(t, h, routes)
	h.r.flusher.flush(ctx)
	for i := range routes {
		route := "/r/" + strconv.Itoa(i)
		if v, _ := lastRequests(t, sink, route); v != 3 {
			t.Fatalf("route %s: cumulative requests %d, want 3", route, v)
		}
	}
	if sent := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "sent")); sent != 2*retried {
		t.Errorf("sent points = %d, want %d (two windows of %d)", sent, 2*retried, retried)
	}
}

// A permanent refusal of a later chunk drops the chunks not yet accepted,
// counted, and only them.
func TestChunkPermanentlyRefusedDropsTheRest(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	next := &failNth{next: sink, nth: 2, err: consumererror.NewPermanent(errors.New("bad data"))}
	h := start(t, next, nil)
	ctx := context.Background()
	ingestRoutes(t, h, 5000)
	h.r.flusher.flush(ctx)
	sent := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "sent"))
	dropped := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "dropped"))
	if sent != emitChunk || dropped <= 0 || int(sent) != sink.DataPointCount() {
		t.Errorf("sent %d, dropped %d, %d points through; want the first chunk (%d) sent and through, the rest dropped", sent, dropped, sink.DataPointCount(), emitChunk)
	}
	h.r.ingest.traces(ctx, kongExport("GET", "/after", 200))
	h.r.flusher.flush(ctx)
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "sent")); n <= sent {
		t.Errorf("the window after a dropped one was not sent (sent %d)", n)
	}
}

// TestFirstWindowAfterAColdStartStartsAtItsEnd: without a window carried
// over from storage, the first flushed window starts just before it ends,
// so its streams' start (their created time downstream) is after any scrape
// that found nothing before it (flush.go, flush); later windows start
// where the one before ended. With a checkpoint's window carried over the
// start is the checkpoint's (TestCrashLosesOnlyTheOpenWindow).
func TestFirstWindowAfterAColdStartStartsAtItsEnd(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	ctx := context.Background()
	h.r.ingest.traces(ctx, kongExport("GET", "/a", 200))
	h.r.flusher.flush(ctx)
	h.r.ingest.traces(ctx, kongExport("GET", "/a", 200))
	h.r.flusher.flush(ctx)
	all := sink.AllMetrics()
	if len(all) != 2 {
		t.Fatalf("%d batches, want 2", len(all))
	}
	first := all[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	second := all[1].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if first.StartTimestamp() != first.Timestamp()-1 {
		t.Errorf("first window [%v, %v]: want it to start 1ns before its end", first.StartTimestamp(), first.Timestamp())
	}
	if second.StartTimestamp() != first.Timestamp() {
		t.Errorf("second window starts at %v, want the first's end %v", second.StartTimestamp(), first.Timestamp())
	}
}
