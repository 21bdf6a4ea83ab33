package cumulativeprocessor

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processorhelper"

	"github.com/otelgateway/otelgateway/internal/identity"
)

// TestMemoryPerStream reports the heap a stream holds, per kind: the
// processor is created with max_streams = the streams fed (so its identity
// cache is sized for them and counted), fed three windows per stream (the
// second allocates the state kept for a replacing window), and measured
// after GC; explicit histograms also after one window (no histPrev).
// bench/cumulative measures the same at 100k streams against
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
		// interval: emit: interval (exemplars wait in the stream);
		// exemplars: per point, in distinct buckets; emitted: measured
		// after an emission took them.
		interval  bool
		exemplars int
		emitted   bool
		// windows fed per stream: 3 unless set.
		windows int64
	}{
		{"sum", memSums, 600, false, 0, false, 0},
		{"histogram 13 buckets", memHists, 1000, false, 0, false, 0},
		// A stream that sees one window has no value before it to keep:
		// its histPrev is never made (170 bytes less: its 64 bytes and 13
		// counts; the bound fails if it is made with the stream).
		{"histogram 13 buckets, one window", memHists, 620, false, 0, false, 1},
		{"exponential 20 buckets", memExps, 1400, false, 0, false, 0},
		// Exemplars cost nothing with per_batch: they stay on their point.
		{"histogram 13 buckets, 4 exemplars per point", memHists, 1000, false, 4, false, 0},
		{"histogram 13 buckets, interval", memHists, 1100, true, 0, false, 0},
		{"histogram 13 buckets, interval, 1 exemplar per point pending", memHists, 1400, true, 1, false, 0},
		{"histogram 13 buckets, interval, 4 exemplars per point pending", memHists, 2000, true, 4, false, 0},
		{"histogram 13 buckets, interval, 4 exemplars per point emitted", memHists, 1300, true, 4, true, 0},
		{"exponential 20 buckets, interval, 4 exemplars per point pending", memExps, 2400, true, 4, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := createDefaultConfig()
			cfg.Limits.MaxStreams = streams
			if tc.interval {
				cfg.Emit, cfg.Interval = EmitInterval, time.Hour // emitted by hand
			}
			before := heapInUse()
			p, _ := newTestProcessorWith(t, cfg, consumertest.NewNop())
			windows := tc.windows
			if windows == 0 {
				windows = 3
			}
			for w := range windows {
				for first := 0; first < streams; first += 1000 {
					md := tc.build(first, 1000, 10*w, 10*w+10)
					withExemplars(md, tc.exemplars, 10*w+10)
					_, err := p.processMetrics(context.Background(), md)
					if err != nil && !(tc.interval && errors.Is(err, processorhelper.ErrSkipProcessingData)) {
						t.Fatal(err)
					}
				}
			}
			if tc.emitted {
				if err := p.emit(context.Background()); err != nil {
					t.Fatal(err)
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

// withExemplars gives every histogram point n exemplars (trace and span
// ids, a double value, a timestamp), in distinct buckets of memHists' and
// memExps' points.
func withExemplars(md pmetric.Metrics, n int, ts int64) {
	if n == 0 {
		return
	}
	m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	add := func(dst pmetric.ExemplarSlice) {
		for i := range n {
			e := dst.AppendEmpty()
			e.SetDoubleValue(float64(30 + 300*i)) // buckets 50, 500, 1000, 2500 (13 buckets); distinct at scale 3 too
			e.SetTimestamp(pcommon.Timestamp(ts * 1e9))
			e.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, byte(i)})
			e.SetSpanID(pcommon.SpanID{1, 2, 3, 4, 5, 6, 7, byte(i)})
		}
	}
	switch m.Type() {
	case pmetric.MetricTypeHistogram:
		for i := 0; i < m.Histogram().DataPoints().Len(); i++ {
			add(m.Histogram().DataPoints().At(i).Exemplars())
		}
	case pmetric.MetricTypeExponentialHistogram:
		for i := 0; i < m.ExponentialHistogram().DataPoints().Len(); i++ {
			add(m.ExponentialHistogram().DataPoints().At(i).Exemplars())
		}
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

// TestMemoryDefaultMaxStreams is TestMemoryPerStream's sum case with the
// default max_streams (1.25M) and 20k streams held, as a collector that
// keeps the default runs: the identity cache is created for 1.25M entries,
// so whatever it allocates before the streams arrive shows here and not in
// TestMemoryPerStream (which sizes it for exactly the streams fed).
func TestMemoryDefaultMaxStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few MiB")
	}
	const streams = 20_000
	cfg := createDefaultConfig()
	if cfg.Limits.MaxStreams != defaultMaxStreams {
		t.Fatalf("default max_streams %d, want %d", cfg.Limits.MaxStreams, defaultMaxStreams)
	}
	before := heapInUse()
	p, _ := newTestProcessorWith(t, cfg, consumertest.NewNop())
	empty := heapInUse() - before
	for w := range int64(3) {
		for first := 0; first < streams; first += 1000 {
			if _, err := p.processMetrics(context.Background(), memSums(first, 1000, 10*w, 10*w+10)); err != nil {
				t.Fatal(err)
			}
		}
	}
	held := heapInUse() - before
	runtime.KeepAlive(p)
	t.Logf("max_streams %d: empty processor %d KiB; with %d sum streams %d KiB, %.0f bytes/stream (identity cache: %d slots of %d)",
		cfg.Limits.MaxStreams, empty>>10, streams, held>>10, float64(held)/streams, p.cache.Slots(), p.cache.Capacity())
	// The cache grows with the streams: preallocated for 200k it was
	// 4 MiB, 210 bytes per stream here (555 in all). It starts at 1 MiB
	// (65,536 entries: identity.initialSets says why).
	if per := float64(held) / streams; per > 480 {
		t.Errorf("%.0f bytes/stream, more than 480", per)
	}
	if empty > 1536<<10 {
		t.Errorf("an empty processor holds %d KiB, more than the cache's first 1 MiB and a margin", empty>>10)
	}
}

// TestMetricsOfOneLabelSetShareItsEncoding: the streams of two metrics of
// one scope whose points carry the same attributes in the same order (a
// request counter and its duration histogram, as the gateway receiver
// writes them) hold one copy of the attribute set's encoding between them.
// A metric whose points carry them in another order keeps its own (sharing
// the order table would send its hits to the slow comparison), as does one
// whose points carry other attributes; every stream has exactly its set.
func TestMetricsOfOneLabelSetShareItsEncoding(t *testing.T) {
	p, _ := newTestProcessorWith(t, createDefaultConfig(), consumertest.NewNop())
	const n = 200
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	requests := sm.Metrics().AppendEmpty()
	requests.SetName("requests")
	requests.SetEmptySum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	requests.Sum().SetIsMonotonic(true)
	duration := sm.Metrics().AppendEmpty()
	duration.SetName("duration")
	duration.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	reordered := sm.Metrics().AppendEmpty()
	reordered.SetName("reordered")
	reordered.SetEmptyHistogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	other := sm.Metrics().AppendEmpty()
	other.SetName("other")
	other.SetEmptySum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	for i := range n {
		route := "/r/" + strconv.Itoa(i)
		dp := requests.Sum().DataPoints().AppendEmpty()
		dp.Attributes().PutStr("http.route", route)
		dp.Attributes().PutStr("http.request.method", "GET")
		dp.SetTimestamp(10)
		dp.SetIntValue(1)
		for _, h := range []pmetric.HistogramDataPoint{duration.Histogram().DataPoints().AppendEmpty(), reordered.Histogram().DataPoints().AppendEmpty()} {
			h.SetTimestamp(10)
			h.SetCount(1)
			h.BucketCounts().FromRaw([]uint64{1})
		}
		hp := duration.Histogram().DataPoints().At(i)
		hp.Attributes().PutStr("http.route", route)
		hp.Attributes().PutStr("http.request.method", "GET")
		rp := reordered.Histogram().DataPoints().At(i)
		rp.Attributes().PutStr("http.request.method", "GET")
		rp.Attributes().PutStr("http.route", route)
		op := other.Sum().DataPoints().AppendEmpty()
		op.Attributes().PutStr("http.route", route)
		op.SetTimestamp(10)
		op.SetIntValue(1)
	}
	if _, err := p.processMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	descs := map[string]*metricDesc{}
	for _, ds := range p.metrics.byHash {
		for _, d := range ds {
			descs[d.name] = d
		}
	}
	encodingOf := func(metric string, attrs pcommon.Map) *byte {
		t.Helper()
		s, ok := p.cache.Get(descs[metric].id, identity.OfMap(attrs), attrs)
		if !ok || s.attrs != identity.SetOf(attrs) {
			t.Fatalf("%s %v: no stream, or one with other attributes", metric, attrs.AsRaw())
		}
		return unsafe.StringData(s.attrs.String())
	}
	shared, apart := 0, 0
	for i := range n {
		r := encodingOf("requests", requests.Sum().DataPoints().At(i).Attributes())
		d := encodingOf("duration", duration.Histogram().DataPoints().At(i).Attributes())
		x := encodingOf("reordered", reordered.Histogram().DataPoints().At(i).Attributes())
		o := encodingOf("other", other.Sum().DataPoints().At(i).Attributes())
		if r == d {
			shared++
		}
		if x != d && x != r && o != x {
			apart++
		}
	}
	if shared != n || apart != n {
		t.Errorf("%d of %d histogram streams share their counter stream's encoding (want all); %d of %d reordered and other streams have their own (want all)", shared, n, apart, n)
	}
}
