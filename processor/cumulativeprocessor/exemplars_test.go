package cumulativeprocessor

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// ex is a test exemplar: its value, timestamp (seconds) and the first byte
// of its trace and span ids.
type ex struct {
	v  float64
	ts int64
	id byte
}

func addExemplars(dst pmetric.ExemplarSlice, exs ...ex) {
	for _, x := range exs {
		e := dst.AppendEmpty()
		e.SetDoubleValue(x.v)
		e.SetTimestamp(pcommon.Timestamp(x.ts * 1e9))
		e.SetTraceID(pcommon.TraceID{x.id, 0xaa})
		e.SetSpanID(pcommon.SpanID{x.id, 0xbb})
	}
}

// exemplarsOf renders exemplars as "value@ts#id", sorted by value.
func exemplarsOf(s pmetric.ExemplarSlice) string {
	var out []string
	for i := 0; i < s.Len(); i++ {
		e := s.At(i)
		if e.TraceID()[1] != 0xaa || e.SpanID()[1] != 0xbb || e.TraceID()[0] != e.SpanID()[0] {
			out = append(out, "bad ids")
		}
		out = append(out, fmt.Sprintf("%g@%d#%d", e.DoubleValue(), e.Timestamp()/1e9, e.TraceID()[0]))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

func intervalProcessor(t *testing.T) (*cumulativeProcessor, *consumertest.MetricsSink) {
	cfg := createDefaultConfig()
	cfg.Emit, cfg.Interval = EmitInterval, time.Hour // emitted by hand
	sink := new(consumertest.MetricsSink)
	p, _ := newTestProcessorWith(t, cfg, sink)
	return p, sink
}

// emitOne emits and returns the only point's exemplars.
func emitOne(t *testing.T, p *cumulativeProcessor, sink *consumertest.MetricsSink) pmetric.ExemplarSlice {
	t.Helper()
	sink.Reset()
	if err := p.emit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sink.AllMetrics()) != 1 || sink.AllMetrics()[0].DataPointCount() != 1 {
		t.Fatalf("emitted %d batches, want one of one point", len(sink.AllMetrics()))
	}
	m := sink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	switch m.Type() {
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().At(0).Exemplars()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().At(0).Exemplars()
	default:
		return m.ExponentialHistogram().DataPoints().At(0).Exemplars()
	}
}

func consume(t *testing.T, p *cumulativeProcessor, md pmetric.Metrics) pmetric.Metrics {
	t.Helper()
	out, err := p.processMetrics(context.Background(), md)
	if err != nil && md.DataPointCount() != 0 {
		t.Fatal(err)
	}
	return out
}

// TestPerBatchPointsKeepTheirExemplars: a delta point rewritten as its
// cumulative point keeps its own exemplars, and the stream stores nothing.
func TestPerBatchPointsKeepTheirExemplars(t *testing.T) {
	p, _ := newTestProcessor(t)
	b := []float64{1, 5}
	for i, pt := range []histPoint{{10, 20, b, []uint64{1, 0, 1}, 7}, {20, 30, b, []uint64{0, 1, 0}, 2}} {
		md := histBatch(pt)
		dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
		want := "0.5@19#1 6@19#2"
		if i == 1 {
			addExemplars(dp.Exemplars(), ex{3, 29, 3})
			want = "3@29#3"
		} else {
			addExemplars(dp.Exemplars(), ex{0.5, 19, 1}, ex{6, 19, 2})
		}
		out := consume(t, p, md)
		got := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0).Exemplars()
		if exemplarsOf(got) != want {
			t.Fatalf("point %d exemplars %q, want %q", i, exemplarsOf(got), want)
		}
	}
	for i := range p.shards {
		for s := range p.shards[i].all() {
			if s.ex != nil {
				t.Fatal("a per_batch stream allocated an exemplar store")
			}
		}
	}
}

// TestIntervalKeepsTheLatestExemplarPerBucket: between two ticks a stream
// keeps, per bucket of its cumulative point, the most recent exemplar; a
// tick moves them into the emitted point.
func TestIntervalKeepsTheLatestExemplarPerBucket(t *testing.T) {
	p, sink := intervalProcessor(t)
	b := []float64{1, 5}
	feed := func(pt histPoint, exs ...ex) {
		md := histBatch(pt)
		addExemplars(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0).Exemplars(), exs...)
		consume(t, p, md)
	}
	feed(histPoint{10, 20, b, []uint64{1, 1, 1}, 9}, ex{0.5, 19, 1}, ex{3, 19, 2}, ex{9, 19, 3})
	// 1 is in (-Inf, 1] (le): it replaces 0.5; 4 replaces 3; 9 stays.
	feed(histPoint{20, 30, b, []uint64{1, 1, 0}, 5}, ex{1, 29, 4}, ex{4, 29, 5})
	if got, want := exemplarsOf(emitOne(t, p, sink)), "1@29#4 4@29#5 9@19#3"; got != want {
		t.Fatalf("emitted exemplars %q, want %q", got, want)
	}
	// Emitted exemplars are gone from the stream: the next tick has only
	// what came since.
	feed(histPoint{30, 40, b, []uint64{0, 0, 1}, 8}, ex{8, 39, 6})
	if got, want := exemplarsOf(emitOne(t, p, sink)), "8@39#6"; got != want {
		t.Fatalf("second tick's exemplars %q, want %q", got, want)
	}
	feed(histPoint{40, 50, b, []uint64{0, 0, 1}, 8})
	if got := emitOne(t, p, sink).Len(); got != 0 {
		t.Fatalf("a tick with no new exemplar emitted %d", got)
	}
	// New bounds restart the stream: pending exemplars of the old buckets
	// go with its old state.
	feed(histPoint{50, 60, b, []uint64{1, 0, 0}, 1}, ex{0.1, 59, 7})
	feed(histPoint{60, 70, []float64{2}, []uint64{1, 0}, 1}, ex{1.5, 69, 8})
	if got, want := exemplarsOf(emitOne(t, p, sink)), "1.5@69#8"; got != want {
		t.Fatalf("after a restart: exemplars %q, want %q", got, want)
	}
}

// TestIntervalExponentialExemplarsFollowDownscaling: when the stream's
// scale drops, two exemplars that now share a bucket leave one, the later.
func TestIntervalExponentialExemplarsFollowDownscaling(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Emit, cfg.Interval, cfg.Limits.MaxBuckets = EmitInterval, time.Hour, 4
	sink := new(consumertest.MetricsSink)
	p, _ := newTestProcessorWith(t, cfg, sink)
	feed := func(pt expPoint, exs ...ex) {
		md := expBatch(pt)
		addExemplars(md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).ExponentialHistogram().DataPoints().At(0).Exemplars(), exs...)
		consume(t, p, md)
	}
	// Scale 0: bucket 0 is (1, 2], bucket 1 is (2, 4].
	feed(expPoint{scale: 0, off: 0, counts: []uint64{1, 1}, start: 10, end: 20}, ex{1.5, 19, 1}, ex{3, 19, 2})
	// Buckets 0..5 do not fit in 4: scale -1, where (1, 4] is one bucket
	// (3 stays, the later) and (16, 64] holds 40.
	feed(expPoint{scale: 0, off: 5, counts: []uint64{1}, start: 20, end: 30}, ex{40, 29, 3})
	if got, want := exemplarsOf(emitOne(t, p, sink)), "3@19#2 40@29#3"; got != want {
		t.Fatalf("emitted exemplars %q, want %q", got, want)
	}
}

// TestIntervalSumKeepsItsLatestExemplar: a sum has one bucket.
func TestIntervalSumKeepsItsLatestExemplar(t *testing.T) {
	p, sink := intervalProcessor(t)
	for i, pt := range []point{{"kong", "/a", 10, 20, 1}, {"kong", "/a", 20, 30, 2}} {
		md := batch(pt)
		dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
		addExemplars(dps.At(0).Exemplars(), ex{float64(i), pt.time - 1, byte(i + 1)})
		consume(t, p, md)
	}
	if got, want := exemplarsOf(emitOne(t, p, sink)), "1@29#2"; got != want {
		t.Fatalf("emitted exemplars %q, want %q", got, want)
	}
}

// TestExemplarsPerStreamAreBounded: beyond maxExemplars buckets, a new one
// replaces the oldest held.
func TestExemplarsPerStreamAreBounded(t *testing.T) {
	p, sink := intervalProcessor(t)
	bounds := make([]float64, 2*maxExemplars)
	for i := range bounds {
		bounds[i] = float64(i)
	}
	counts := make([]uint64, len(bounds)+1)
	counts[0] = 1
	md := histBatch(histPoint{10, 20, bounds, counts, 0})
	dp := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(0)
	for i := range maxExemplars + 2 {
		addExemplars(dp.Exemplars(), ex{float64(i), int64(100 + i), byte(i)})
	}
	consume(t, p, md)
	got := emitOne(t, p, sink)
	if got.Len() != maxExemplars {
		t.Fatalf("%d exemplars kept, want %d", got.Len(), maxExemplars)
	}
	for i := 0; i < got.Len(); i++ {
		if v := got.At(i).DoubleValue(); v < 2 {
			t.Fatalf("exemplar %g kept: the two oldest should have been replaced", v)
		}
	}
}

// TestOverflowPointsKeepTheirExemplars: per_batch, the overflowed points
// of a batch leave as one, with the exemplars of them all.
func TestOverflowPointsKeepTheirExemplars(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Limits.MaxStreams = 1
	p, _ := newTestProcessorWith(t, cfg, consumertest.NewNop())
	consume(t, p, batch(point{"kong", "/a", 10, 20, 1}))
	md := batch(point{"kong", "/b", 10, 20, 1}, point{"kong", "/c", 10, 20, 1})
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	addExemplars(dps.At(0).Exemplars(), ex{1, 15, 1})
	addExemplars(dps.At(1).Exemplars(), ex{2, 16, 2})
	out := consume(t, p, md)
	got := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	if got.Len() != 1 {
		t.Fatalf("%d points, want the one overflow point", got.Len())
	}
	// A sum's bucket holds one: the later point's.
	if s := exemplarsOf(got.At(0).Exemplars()); s != "2@16#2" {
		t.Fatalf("overflow point exemplars %q, want %q", s, "2@16#2")
	}
}
