package cumulativeprocessor

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"

	"github.com/otelgateway/otelgateway/internal/identity"
	"github.com/otelgateway/otelgateway/internal/metadatacheck"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newTestProcessor(t *testing.T) (*cumulativeProcessor, *componenttest.Telemetry) {
	t.Helper()
	return newTestProcessorWith(t, createDefaultConfig(), consumertest.NewNop())
}

func newTestProcessorWith(t *testing.T, cfg *Config, next consumer.Metrics) (*cumulativeProcessor, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	p, err := newProcessor(cfg, set, next)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the test recorded must agree with metadata.yaml.
		metadatacheck.Attributes(t, metadatacheck.Read(t, "metadata.yaml"), tel)
		_ = tel.Shutdown(context.Background())
	})
	return p, tel
}

// point describes one delta point of the metric "requests" (resource
// service.name=svc) for the tests.
type point struct {
	svc, route  string
	start, time int64 // seconds
	v           int64
}

func batch(points ...point) pmetric.Metrics {
	md := pmetric.NewMetrics()
	bySvc := map[string]pmetric.NumberDataPointSlice{}
	for _, pt := range points {
		dps, ok := bySvc[pt.svc]
		if !ok {
			rm := md.ResourceMetrics().AppendEmpty()
			rm.Resource().Attributes().PutStr("service.name", pt.svc)
			m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
			m.SetName("requests")
			sum := m.SetEmptySum()
			sum.SetIsMonotonic(true)
			sum.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
			dps = sum.DataPoints()
			bySvc[pt.svc] = dps
		}
		dp := dps.AppendEmpty()
		dp.SetStartTimestamp(pcommon.Timestamp(pt.start * 1e9))
		dp.SetTimestamp(pcommon.Timestamp(pt.time * 1e9))
		dp.SetIntValue(pt.v)
		dp.Attributes().PutStr("http.route", pt.route)
	}
	return md
}

// emitted lists "svc route start time value" for every point of md.
func emitted(t *testing.T, md pmetric.Metrics) []string {
	t.Helper()
	var out []string
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		svc, _ := rm.Resource().Attributes().Get("service.name")
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				sum := ms.At(k).Sum()
				if sum.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
					t.Fatalf("metric %s left as %v", ms.At(k).Name(), sum.AggregationTemporality())
				}
				for l := 0; l < sum.DataPoints().Len(); l++ {
					dp := sum.DataPoints().At(l)
					route, _ := dp.Attributes().Get("http.route")
					out = append(out, svc.Str()+" "+route.Str()+" "+itoa(int64(dp.StartTimestamp())/1e9)+" "+itoa(int64(dp.Timestamp())/1e9)+" "+itoa(dp.IntValue()))
				}
			}
		}
	}
	return out
}

func itoa(n int64) string { return pcommon.NewValueInt(n).AsString() }

func process(t *testing.T, p *cumulativeProcessor, md pmetric.Metrics) []string {
	t.Helper()
	out, err := p.processMetrics(context.Background(), md)
	if errors.Is(err, processorhelper.ErrSkipProcessingData) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return emitted(t, out)
}

func assertEmitted(t *testing.T, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("point %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestDeltaSumsBecomeCumulative(t *testing.T) {
	p, tel := newTestProcessor(t)
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 20, 3}, point{"kong", "/b", 10, 20, 1})),
		"kong /a 10 20 3", "kong /b 10 20 1")
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 20, 30, 2})),
		"kong /a 10 30 5")
	// A gap (start after the last timestamp) is accepted: nothing overlaps.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 40, 50, 1}, point{"kong", "/b", 20, 50, 4})),
		"kong /a 10 50 6", "kong /b 10 50 5")
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("outcome", "accumulated")); n != 5 {
		t.Errorf("accumulated points = %d, want 5", n)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_streams_tracked"); n != 2 {
		t.Errorf("streams tracked = %d, want 2", n)
	}
}

func TestSameAttributesOtherResourceIsAnotherStream(t *testing.T) {
	p, _ := newTestProcessor(t)
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 10, 20, 3}, point{"envoy", "/a", 10, 20, 7})),
		"kong /a 10 20 3", "envoy /a 10 20 7")
	assertEmitted(t, process(t, p, batch(point{"envoy", "/a", 20, 30, 1})),
		"envoy /a 10 30 8")
}

func TestOverlappingPointsAreDroppedAndCounted(t *testing.T) {
	p, tel := newTestProcessor(t)
	process(t, p, batch(point{"kong", "/a", 10, 20, 3}))
	// Older and overlapping windows: dropped, metric removed.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 5, 15, 1})))
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 15, 25, 1})))
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 20, 30, 1})), "kong /a 10 30 4")
	// A window ending before the last one, with the last one's start:
	// older, dropped (only a resend ending at or after it replaces it).
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 20, 25, 1})))
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", "out_of_order")); n != 2 {
		t.Errorf("out_of_order drops = %d, want 2", n)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", "older_start")); n != 1 {
		t.Errorf("older_start drops = %d, want 1", n)
	}
}

func TestNewestFirstBatchIsSortedNotDropped(t *testing.T) {
	p, _ := newTestProcessor(t)
	got := process(t, p, batch(point{"kong", "/a", 30, 40, 4}, point{"kong", "/a", 20, 30, 2}, point{"kong", "/a", 10, 20, 1}))
	assertEmitted(t, got, "kong /a 10 20 1", "kong /a 10 30 3", "kong /a 10 40 7")
}

func TestHashCollisionKeepsStreamsApart(t *testing.T) {
	p, _ := newTestProcessor(t)
	p.hashAttrs = func(pcommon.Map) uint64 { return 42 } // every attribute set collides
	process(t, p, batch(point{"kong", "/a", 10, 20, 3}, point{"kong", "/b", 10, 20, 10}))
	assertEmitted(t, process(t, p, batch(point{"kong", "/b", 20, 30, 1}, point{"kong", "/a", 20, 30, 1})),
		"kong /b 10 30 11", "kong /a 10 30 4")
}

func TestOtherMetricsPassThroughUntouched(t *testing.T) {
	p, _ := newTestProcessor(t)
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	g := ms.AppendEmpty()
	g.SetName("gauge")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1.5)
	c := ms.AppendEmpty()
	c.SetName("cumulative")
	cs := c.SetEmptySum()
	cs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cs.DataPoints().AppendEmpty().SetIntValue(7)
	h := ms.AppendEmpty()
	h.SetName("histogram")
	h.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	h.Histogram().DataPoints().AppendEmpty().SetCount(3)
	e := ms.AppendEmpty()
	e.SetName("exponential")
	e.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	e.ExponentialHistogram().DataPoints().AppendEmpty().SetCount(4)
	sm := ms.AppendEmpty()
	sm.SetName("summary")
	sm.SetEmptySummary().DataPoints().AppendEmpty().SetCount(5)
	want := pmetric.NewMetrics()
	md.CopyTo(want)

	got, err := p.processMetrics(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	var m pmetric.JSONMarshaler
	gotJSON, _ := m.MarshalMetrics(got)
	wantJSON, _ := m.MarshalMetrics(want)
	if string(gotJSON) != string(wantJSON) {
		t.Errorf("pass-through metrics changed:\n got %s\nwant %s", gotJSON, wantJSON)
	}
}

func TestValueTypeChangeRestartsStream(t *testing.T) {
	p, tel := newTestProcessor(t)
	process(t, p, batch(point{"kong", "/a", 10, 20, 3}))
	md := batch(point{"kong", "/a", 20, 30, 0})
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	dp.SetDoubleValue(2.5)
	out, _ := p.processMetrics(context.Background(), md)
	got := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if got.DoubleValue() != 2.5 || got.StartTimestamp() != pcommon.Timestamp(20e9) {
		t.Errorf("after type change: value %v start %v, want 2.5 from 20s", got.DoubleValue(), got.StartTimestamp())
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", "type_changed")); n != 1 {
		t.Errorf("type_changed = %d, want 1", n)
	}
}

func TestStaleStreamsAreSweptAndRestart(t *testing.T) {
	p, tel := newTestProcessor(t)
	process(t, p, batch(point{"kong", "/a", 10, 20, 3}))
	p.sweep(time.Now()) // fresh: kept
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 20, 30, 1})), "kong /a 10 30 4")

	p.sweep(time.Now().Add(p.cfg.MaxStale + time.Second))
	if n := len(p.metrics.byHash); n != 0 {
		t.Fatalf("%d metrics left after the sweep, want 0", n)
	}
	for i := range p.shards {
		if n := p.shards[i].streams.len(); n != 0 {
			t.Fatalf("shard %d holds %d streams after the sweep, want 0", i, n)
		}
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_streams_tracked"); n != 0 {
		t.Errorf("streams tracked = %d after the sweep, want 0", n)
	}
	// The stream comes back as a new one: its own start, a counter reset.
	assertEmitted(t, process(t, p, batch(point{"kong", "/a", 900, 910, 2})), "kong /a 900 910 2")
}

// TestConcurrentBatchesAreExact feeds disjoint streams (one per worker) and
// one shared stream from 4 goroutines. Disjoint totals must be exact; on the
// shared stream a point that loses the race to a newer one is dropped as
// out_of_order, so accumulated + dropped must account for every point.
func TestConcurrentBatchesAreExact(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	set := processortest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	sink := new(consumertest.MetricsSink)
	proc, err := NewFactory().CreateMetrics(context.Background(), set, createDefaultConfig(), sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	const workers, rounds = 4, 250
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			own := "/own-" + itoa(int64(w))
			for r := range rounds {
				ts := int64(r*workers + w + 1) // unique per point
				md := batch(point{"kong", own, 0, int64(r + 1), 1}, point{"kong", "/shared", 0, ts, 1})
				if err := proc.ConsumeMetrics(context.Background(), md); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := proc.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	last := map[string]int64{}
	for _, md := range sink.AllMetrics() {
		for _, s := range emitted(t, md) {
			f := strings.Fields(s)
			v, _ := strconv.ParseInt(f[4], 10, 64)
			last[f[1]] = max(last[f[1]], v)
		}
	}
	for w := range workers {
		if got := last["/own-"+itoa(int64(w))]; got != rounds {
			t.Errorf("/own-%d total = %d, want %d", w, got, rounds)
		}
	}
	dropped := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", "out_of_order"))
	if last["/shared"]+dropped != workers*rounds {
		t.Errorf("/shared total %d + dropped %d = %d, want %d", last["/shared"], dropped, last["/shared"]+dropped, workers*rounds)
	}
}

// reversedSums is a point slice whose RemoveIf visits the points last to
// first: not what pdata does, but nothing in accumulate may depend on it.
type reversedSums struct{ pmetric.NumberDataPointSlice }

func (r reversedSums) RemoveIf(f func(pmetric.NumberDataPoint) bool) {
	remove := make(map[int]bool)
	for i := r.Len() - 1; i >= 0; i-- {
		remove[i] = f(r.At(i))
	}
	i := 0
	r.NumberDataPointSlice.RemoveIf(func(pmetric.NumberDataPoint) bool {
		i++
		return remove[i-1]
	})
}

// TestHashAheadFollowsVisitOrder: accumulate hashes each point's attributes
// three points ahead and prefetches the lookups of the next three (a ring of
// four hashes); a RemoveIf that visits points in another order than At's
// must still fold every point into its own stream, the one a batch
// processed in pdata's order finds next. Batches of 1 to 9 points cover
// batches shorter than the lookahead and the ring's wrap; with every hash
// colliding the prefetch steps' candidates are other streams', which
// nothing may trust.
func TestHashAheadFollowsVisitOrder(t *testing.T) {
	for _, collide := range []bool{false, true} {
		for n := 1; n <= 9; n++ {
			p, _ := newTestProcessor(t)
			if collide {
				p.hashAttrs = func(pcommon.Map) uint64 { return 42 }
			}
			points := func(start, end int64) []point {
				var pts []point
				for i := range n {
					pts = append(pts, point{"kong", "/" + itoa(int64(i)), start, end, int64(i + 1)})
				}
				return pts
			}
			want := func(v int64, end int64) []string {
				var out []string
				for i := range n {
					out = append(out, "kong /"+itoa(int64(i))+" 10 "+itoa(end)+" "+itoa(v*int64(i+1)))
				}
				return out
			}
			md := batch(points(10, 20)...)
			rm := md.ResourceMetrics().At(0)
			si := newScopeIdentity(rm, identity.OfMap(rm.Resource().Attributes()), rm.ScopeMetrics().At(0))
			m := rm.ScopeMetrics().At(0).Metrics().At(0)
			m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
			var c counts
			accumulate(p, p.metrics.get(&si, m, 0), reversedSums{m.Sum().DataPoints()}, sumKind, 0, &c)
			assertEmitted(t, emitted(t, md), want(1, 20)...)
			assertEmitted(t, process(t, p, batch(points(20, 30)...)), want(2, 30)...)
			assertEmitted(t, process(t, p, batch(points(30, 40)...)), want(3, 40)...)
		}
	}
}
