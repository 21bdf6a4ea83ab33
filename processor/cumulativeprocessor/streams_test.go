package cumulativeprocessor

import (
	"context"
	"runtime/metrics"
	"strconv"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor/internal/metadata"
)

// newStreamBatch is a batch of n delta points of one metric, each the first
// point of a new stream: streams first..first+n with the 6 point attributes
// of bench/cumulative (a gateway's route, method, status, service,
// upstream, consumer) and its two-attribute resource.
func newStreamBatch(hist bool, first, n int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "gateway")
	rm.Resource().Attributes().PutStr("service.instance.id", "collector-1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("otelgateway")
	m := sm.Metrics().AppendEmpty()
	m.SetName("gateway.requests")
	bounds := []float64{5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 5120, 10240}
	counts := make([]uint64, len(bounds)+1)
	counts[3] = 1
	var sums pmetric.NumberDataPointSlice
	var hists pmetric.HistogramDataPointSlice
	if hist {
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		hists = h.DataPoints()
	} else {
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		sums = s.DataPoints()
	}
	for i := first; i < first+n; i++ {
		var attrs pcommon.Map
		if hist {
			dp := hists.AppendEmpty()
			dp.SetStartTimestamp(1e9)
			dp.SetTimestamp(2e9)
			dp.ExplicitBounds().FromRaw(bounds)
			dp.BucketCounts().FromRaw(counts)
			dp.SetCount(1)
			dp.SetSum(30)
			attrs = dp.Attributes()
		} else {
			dp := sums.AppendEmpty()
			dp.SetStartTimestamp(1e9)
			dp.SetTimestamp(2e9)
			dp.SetIntValue(1)
			attrs = dp.Attributes()
		}
		attrs.PutStr("http.route", "/api/v1/resource/"+strconv.Itoa(i))
		attrs.PutStr("http.request.method", [...]string{"GET", "POST", "PUT", "DELETE"}[i%4])
		attrs.PutInt("http.response.status_code", int64(200+i%5*100))
		attrs.PutStr("service.name", "kong")
		attrs.PutStr("upstream", "backend-"+strconv.Itoa(i%16))
		attrs.PutStr("consumer", "tenant-"+strconv.Itoa(i%7))
	}
	return md
}

// TestSweepUnlinksOnlyStaleStreamsOfAChain: streams whose attribute hashes
// collide share one map key, chained; the sweep must remove the stale ones
// from the middle and the ends of a chain and keep the others exact.
func TestSweepUnlinksOnlyStaleStreamsOfAChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p, _ := newTestProcessor(t)
		p.hashAttrs = func(pcommon.Map) uint64 { return 42 } // every attribute set collides
		process(t, p, batch(point{"kong", "/a", 10, 20, 1}, point{"kong", "/b", 10, 20, 2},
			point{"kong", "/c", 10, 20, 3}, point{"kong", "/d", 10, 20, 4}))
		time.Sleep(p.cfg.MaxStale / 2)
		process(t, p, batch(point{"kong", "/b", 20, 30, 1}, point{"kong", "/d", 20, 30, 1}))
		time.Sleep(p.cfg.MaxStale/2 + time.Second)
		p.sweep(time.Now()) // /a and /c are stale
		n := 0
		for i := range p.shards {
			for range p.shards[i].all() {
				n++
			}
		}
		if n != 2 {
			t.Fatalf("%d streams left after the sweep, want 2", n)
		}
		assertEmitted(t, process(t, p, batch(point{"kong", "/a", 900, 910, 5}, point{"kong", "/b", 30, 40, 1},
			point{"kong", "/c", 900, 910, 6}, point{"kong", "/d", 30, 40, 1})),
			"kong /b 10 40 4", "kong /d 10 40 6", "kong /a 900 910 5", "kong /c 900 910 6")
	})
}

const newStreamsPerBatch = 1000

// newStreamsProcessor returns a processor with room for batches batches of
// new streams, and those batches (every point of each a new stream).
func newStreamsProcessor(tb testing.TB, hist bool, batches int) (*cumulativeProcessor, []pmetric.Metrics) {
	cfg := createDefaultConfig()
	cfg.Limits.MaxStreams = batches * newStreamsPerBatch
	p, err := newProcessor(cfg, processortest.NewNopSettings(metadata.Type), consumertest.NewNop())
	if err != nil {
		tb.Fatal(err)
	}
	mds := make([]pmetric.Metrics, batches)
	for i := range mds {
		mds[i] = newStreamBatch(hist, i*newStreamsPerBatch, newStreamsPerBatch)
	}
	return p, mds
}

// TestNewStreamAllocations: creating a stream (identity, cache entry, state)
// costs at most one allocation, amortised over batches of 1,000 new streams
// into a processor that already holds some (so map growth counts too).
// Issue 15 asks for at most 2; the slabs hold it at 0.12 (sums) and 0.18
// (histograms), the stream's cache entry carved with it (an entry of the
// cache's own, from slabs of its own, made it 0.19 and 0.24), so the limits
// catch a new per-stream allocation, or a second carve per stream.
// Allocation counts are deterministic; times are not asserted anywhere.
func TestNewStreamAllocations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hist  bool
		limit float64
	}{
		{"sum", false, 0.15},
		// A histogram's state and buckets come from the shard's slabs too.
		{"histogram", true, 0.2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const runs = 20
			p, mds := newStreamsProcessor(t, tc.hist, runs+1)
			next := 0
			allocs := testing.AllocsPerRun(runs, func() {
				if _, err := p.processMetrics(context.Background(), mds[next]); err != nil {
					t.Fatal(err)
				}
				next++
			})
			per := allocs / newStreamsPerBatch
			t.Logf("%.3f allocations per new stream", per)
			if per > tc.limit {
				t.Fatalf("%.0f allocations per batch of %d new streams (%.3f per stream), want ≤ %g per stream",
					allocs, newStreamsPerBatch, per, tc.limit)
			}
		})
	}
}

// BenchmarkNewStreams measures the creation of streams: every point is the
// first of its stream. Each op is one batch of 1,000; new-streams/s and
// allocs/stream are per stream. Compare with
//
//	go test -run '^$' -bench NewStreams -count 6 . | tee new.txt && benchstat old.txt new.txt
func BenchmarkNewStreams(b *testing.B) {
	for _, kind := range []struct {
		name string
		hist bool
	}{{"sum", false}, {"histogram", true}} {
		b.Run(kind.name, func(b *testing.B) {
			// 100 batches (100k streams) per processor: the default scale.
			const perProcessor = 100
			var p *cumulativeProcessor
			var mds []pmetric.Metrics
			var allocs uint64
			var cpu time.Duration
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if i%perProcessor == 0 {
					b.StopTimer()
					p, mds = newStreamsProcessor(b, kind.hist, perProcessor)
					b.StartTimer()
				}
				a0, c0 := heapObjects(), processCPU()
				if _, err := p.processMetrics(context.Background(), mds[i%perProcessor]); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c0
				allocs += heapObjects() - a0
			}
			streams := float64(b.N * newStreamsPerBatch)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/streams, "ns/stream")
			// CPU time is far steadier than wall time on a shared machine
			// (it does not count the time other processes hold the cores).
			b.ReportMetric(float64(cpu.Nanoseconds())/streams, "cpu-ns/stream")
			b.ReportMetric(float64(allocs)/streams, "allocs/stream")
		})
	}
}

// processCPU is the CPU time (user + system) of the whole process so far,
// all threads, so the garbage collection a batch causes counts.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var heapObjectsSample = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}

// heapObjects is the number of heap objects allocated so far: read around
// each batch, so the benchmark's setup (new processors and batches, timer
// stopped) is not counted per stream.
func heapObjects() uint64 {
	metrics.Read(heapObjectsSample)
	return heapObjectsSample[0].Value.Uint64()
}

// TestStreamSize keeps a stream at 192 bytes, its own cache entry (64)
// included: every new stream writes all of them, so each field added
// beyond that costs creation a cache line (and the slab's chunk its size
// class, 16 × 192 = 3 KiB, where streams stay line-aligned).
func TestStreamSize(t *testing.T) {
	if n := unsafe.Sizeof(stream{}); n > 192 {
		t.Errorf("a stream takes %d bytes, want at most 192", n)
	}
	// A new explicit histogram stream writes its state too: one line.
	if n := unsafe.Sizeof(histState{}); n > 64 {
		t.Errorf("a histogram's state takes %d bytes, want at most 64", n)
	}
}
