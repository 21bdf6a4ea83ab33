package cumulativeprocessor

import (
	"context"
	"fmt"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// expPoint is one delta exponential histogram point: positive buckets only
// unless neg is set.
type expPoint struct {
	scale      int32
	zt         float64
	zero       uint64
	off        int32
	counts     []uint64
	negOff     int32
	neg        []uint64
	start, end int64
}

func expBatch(pts ...expPoint) pmetric.Metrics {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("latency")
	e := m.SetEmptyExponentialHistogram()
	e.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for _, pt := range pts {
		dp := e.DataPoints().AppendEmpty()
		dp.SetStartTimestamp(pcommon.Timestamp(pt.start * 1e9))
		dp.SetTimestamp(pcommon.Timestamp(pt.end * 1e9))
		dp.SetScale(pt.scale)
		dp.SetZeroThreshold(pt.zt)
		dp.SetZeroCount(pt.zero)
		dp.Positive().SetOffset(pt.off)
		dp.Positive().BucketCounts().FromRaw(pt.counts)
		dp.Negative().SetOffset(pt.negOff)
		dp.Negative().BucketCounts().FromRaw(pt.neg)
		n := pt.zero
		for _, c := range append(append([]uint64{}, pt.counts...), pt.neg...) {
			n += c
		}
		dp.SetCount(n)
	}
	return md
}

// expOut renders the last exponential point as
// "count scale zt zero pos:offset counts neg:offset counts".
func expOut(t *testing.T, p *cumulativeProcessor, md pmetric.Metrics) string {
	t.Helper()
	out, err := p.processMetrics(context.Background(), md)
	if err != nil {
		t.Fatal(err)
	}
	dps := out.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).ExponentialHistogram().DataPoints()
	dp := dps.At(dps.Len() - 1)
	return fmt.Sprintf("%d %d %g %d pos:%d %v neg:%d %v", dp.Count(), dp.Scale(), dp.ZeroThreshold(), dp.ZeroCount(),
		dp.Positive().Offset(), dp.Positive().BucketCounts().AsRaw(), dp.Negative().Offset(), dp.Negative().BucketCounts().AsRaw())
}

func newExpProcessor(t *testing.T, maxBuckets int) *cumulativeProcessor {
	cfg := createDefaultConfig()
	cfg.Limits.MaxBuckets = maxBuckets
	p, _ := newTestProcessorWith(t, cfg, consumertest.NewNop())
	return p
}

func TestExponentialHistogramMerge(t *testing.T) {
	cases := []struct {
		name       string
		maxBuckets int
		first      expPoint
		second     expPoint
		want       string
	}{{
		// Scale alignment: scale-1 buckets 0..3 pair up into scale-0 buckets
		// 0 and 1 (i>>1) before the scale-0 delta adds.
		name: "aligns to the lower scale", maxBuckets: 160,
		first:  expPoint{scale: 1, off: 0, counts: []uint64{1, 2, 3, 4}, start: 10, end: 20},
		second: expPoint{scale: 0, off: 0, counts: []uint64{10, 20}, start: 20, end: 30},
		want:   "40 0 0 0 pos:0 [13 27] neg:0 []",
	}, {
		name: "finer delta is downscaled to the state", maxBuckets: 160,
		first:  expPoint{scale: 0, off: 0, counts: []uint64{10, 20}, start: 10, end: 20},
		second: expPoint{scale: 1, off: 0, counts: []uint64{1, 2, 3, 4}, start: 20, end: 30},
		want:   "40 0 0 0 pos:0 [13 27] neg:0 []",
	}, {
		// Union 0..5 is 6 buckets > 4: scale -1 gives 0..2.
		name: "downscales to max_buckets", maxBuckets: 4,
		first:  expPoint{scale: 0, off: 0, counts: []uint64{1, 1, 1, 1}, start: 10, end: 20},
		second: expPoint{scale: 0, off: 4, counts: []uint64{1, 1}, start: 20, end: 30},
		want:   "6 -1 0 0 pos:0 [2 2 2] neg:0 []",
	}, {
		// Negative indices floor: -3..0 needs scale -2 to fit 2 buckets:
		// -3,-2,-1 → -1 and 0 → 0. The negative range downscales alike.
		name: "negative offsets floor", maxBuckets: 2,
		first:  expPoint{scale: 0, off: -3, counts: []uint64{1, 1, 1}, negOff: 1, neg: []uint64{2}, start: 10, end: 20},
		second: expPoint{scale: 0, off: 0, counts: []uint64{1}, negOff: 2, neg: []uint64{3}, start: 20, end: 30},
		want:   "9 -2 0 0 pos:-1 [3 1] neg:0 [5]",
	}, {
		// The delta's zero threshold 3 lies in bucket 1 = (2,4]: the zero
		// bucket widens to 4 and takes the state's buckets 0 and 1.
		name: "zero threshold widens", maxBuckets: 160,
		first:  expPoint{scale: 0, zero: 1, off: 0, counts: []uint64{1, 1, 1}, start: 10, end: 20},
		second: expPoint{scale: 0, zt: 3, zero: 2, off: 2, counts: []uint64{5}, start: 20, end: 30},
		want:   "11 0 4 5 pos:2 [6] neg:0 []",
	}, {
		// The state's zero bucket is the wider one: the delta's buckets
		// below it move into the zero count instead.
		name: "delta buckets fall into a wider zero bucket", maxBuckets: 160,
		first:  expPoint{scale: 0, zt: 4, zero: 1, off: 2, counts: []uint64{1}, start: 10, end: 20},
		second: expPoint{scale: 0, off: 0, counts: []uint64{2, 3, 4}, start: 20, end: 30},
		want:   "11 0 4 6 pos:2 [5] neg:0 []",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := newExpProcessor(t, c.maxBuckets)
			expOut(t, p, expBatch(c.first))
			if got := expOut(t, p, expBatch(c.second)); got != c.want {
				t.Errorf("merged = %q, want %q", got, c.want)
			}
		})
	}
}
