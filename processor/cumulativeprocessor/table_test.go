package cumulativeprocessor

import (
	"context"
	"strconv"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelgateway/otelgateway/internal/identity"
	"github.com/otelgateway/otelgateway/internal/testutil"
)

// pointsWithOverflow renders the points of the batch's only metric as
// "route value", or "overflow value" for the overflow stream's point.
func pointsWithOverflow(t *testing.T, md pmetric.Metrics) []string {
	t.Helper()
	var out []string
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if v, ok := dp.Attributes().Get(overflowKey); ok {
			if !v.Bool() || dp.Attributes().Len() != 1 {
				t.Fatalf("overflow point attributes %v", dp.Attributes().AsRaw())
			}
			out = append(out, "overflow "+strconv.FormatInt(dp.IntValue(), 10)+" @"+strconv.FormatInt(int64(dp.Timestamp())/1e9, 10))
			continue
		}
		route, _ := dp.Attributes().Get("http.route")
		out = append(out, route.Str()+" "+strconv.FormatInt(dp.IntValue(), 10))
	}
	return out
}

func TestStreamsBeyondMaxStreamsFoldIntoOneOverflowStream(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Limits.MaxStreams = 2
	p, tel := newTestProcessorWith(t, cfg, consumertest.NewNop())
	core, logs := observer.New(zap.InfoLevel)
	p.folds = newStreamFolds(cfg, zap.New(core))
	ctx := context.Background()

	out, _ := p.processMetrics(ctx, batch(point{"kong", "/a", 10, 20, 1}, point{"kong", "/b", 10, 20, 1},
		point{"kong", "/c", 10, 20, 1}, point{"kong", "/d", 10, 21, 1}))
	// /c and /d collapse into one point of the overflow stream, stamped
	// with the newest timestamp.
	assertEmitted(t, pointsWithOverflow(t, out), "/a 1", "/b 1", "overflow 2 @21")

	out, _ = p.processMetrics(ctx, batch(point{"kong", "/c", 20, 30, 5}, point{"kong", "/a", 20, 30, 1}))
	assertEmitted(t, pointsWithOverflow(t, out), "overflow 7 @30", "/a 2")

	// Another metric has its own overflow stream, starting from zero.
	other := batch(point{"kong", "/e", 10, 20, 4})
	other.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).SetName("errors")
	out, _ = p.processMetrics(ctx, other)
	assertEmitted(t, pointsWithOverflow(t, out), "overflow 4 @20")

	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("outcome", "overflowed")); n != 4 {
		t.Errorf("overflowed points = %d, want 4", n)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_streams_tracked"); n != 4 {
		t.Errorf("streams tracked = %d, want 4 (/a, /b and two overflow streams)", n)
	}
	if n := p.limited.Load(); n != 2 {
		t.Errorf("streams held against the limit = %d, want 2", n)
	}
	// Said in the log at the first fold (then at most every few minutes).
	e := logs.FilterMessageSnippet("limits.max_streams").All()
	if len(e) != 1 || e[0].Level != zap.WarnLevel || e[0].ContextMap()["limits.max_streams"] != int64(2) || e[0].ContextMap()["points_folded"] != int64(2) ||
		e[0].Message != "limits.max_streams reached: points of new streams are folded into their metric's otel.metric.overflow stream (their attributes lost) "+
			"until streams go 5m0s (max_stale) without a point; raise limits.max_streams to keep them apart" {
		t.Errorf("fold log %v, want one warning at the first fold", e)
	}
}

// The overflow stream keeps the collector label (overflow_keep) of the
// points it absorbs, so two collectors' overflow series never collide
// downstream; points without it go to the bare overflow stream.
func TestOverflowStreamKeepsTheCollectorLabel(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Limits.MaxStreams = 1
	p, _ := newTestProcessorWith(t, cfg, consumertest.NewNop())
	md := batch(point{"kong", "/a", 10, 20, 1}, point{"kong", "/b", 10, 20, 2}, point{"kong", "/c", 10, 21, 3})
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	for i := range 2 {
		dps.At(i).Attributes().PutStr("collector", "c7")
	}
	out, err := p.processMetrics(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	dps = out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		a := dps.At(i).Attributes()
		if _, ok := a.Get(overflowKey); !ok {
			continue
		}
		c, _ := a.Get("collector")
		got[c.Str()+"/"+strconv.Itoa(a.Len())] += dps.At(i).IntValue()
	}
	// /b (collector c7) overflows into {overflow, collector=c7}; /c (no
	// collector) into {overflow}.
	if len(got) != 2 || got["c7/2"] != 2 || got["/1"] != 3 {
		t.Errorf("overflow points by collector/attribute count %v, want c7/2: 2 and /1: 3", got)
	}
}

func TestStreamsLimitIsReported(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Limits.MaxStreams = 1234
	p, tel := newTestProcessorWith(t, cfg, consumertest.NewNop())
	if err := p.start(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.shutdown(context.Background()) }()
	if n := testutil.Int64Gauge(t, tel, "otelcol_processor_cumulative_streams_limit"); n != 1234 {
		t.Errorf("streams limit = %d, want 1234", n)
	}
}

func TestCacheTelemetry(t *testing.T) {
	p, tel := newTestProcessor(t)
	process(t, p, batch(point{"kong", "/a", 10, 20, 1}, point{"kong", "/b", 10, 20, 1}))
	process(t, p, batch(point{"kong", "/a", 20, 30, 1}, point{"kong", "/b", 20, 30, 1}, point{"kong", "/a", 30, 40, 1}))
	for result, want := range map[string]int64{"miss": 2, "hit": 3} {
		if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_cache_lookups", attribute.String("result", result)); n != want {
			t.Errorf("cache %s = %d, want %d", result, n, want)
		}
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_cache_evictions"); n != 0 {
		t.Errorf("evictions = %d, want 0", n)
	}
}

// TestCacheEvictionNeverChangesState runs with a cache far smaller than the
// streams: evictions happen, and every total and start time stays exact.
func TestCacheEvictionNeverChangesState(t *testing.T) {
	p, tel := newTestProcessor(t)
	p.cache = identity.NewCache[*stream](4)
	const routes = 50
	for round := range int64(3) {
		var pts []point
		for r := range routes {
			pts = append(pts, point{"kong", "/" + strconv.Itoa(r), 10 + round*10, 20 + round*10, int64(r)})
		}
		got := process(t, p, batch(pts...))
		for r := range routes {
			want := "kong /" + strconv.Itoa(r) + " 10 " + strconv.FormatInt(20+round*10, 10) + " " + strconv.FormatInt(int64(r)*(round+1), 10)
			if got[r] != want {
				t.Fatalf("round %d: %q, want %q", round, got[r], want)
			}
		}
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_cache_evictions"); n == 0 {
		t.Error("no evictions with a 4-entry cache and 50 streams: the test proves nothing")
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_streams_tracked"); n != routes {
		t.Errorf("streams tracked = %d, want %d", n, routes)
	}
}

// TestSweptStreamIsNotRevivedThroughTheCache puts a swept stream back into
// the cache, as a lookup racing the sweep would: the next point must start a
// new stream, not add to the dead one.
func TestSweptStreamIsNotRevivedThroughTheCache(t *testing.T) {
	p, _ := newTestProcessor(t)
	process(t, p, batch(point{"kong", "/a", 10, 20, 3}))
	attrs := pcommon.NewMap()
	attrs.PutStr("http.route", "/a")
	var dead *stream
	for i := range p.shards {
		for s := range p.shards[i].all() {
			dead = s
		}
	}
	p.sweep(time.Now().Add(p.cfg.MaxStale + time.Second))
	p.cache.Add(dead.desc.id, identity.OfMap(attrs), attrs, identity.SetOf(attrs), dead)

	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 900, 910, 2})), "kong /a 900 910 2")
	if int64(dead.total) != 3 {
		t.Errorf("the swept stream was changed: total %d, want 3", int64(dead.total))
	}
}

func TestGapIsAcceptedAndCounted(t *testing.T) {
	p, tel := newTestProcessor(t)
	process(t, p, batch(point{"kong", "/a", 10, 20, 1}))
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 40, 50, 2})), "kong /a 10 50 3")
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", "gap")); n != 1 {
		t.Errorf("gaps = %d, want 1", n)
	}
}

// TestRestartIsACleanCounterReset: a new processor (a restarted collector)
// knows nothing of the old stream, so its first cumulative point carries
// the delta's own start: downstream sees a new start time and a lower value.
func TestRestartIsACleanCounterReset(t *testing.T) {
	before, _ := newTestProcessor(t)
	process(t, before, batch(point{"kong", "/a", 10, 20, 3}))
	assertEmitted(t, process(t, before, batch(point{"kong", "/a", 20, 30, 2})), "kong /a 10 30 5")
	after, _ := newTestProcessor(t)
	assertEmitted(t, process(t, after, batch(point{"kong", "/a", 30, 40, 4})), "kong /a 30 40 4")
}

// TestHotPathAllocations: steady-state batches of 1,000 known streams may
// not allocate per point.
func TestHotPathAllocations(t *testing.T) {
	p, _ := newTestProcessor(t)
	const streams, runs = 1000, 10
	mk := func(round int64) pmetric.Metrics {
		pts := make([]point, streams)
		for i := range pts {
			pts[i] = point{"kong", "/" + strconv.Itoa(i), round * 10, round*10 + 10, 1}
		}
		return batch(pts...)
	}
	process(t, p, mk(0))
	batches := make([]pmetric.Metrics, runs+1)
	for i := range batches {
		batches[i] = mk(int64(i + 1))
	}
	next := 0
	allocs := testing.AllocsPerRun(runs, func() {
		_, _ = p.processMetrics(context.Background(), batches[next])
		next++
	})
	if perPoint := allocs / streams; perPoint > 0.01 {
		t.Fatalf("%.0f allocations per batch of %d points (%.4f per point), want ≤ 0.01 per point", allocs, streams, perPoint)
	}
	// The first batch (start 0: unknown) started the stream at its
	// timestamp, 10; the last is round runs+1.
	got := emitted(t, batches[runs])
	if got[0] != "kong /0 10 "+strconv.Itoa((runs+1)*10+10)+" "+strconv.Itoa(runs+2) {
		t.Fatalf("last batch's first point %q", got[0])
	}
}
