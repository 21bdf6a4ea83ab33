package cumulativeprocessor

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"unsafe"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// TestMemoryPerStream reports the heap a stream holds, per kind: the
// processor is created with max_streams = the streams fed (so its identity
// cache is sized for them and counted), fed three windows per stream (the
// second allocates the state kept for a replacing window), and measured
// after GC. bench/cumulative measures the same at 100k streams against
// contrib; this is the quick look, exponential histograms included. It
// also reports the size of a checkpoint (storage) per stream.
//
// The bounds only catch a regression by a wide margin (the race detector
// and the runtime version move the figures a little).
func TestMemoryPerStream(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few MiB")
	}
	const streams = 20_000
	t.Logf("sizeof stream %d, histState %d, expState %d", unsafe.Sizeof(stream{}), unsafe.Sizeof(histState{}), unsafe.Sizeof(expState{}))
	for _, tc := range []struct {
		name  string
		build func(first, n int, start, end int64) pmetric.Metrics
		limit float64
	}{
		{"sum", memSums, 600},
		{"histogram 13 buckets", memHists, 1000},
		{"exponential 20 buckets", memExps, 1400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			cfg.MaxStreams = streams
			before := heapInUse()
			p, _ := newTestProcessorWith(t, cfg, consumertest.NewNop())
			for w := range int64(3) {
				for first := 0; first < streams; first += 1000 {
					if _, err := p.processMetrics(context.Background(), tc.build(first, 1000, 10*w, 10*w+10)); err != nil {
						t.Fatal(err)
					}
				}
			}
			per := float64(heapInUse()-before) / streams
			runtime.KeepAlive(p)
			t.Logf("%s: %.0f bytes/stream (processor state, identity cache included); checkpoint %.0f bytes/stream",
				tc.name, per, float64(len(p.encodeCheckpoint()))/streams)
			if per > tc.limit {
				t.Errorf("%s: %.0f bytes/stream, more than %.0f", tc.name, per, tc.limit)
			}
		})
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// memMetric appends one delta metric of n points, route attributes
// first..first+n, to a new batch whose resource matches the bench's shape
// (a few attributes).
func memMetric(first, n int, add func(m pmetric.Metric, attrs func(pcommon.Map))) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kong")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("m")
	for i := first; i < first+n; i++ {
		add(m, func(a pcommon.Map) {
			a.PutStr("http.route", "/route/"+strconv.Itoa(i))
			a.PutStr("http.request.method", "GET")
			a.PutInt("http.response.status_code", 200)
		})
	}
	return md
}

func memSums(first, n int, start, end int64) pmetric.Metrics {
	return memMetric(first, n, func(m pmetric.Metric, attrs func(pcommon.Map)) {
		if m.Type() != pmetric.MetricTypeSum {
			m.SetEmptySum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		}
		dp := m.Sum().DataPoints().AppendEmpty()
		attrs(dp.Attributes())
		dp.SetStartTimestamp(pcommon.Timestamp(start * 1e9))
		dp.SetTimestamp(pcommon.Timestamp(end * 1e9))
		dp.SetIntValue(1)
	})
}

func memHists(first, n int, start, end int64) pmetric.Metrics {
	bounds := []float64{5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000}
	counts := make([]uint64, len(bounds)+1)
	counts[3] = 1
	return memMetric(first, n, func(m pmetric.Metric, attrs func(pcommon.Map)) {
		if m.Type() != pmetric.MetricTypeHistogram {
			m.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		}
		dp := m.Histogram().DataPoints().AppendEmpty()
		attrs(dp.Attributes())
		dp.SetStartTimestamp(pcommon.Timestamp(start * 1e9))
		dp.SetTimestamp(pcommon.Timestamp(end * 1e9))
		dp.ExplicitBounds().FromRaw(bounds)
		dp.BucketCounts().FromRaw(counts)
		dp.SetCount(1)
		dp.SetSum(30)
	})
}

func memExps(first, n int, start, end int64) pmetric.Metrics {
	counts := make([]uint64, 20)
	for i := range counts {
		counts[i] = 1
	}
	return memMetric(first, n, func(m pmetric.Metric, attrs func(pcommon.Map)) {
		if m.Type() != pmetric.MetricTypeExponentialHistogram {
			m.SetEmptyExponentialHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		}
		dp := m.ExponentialHistogram().DataPoints().AppendEmpty()
		attrs(dp.Attributes())
		dp.SetStartTimestamp(pcommon.Timestamp(start * 1e9))
		dp.SetTimestamp(pcommon.Timestamp(end * 1e9))
		dp.SetScale(3)
		dp.Positive().SetOffset(10)
		dp.Positive().BucketCounts().FromRaw(counts)
		dp.SetCount(20)
		dp.SetSum(100)
	})
}
