package promstreamexporter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// memorySeries is the number of series TestMemoryPerSeries stores per type:
// the size of the distribution benchmark's families (bench/distribution,
// about 11k label tuples), doubled so that chunk and map growth average out.
const memorySeries = 20_000

// memoryBounds are the semconv duration buckets the distribution benchmark's
// histograms have (14 bounds).
var memoryBounds = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// memoryMetrics builds n points of one cumulative family shaped like the
// otel profile's: five labels, job from the resource and four attributes
// (route, method, int status code, collector), as the gateway receiver
// makes them.
func memoryMetrics(n int, histogram bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kong")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	codes := []int64{200, 201, 404, 429, 503}
	attrs := func(i int, dst pcommon.Map) {
		dst.PutStr("http.route", "/api/v1/r"+strconv.Itoa(i/len(codes)))
		dst.PutStr("http.request.method", methods[(i/len(codes))%len(methods)])
		dst.PutInt("http.response.status_code", codes[i%len(codes)])
		dst.PutStr("collector", "otelcol-gateway")
	}
	if histogram {
		m.SetName("http.server.request.duration")
		m.SetUnit("s")
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		counts := make([]uint64, len(memoryBounds)+1)
		for i := range counts {
			counts[i] = uint64(i)
		}
		for i := range n {
			dp := h.DataPoints().AppendEmpty()
			attrs(i, dp.Attributes())
			dp.SetStartTimestamp(1_700_000_000_000_000_000)
			dp.SetTimestamp(1_700_000_005_000_000_000)
			dp.ExplicitBounds().FromRaw(memoryBounds)
			dp.BucketCounts().FromRaw(counts)
			dp.SetCount(uint64(len(counts) * (len(counts) - 1) / 2))
			dp.SetSum(12.5)
		}
		return md
	}
	m.SetName("gateway.requests")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := range n {
		dp := s.DataPoints().AppendEmpty()
		attrs(i, dp.Attributes())
		dp.SetStartTimestamp(1_700_000_000_000_000_000)
		dp.SetTimestamp(1_700_000_005_000_000_000)
		dp.SetIntValue(int64(i))
	}
	return md
}

// heapPerSeries stores md (n series) in a new exporter through
// consumeMetrics, as the collector does, and returns the heap it holds per
// series besides what an empty exporter holds: once stored, after a text
// scrape (whose buffers, about 1 MiB whatever the table's size, are kept
// for the next scrape: not a per-series cost, but part of the figure at
// this size), and after a protobuf scrape too (which keeps every series'
// encoded labels).
func heapPerSeries(t *testing.T, md pmetric.Metrics, n int) (stored, scraped, proto float64) {
	e, _ := newTestExporter(t)
	before := int64(heapAlloc())
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if got := e.table.Len(); got != int64(n) {
		t.Fatalf("%d series stored, want %d", got, n)
	}
	stored = float64(int64(heapAlloc())-before) / float64(n)
	_ = scrape(t, e)
	scraped = float64(int64(heapAlloc())-before) / float64(n)
	get(t, e, metricsPath, http.Header{"Accept": {acceptProto}})
	proto = float64(int64(heapAlloc())-before) / float64(n)
	runtime.KeepAlive(e)
	runtime.KeepAlive(md)
	return stored, scraped, proto
}

// TestMemoryPerSeries reports the heap the exporter holds per counter series
// and per histogram series (14 bounds, 5 labels), the shapes of the
// distribution benchmark, and fails on a wide regression: each MiB of live
// heap is about 2 MiB of the collector's RSS at GOGC=100.
func TestMemoryPerSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates some MiB")
	}
	for _, c := range []struct {
		name      string
		histogram bool
		limit     float64 // bytes/series: about 1.25 times what was measured (382, 571 on amd64)
	}{
		{"counter", false, 480},
		{"histogram", true, 700},
	} {
		md := memoryMetrics(memorySeries, c.histogram)
		per, scraped, proto := heapPerSeries(t, md, memorySeries)
		t.Logf("%d %s series, 5 labels: %.0f bytes/series (%.0f after a text scrape, %.0f after a protobuf one too)",
			memorySeries, c.name, per, scraped, proto)
		if per > c.limit {
			t.Errorf("%s series hold %.0f bytes each, want at most %.0f", c.name, per, c.limit)
		}
	}
}

// BenchmarkConsumeShapes times consumeMetrics of memorySeries points of the
// distribution benchmark's shapes: "update" stores a batch whose series
// exist (the steady state: lock-free lookups and value writes), "insert"
// one whose series are all new (a new exporter per batch, not timed).
//
//	go test -run '^$' -bench ConsumeShapes -benchtime 20x -count 6 ./exporter/promstreamexporter
func BenchmarkConsumeShapes(b *testing.B) {
	for _, histogram := range []bool{false, true} {
		name := "counter"
		if histogram {
			name = "histogram"
		}
		md := memoryMetrics(memorySeries, histogram)
		ctx := context.Background()
		b.Run("update/"+name, func(b *testing.B) {
			e, err := newExporter(createDefaultConfig(), exportertest.NewNopSettings(metadata.Type))
			if err != nil {
				b.Fatal(err)
			}
			defer e.telemetry.Shutdown()
			_ = e.consumeMetrics(ctx, md)
			b.ReportAllocs()
			for b.Loop() {
				_ = e.consumeMetrics(ctx, md)
			}
		})
		b.Run("insert/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				e, err := newExporter(createDefaultConfig(), exportertest.NewNopSettings(metadata.Type))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				_ = e.consumeMetrics(ctx, md)
				b.StopTimer()
				e.telemetry.Shutdown()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkScrapeShapes times a text scrape of memorySeries series of each
// of the distribution benchmark's shapes: counters, and histograms (14
// bounds).
//
//	go test -run '^$' -bench ScrapeShapes -count 6 ./exporter/promstreamexporter
func BenchmarkScrapeShapes(b *testing.B) {
	for _, histogram := range []bool{false, true} {
		name := "counter"
		if histogram {
			name = "histogram"
		}
		b.Run(name, func(b *testing.B) {
			e, err := newExporter(createDefaultConfig(), exportertest.NewNopSettings(metadata.Type))
			if err != nil {
				b.Fatal(err)
			}
			defer e.telemetry.Shutdown()
			_ = e.consumeMetrics(context.Background(), memoryMetrics(memorySeries, histogram))
			req := newScrapeRequest(acceptText004)
			rw := &discardRW{h: http.Header{}}
			e.handleMetrics(rw, req)
			b.ReportAllocs()
			for b.Loop() {
				e.handleMetrics(rw, req)
			}
		})
	}
}

// hugeHistograms is issue 24's workload: n OTLP histogram points of one
// metric, each with buckets explicit bounds (the same for every point, or
// its own with distinct) and gateway-shaped labels.
func hugeHistograms(n, buckets int, distinct bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kong")
	rm.Resource().Attributes().PutStr("service.instance.id", "kong-7f9c6d5b4-x2v8q")
	m := rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("http.server.request.duration")
	m.SetUnit("s")
	h := m.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i := range n {
		dp := h.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("http.route", "/api/v1/hostile/"+strconv.Itoa(i))
		dp.Attributes().PutStr("http.request.method", "GET")
		dp.Attributes().PutInt("http.response.status_code", 200)
		bounds := dp.ExplicitBounds()
		bounds.EnsureCapacity(buckets)
		for j := range buckets {
			b := float64(j) / 1000
			if distinct {
				b += float64(i) / 1e7
			}
			bounds.Append(b)
		}
		counts := dp.BucketCounts()
		counts.EnsureCapacity(buckets + 1)
		for j := range buckets + 1 {
			counts.Append(uint64(j % 3))
		}
		dp.SetCount(uint64(buckets))
		dp.SetSum(123.5)
	}
	return md
}

// heapObjects reads the bytes of live and not yet swept heap objects.
func heapObjects() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// slotHeap scrapes an exporter holding n histograms of buckets bounds with
// max_concurrent_scrapes (4) scrapers at once, in text, OpenMetrics,
// protobuf and gzipped text, twice, and returns what a scrape slot took of
// the heap: its peak over the first scrapes (bound texts included: the first
// scrape renders them into the table), what stayed after them (the same),
// and its peak over the second scrapes.
func slotHeap(tb testing.TB, n, buckets int, distinct bool) (first, kept, second float64) {
	tb.Helper()
	e, err := newExporter(createDefaultConfig(), exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		tb.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	if err := e.consumeMetrics(context.Background(), hugeHistograms(n, buckets, distinct)); err != nil {
		tb.Fatal(err)
	}
	scrapeAll := func() (peak uint64) {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		sampled := make(chan uint64)
		go func() {
			var max uint64
			for {
				max = maxHeap(max, heapObjects())
				select {
				case <-stop:
					sampled <- max
					return
				case <-time.After(200 * time.Microsecond):
				}
			}
		}()
		for _, h := range []http.Header{
			{"Accept": {acceptText004}},
			{"Accept": {acceptOpenMetrics}},
			{"Accept": {acceptProto}},
			{"Accept": {acceptText004}, "Accept-Encoding": {"gzip"}},
		} {
			wg.Go(func() {
				req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
				req.Header = h
				rw := &sizeRW{h: http.Header{}}
				e.handleMetrics(rw, req)
				if rw.n < n*buckets*2 { // gzip: some 2 bytes a bucket
					tb.Errorf("%v: a body of %d bytes", h, rw.n)
				}
			})
		}
		wg.Wait()
		close(stop)
		return <-sampled
	}
	runtime.GC()
	stored := heapObjects()
	peak1 := scrapeAll()
	runtime.GC()
	warm := heapObjects()
	peak2 := scrapeAll()
	mib := func(v uint64) float64 { return float64(v) / (1 << 20) }
	return mib(peak1-min(peak1, stored)) / 4, mib(warm-min(warm, stored)) / 4, mib(peak2-min(peak2, warm)) / 4
}

// TestHugeHistogramsCostABoundedSlot: 8 histograms of 20,000 buckets (a
// page of them renders to some 20 MB) scraped by 4 scrapers at once, in
// every format: a scrape slot takes a few MiB of heap, never a page's or a
// series' rendering (a page was rendered whole into the slot's buffer).
// BenchmarkHugeHistogramsScrape measures issue 24's workload.
func TestHugeHistogramsCostABoundedSlot(t *testing.T) {
	first, kept, second := slotHeap(t, 8, 20_000, false)
	t.Logf("a scrape slot: %.1f MiB peak on the first scrape, %.1f MiB kept, %.1f MiB peak on the next", first, kept, second)
	if first > 8 || kept > 4 || second > 8 {
		t.Errorf("a scrape slot took %.1f MiB of heap on its first scrape, kept %.1f, took %.1f on the next; want at most 8, 4 and 8",
			first, kept, second)
	}
}

// BenchmarkHugeHistogramsScrape is issue 24's workload, 40 histograms of
// 50,000 buckets (their bounds shared, or distinct: each then keeps its
// bound texts, some 0.9 MiB, rendered by its first scrape), scraped by 4
// scrapers at once; it reports the heap a scrape slot takes (MiB-first,
// MiB-kept, MiB-next, as slotHeap measures them).
//
//	go test -run '^$' -bench HugeHistogramsScrape -benchtime 1x ./exporter/promstreamexporter
func BenchmarkHugeHistogramsScrape(b *testing.B) {
	for _, distinct := range []bool{false, true} {
		b.Run("distinct="+strconv.FormatBool(distinct), func(b *testing.B) {
			var first, kept, second float64
			for b.Loop() {
				first, kept, second = slotHeap(b, 40, 50_000, distinct)
			}
			b.ReportMetric(first, "MiB-first/slot")
			b.ReportMetric(kept, "MiB-kept/slot")
			b.ReportMetric(second, "MiB-next/slot")
		})
	}
}

func maxHeap(a, b uint64) uint64 { return max(a, b) }

// sizeRW counts the body written to it.
type sizeRW struct {
	h http.Header
	n int
}

func (s *sizeRW) Header() http.Header         { return s.h }
func (s *sizeRW) Write(p []byte) (int, error) { s.n += len(p); return len(p), nil }
func (s *sizeRW) WriteHeader(int)             {}
