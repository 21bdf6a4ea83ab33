package cumulativeprocessor

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// histPoint is one delta explicit-bucket histogram point of "latency".
type histPoint struct {
	start, time int64 // seconds
	bounds      []float64
	counts      []uint64
	sum         float64
}

func histBatch(points ...histPoint) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("latency")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for _, pt := range points {
		dp := h.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.Timestamp(pt.start * 1e9))
		dp.SetTimestamp(pcommon.Timestamp(pt.time * 1e9))
		dp.Attributes().PutStr("http.route", "/a")
		dp.ExplicitBounds().FromRaw(pt.bounds)
		dp.BucketCounts().FromRaw(pt.counts)
		var n uint64
		for _, c := range pt.counts {
			n += c
		}
		dp.SetCount(n)
		dp.SetSum(pt.sum)
	}
	return md
}

// histOut renders every histogram point as "start time count sum bounds counts".
func histOut(t *testing.T, p *cumulativeProcessor, md pmetric.Metrics) []string {
	t.Helper()
	out, err := p.processMetrics(context.Background(), md)
	if errors.Is(err, processorhelper.ErrSkipProcessingData) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	h := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram()
	if h.AggregationTemporality() != pmetric.AggregationTemporalityCumulative {
		t.Fatalf("temporality %v", h.AggregationTemporality())
	}
	for i := 0; i < h.DataPoints().Len(); i++ {
		dp := h.DataPoints().At(i)
		got = append(got, fmt.Sprintf("%d %d %d %g %v %v", dp.StartTimestamp()/1e9, dp.Timestamp()/1e9,
			dp.Count(), dp.Sum(), dp.ExplicitBounds().AsRaw(), dp.BucketCounts().AsRaw()))
	}
	return got
}

func TestExplicitHistogramsAccumulateAndResetOnNewBounds(t *testing.T) {
	p, tel := newTestProcessor(t)
	b := []float64{1, 5}
	assertEmitted(t, histOut(t, p, histBatch(histPoint{10, 20, b, []uint64{1, 2, 3}, 10})),
		"10 20 6 10 [1 5] [1 2 3]")
	assertEmitted(t, histOut(t, p, histBatch(histPoint{20, 30, b, []uint64{0, 1, 1}, 4})),
		"10 30 8 14 [1 5] [1 3 4]")
	// Other bounds: restart from this point, with its own start time.
	assertEmitted(t, histOut(t, p, histBatch(histPoint{30, 40, []float64{1, 5, 10}, []uint64{1, 0, 0, 1}, 12})),
		"30 40 2 12 [1 5 10] [1 0 0 1]")
	// Bucket counts that do not match the bounds: dropped as invalid.
	assertEmitted(t, histOut(t, p, histBatch(histPoint{40, 50, []float64{1, 5, 10}, []uint64{1}, 1})))
	assertEmitted(t, histOut(t, p, histBatch(histPoint{40, 50, []float64{1, 5, 10}, []uint64{0, 1, 0, 0}, 3})),
		"30 50 3 15 [1 5 10] [1 1 0 1]")
	for reason, want := range map[string]int64{"bounds_changed": 1, "invalid": 1} {
		if n := testutil.Int64Sum(t, tel, "otelcol_processor_cumulative_points", attribute.String("reason", reason)); n != want {
			t.Errorf("%s = %d, want %d", reason, n, want)
		}
	}
}

func TestHistogramMinMaxSpanTheWindow(t *testing.T) {
	p, _ := newTestProcessor(t)
	md := histBatch(histPoint{10, 20, []float64{1}, []uint64{1, 1}, 3}, histPoint{20, 30, []float64{1}, []uint64{1, 0}, 0.2})
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints()
	dps.At(0).SetMin(0.5)
	dps.At(0).SetMax(2.5)
	dps.At(1).SetMin(0.2)
	dps.At(1).SetMax(0.2)
	out, _ := p.processMetrics(context.Background(), md)
	last := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints().At(1)
	if last.Min() != 0.2 || last.Max() != 2.5 || last.Count() != 3 {
		t.Fatalf("min %g max %g count %d, want 0.2 2.5 3", last.Min(), last.Max(), last.Count())
	}
}

// TestHistogramHotPathAllocations: folding and writing known histogram
// streams allocates (almost) nothing per point.
func TestHistogramHotPathAllocations(t *testing.T) {
	p, _ := newTestProcessor(t)
	const points, runs = 1000, 10
	bounds := []float64{1, 5, 10}
	mk := func(round int64) pmetric.Metrics {
		pts := make([]histPoint, points)
		for i := range pts {
			at := round*points + int64(i)
			pts[i] = histPoint{start: at, time: at + 1, bounds: bounds, counts: []uint64{1, 0, 2, 0}, sum: 12}
		}
		return histBatch(pts...)
	}
	if _, err := p.processMetrics(context.Background(), mk(0)); err != nil {
		t.Fatal(err)
	}
	batches := make([]pmetric.Metrics, runs+1)
	for i := range batches {
		batches[i] = mk(int64(i + 1))
	}
	next := 0
	allocs := testing.AllocsPerRun(runs, func() {
		_, _ = p.processMetrics(context.Background(), batches[next])
		next++
	})
	if perPoint := allocs / points; perPoint > 0.01 {
		t.Fatalf("%.0f allocations per batch of %d points (%.4f per point), want ≤ 0.01 per point", allocs, points, perPoint)
	}
}
