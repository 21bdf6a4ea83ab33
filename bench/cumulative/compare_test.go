// Package cumulative compares otelgateway's cumulative processor with the
// contrib deltatocumulative processor (v0.165.1) on the workloads of issue 4.
// It lives in its own module so the peer never enters the main module.
package cumulative

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/processor/deltatocumulativeprocessor"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelgateway/otelgateway/processor/cumulativeprocessor"
)

var (
	streamsFlag = flag.Int("streams", 100_000, "streams per workload")
	roundsFlag  = flag.Int("rounds", 10, "measured replays of every stream")
	createsFlag = flag.Int("creations", 3, "measured creations of every stream (a new processor each, peers interleaved; the median is reported)")
)

const (
	batchSize = 1000
	buckets   = 13 // explicit histogram buckets: 12 bounds
)

type peer struct {
	name    string
	factory processor.Factory
}

var peers = []peer{
	{"otelgateway", cumulativeprocessor.NewFactory()},
	{"contrib", deltatocumulativeprocessor.NewFactory()},
}

// workload builds the batches of one round: streams/batchSize batches of
// batchSize delta points, and resets them in place before each replay (the
// processors rewrite points to cumulative values).
type workload struct {
	name  string
	build func(first, n int) pmetric.Metrics
	reset func(md pmetric.Metrics, round int64)
	// value reads the cumulative count of a point of the output (for the
	// exactness check).
	value func(md pmetric.Metrics, each func(v int64))
}

var bounds = func() []float64 {
	b := make([]float64, buckets-1)
	for i := range b {
		b[i] = float64(int(5) << i)
	}
	return b
}()

var deltaCounts = func() []uint64 {
	c := make([]uint64, buckets)
	c[3] = 1
	return c
}()

func attrs(m pcommon.Map, i int) {
	m.PutStr("http.route", "/api/v1/resource/"+strconv.Itoa(i%5000))
	m.PutStr("http.request.method", [...]string{"GET", "POST", "PUT", "DELETE"}[i%4])
	m.PutInt("http.response.status_code", int64(200+i/5000%5*100))
	m.PutStr("service.name", "kong")
	m.PutStr("upstream", "backend-"+strconv.Itoa(i/20000))
	m.PutStr("consumer", "tenant-"+strconv.Itoa(i%7))
}

func newBatch(name string) (pmetric.Metrics, pmetric.Metric) {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "gateway")
	rm.Resource().Attributes().PutStr("service.instance.id", "collector-1")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("otelgateway")
	m := sm.Metrics().AppendEmpty()
	m.SetName(name)
	return md, m
}

func window(round int64) (pcommon.Timestamp, pcommon.Timestamp) {
	return pcommon.Timestamp((round + 1) * 1e9), pcommon.Timestamp((round + 2) * 1e9)
}

var sums = workload{name: "sums, 6 attributes"}

func init() {
	sums.build = func(first, n int) pmetric.Metrics {
		md, m := newBatch("gateway.requests")
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		for i := first; i < first+n; i++ {
			attrs(s.DataPoints().AppendEmpty().Attributes(), i)
		}
		return md
	}
	sums.reset = func(md pmetric.Metrics, round int64) {
		m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
		m.Sum().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		start, ts := window(round)
		dps := m.Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetIntValue(1)
		}
	}
	sums.value = func(md pmetric.Metrics, each func(int64)) {
		dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			each(dps.At(i).IntValue())
		}
	}
	hists.build = func(first, n int) pmetric.Metrics {
		md, m := newBatch("gateway.request.duration")
		m.SetUnit("ms")
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		for i := first; i < first+n; i++ {
			dp := h.DataPoints().AppendEmpty()
			attrs(dp.Attributes(), i)
			dp.ExplicitBounds().FromRaw(bounds)
			dp.BucketCounts().FromRaw(deltaCounts)
		}
		return md
	}
	hists.reset = func(md pmetric.Metrics, round int64) {
		m := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
		m.Histogram().SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
		start, ts := window(round)
		dps := m.Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			dp := dps.At(i)
			dp.SetStartTimestamp(start)
			dp.SetTimestamp(ts)
			dp.SetCount(1)
			dp.SetSum(42)
			dp.BucketCounts().FromRaw(deltaCounts) // same length: no allocation
		}
	}
	hists.value = func(md pmetric.Metrics, each func(int64)) {
		dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Histogram().DataPoints()
		for i := 0; i < dps.Len(); i++ {
			each(int64(dps.At(i).Count()))
		}
	}
}

var hists = workload{name: "histograms, 13 buckets"}

// checker is the next consumer: when armed it checks that every cumulative
// value equals want (each stream got one delta of 1 per round).
type checker struct {
	w      *workload
	armed  atomic.Bool
	want   atomic.Int64
	points atomic.Int64
	wrong  atomic.Int64
}

func (c *checker) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *checker) ConsumeMetrics(_ context.Context, md pmetric.Metrics) error {
	if !c.armed.Load() {
		return nil
	}
	want := c.want.Load()
	var n, wrong int64
	c.w.value(md, func(v int64) {
		n++
		if v != want {
			wrong++
		}
	})
	c.points.Add(n)
	c.wrong.Add(wrong)
	return nil
}

func start(t *testing.T, f processor.Factory, next consumer.Metrics) processor.Metrics {
	t.Helper()
	set := processortest.NewNopSettings(f.Type())
	p, err := f.CreateMetrics(context.Background(), set, f.CreateDefaultConfig(), next)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	return p
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

var allocSample = []metrics.Sample{{Name: "/gc/heap/allocs:objects"}}

func allocs() uint64 {
	metrics.Read(allocSample)
	return allocSample[0].Value.Uint64()
}

// result is one row of the table.
type result struct {
	nsPerPoint     float64
	cpuNsPerPoint  float64
	allocsPerPoint float64
	bytesPerStream float64
	exact          bool
}

// runSingle replays every stream `rounds` times from one goroutine after a
// first round that creates the streams; it times only ConsumeMetrics and
// counts the allocations made inside it.
func runSingle(t *testing.T, pr peer, w *workload, streams, rounds int) result {
	batches := make([]pmetric.Metrics, streams/batchSize)
	for i := range batches {
		batches[i] = w.build(i*batchSize, batchSize)
	}
	before := heapAlloc()
	chk := &checker{w: w}
	p := start(t, pr.factory, chk)
	ctx := context.Background()
	var elapsed, cpu time.Duration
	var allocated uint64
	for round := range int64(rounds + 2) {
		last := round == int64(rounds+1)
		if last {
			chk.want.Store(round + 1)
			chk.armed.Store(true)
		}
		for _, md := range batches {
			w.reset(md, round)
			a0, c0, t0 := allocs(), cpuTime(), time.Now()
			if err := p.ConsumeMetrics(ctx, md); err != nil {
				t.Fatal(err)
			}
			if round > 0 && !last { // round 0 creates streams; the last one checks
				elapsed += time.Since(t0)
				cpu += cpuTime() - c0
				allocated += allocs() - a0
			}
		}
	}
	// Retained state: what the processor holds for the streams (the
	// batches are alive in both measurements).
	retained := float64(heapAlloc()-before) / float64(streams)
	runtime.KeepAlive(p)
	runtime.KeepAlive(batches) // else they are freed before the second measurement
	n := float64(streams * rounds)
	return result{
		nsPerPoint:     float64(elapsed.Nanoseconds()) / n,
		cpuNsPerPoint:  float64(cpu.Nanoseconds()) / n,
		allocsPerPoint: float64(allocated) / n,
		bytesPerStream: retained,
		exact:          chk.points.Load() == int64(streams) && chk.wrong.Load() == 0,
	}
}

// creation is one measurement of stream creation.
type creation struct {
	nsPerPoint      float64
	cpuNsPerPoint   float64
	allocsPerStream float64
}

// cpuTime is the CPU time (user + system) of the whole process so far, all
// threads: the processor's work plus the garbage collection it causes. On a
// shared machine it is far steadier than wall time, which also counts the
// time other processes hold the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// runCreate feeds every stream's first point to a new processor, from one
// goroutine: every point creates a stream. It times only ConsumeMetrics
// and counts the allocations made inside it.
func runCreate(t *testing.T, pr peer, w *workload, streams int) creation {
	batches := make([]pmetric.Metrics, streams/batchSize)
	for i := range batches {
		batches[i] = w.build(i*batchSize, batchSize)
		w.reset(batches[i], 0)
	}
	// Not start: its cleanup would keep every creation run's processor
	// alive until the test ends, and their heap would slow the later runs'
	// garbage collection.
	set := processortest.NewNopSettings(pr.factory.Type())
	p, err := pr.factory.CreateMetrics(context.Background(), set, pr.factory.CreateDefaultConfig(), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	runtime.GC() // the batches' garbage is not the processor's to collect
	ctx := context.Background()
	var elapsed, cpu time.Duration
	var allocated uint64
	for _, md := range batches {
		a0, c0, t0 := allocs(), cpuTime(), time.Now()
		if err := p.ConsumeMetrics(ctx, md); err != nil {
			t.Fatal(err)
		}
		elapsed += time.Since(t0)
		cpu += cpuTime() - c0
		allocated += allocs() - a0
	}
	return creation{
		nsPerPoint:      float64(elapsed.Nanoseconds()) / float64(streams),
		cpuNsPerPoint:   float64(cpu.Nanoseconds()) / float64(streams),
		allocsPerStream: float64(allocated) / float64(streams),
	}
}

// medianCreation runs runCreate n times per peer, the peers interleaved
// (so a change in the machine's load hits both alike), and returns each
// peer's median of each column.
//
// One unmeasured run per peer comes first: the first creation of a
// workload grows the process's heap from the OS, page fault by page fault
// (on this shared VM: with the heap handed back first, debug.FreeOSMemory,
// 0.13 faults per new stream added ~3 µs per point to ours' ~1.5 µs), and
// later runs reuse that memory. Without it, whichever peer ran first paid for the
// heap of both (ours, always), in one run of every n.
func medianCreation(t *testing.T, w *workload, streams, n int) [2]creation {
	for _, pr := range peers {
		runCreate(t, pr, w, streams)
	}
	var runs [2][]creation
	for range n {
		for i, pr := range peers {
			runs[i] = append(runs[i], runCreate(t, pr, w, streams))
		}
	}
	var med [2]creation
	for i, r := range runs {
		med[i] = creation{
			nsPerPoint:      median(r, func(c creation) float64 { return c.nsPerPoint }),
			cpuNsPerPoint:   median(r, func(c creation) float64 { return c.cpuNsPerPoint }),
			allocsPerStream: median(r, func(c creation) float64 { return c.allocsPerStream }),
		}
	}
	return med
}

func median(runs []creation, of func(creation) float64) float64 {
	v := make([]float64, len(runs))
	for i, r := range runs {
		v[i] = of(r)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// runParallel feeds 4 goroutines. Disjoint: each owns a quarter of the
// streams. Overlapping: all replay the same streams, goroutine g with
// timestamps of its own slot, so concurrent points of one stream race and
// the loser is dropped as out of order by both processors (the rules); only
// disjoint totals can be checked exactly. Returns wall-clock ns per point,
// resets included (the same for both peers).
func runParallel(t *testing.T, pr peer, w *workload, streams, rounds int, overlap bool) (float64, bool) {
	const workers = 4
	per := streams / workers
	chk := &checker{w: w}
	p := start(t, pr.factory, chk)
	type ref struct {
		md    pmetric.Metrics
		first int
	}
	sets := make([][]*ref, workers)
	for g := range sets {
		first := g * per
		n := per
		if overlap {
			first, n = 0, streams
		}
		for i := 0; i < n; i += batchSize {
			sets[g] = append(sets[g], &ref{w.build(first+i, batchSize), first + i})
		}
	}
	run := func(from, to int64) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for g := range workers {
			wg.Go(func() {
				for round := from; round < to; round++ {
					r := round
					if overlap {
						r = round*workers + int64(g)
					}
					for _, b := range sets[g] {
						if b.md.DataPointCount() != batchSize {
							// Overlap: a processor removed points it
							// dropped as out of order; rebuild.
							b.md = w.build(b.first, batchSize)
						}
						w.reset(b.md, r)
						if err := p.ConsumeMetrics(context.Background(), b.md); err != nil {
							t.Error(err)
						}
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	run(0, 1) // create the streams
	elapsed := run(1, int64(rounds+1))
	exact := true
	if !overlap {
		chk.want.Store(int64(rounds + 2))
		chk.armed.Store(true)
		run(int64(rounds+1), int64(rounds+2))
		exact = chk.points.Load() == int64(streams) && chk.wrong.Load() == 0
	}
	points := streams * rounds
	if overlap {
		points *= workers
	}
	return float64(elapsed.Nanoseconds()) / float64(points), exact
}

// TestCompare prints the comparison tables: stream creation, then the
// steady state. Run (a few minutes on 2 cores):
//
//	cd bench/cumulative && go test -run TestCompare -v -timeout 30m .
func TestCompare(t *testing.T) {
	streams, rounds, creations := *streamsFlag, *roundsFlag, *createsFlag
	// The 4-goroutine runs split the batches evenly: a remainder would leave
	// streams unfed and the exactness check would (rightly) fail.
	if streams%(4*batchSize) != 0 || streams <= 0 || rounds <= 0 || creations <= 0 {
		t.Fatalf("-streams must be a positive multiple of %d, -rounds and -creations positive; got %d, %d and %d",
			4*batchSize, streams, rounds, creations)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%d streams, batches of %d delta points, GOMAXPROCS=%d\n", streams, batchSize, runtime.GOMAXPROCS(0))
	fmt.Fprintf(&b, "\nCreation: every point the first of its stream, new processor; median of %d runs per processor, interleaved\n\n", creations)
	fmt.Fprintf(&b, "%-24s %-12s %11s %11s %13s %15s\n", "workload", "processor", "ns/point", "Mpoints/s", "cpu ns/point", "allocs/stream")
	for _, w := range []*workload{&sums, &hists} {
		c := medianCreation(t, w, streams, creations)
		for i, pr := range peers {
			fmt.Fprintf(&b, "%-24s %-12s %11.1f %11.3f %13.1f %15.2f\n", w.name, pr.name,
				c[i].nsPerPoint, 1e3/c[i].nsPerPoint, c[i].cpuNsPerPoint, c[i].allocsPerStream)
		}
		fmt.Fprintf(&b, "%-24s %-12s %10.2fx %10.2fx %12.2fx %14.2fx\n", w.name, "ours/contrib", c[0].nsPerPoint/c[1].nsPerPoint,
			c[1].nsPerPoint/c[0].nsPerPoint, c[0].cpuNsPerPoint/c[1].cpuNsPerPoint, c[0].allocsPerStream/c[1].allocsPerStream)
	}
	fmt.Fprintf(&b, "\nSteady state: every stream replayed %d times after its creation round\n\n", rounds)
	fmt.Fprintf(&b, "%-24s %-12s %11s %11s %13s %13s %13s %16s %16s %6s\n", "workload", "processor", "ns/point", "Mpoints/s",
		"cpu ns/point", "allocs/point", "bytes/stream", "4g disjoint ns", "4g overlap ns", "exact")
	for _, w := range []*workload{&sums, &hists} {
		var rows [2]result
		var par [2][2]float64
		for i, pr := range peers {
			rows[i] = runSingle(t, pr, w, streams, rounds)
			d, exactD := runParallel(t, pr, w, streams, rounds, false)
			o, _ := runParallel(t, pr, w, streams, rounds/2+1, true)
			par[i] = [2]float64{d, o}
			r := rows[i]
			fmt.Fprintf(&b, "%-24s %-12s %11.1f %11.3f %13.1f %13.4f %13.0f %16.1f %16.1f %6v\n", w.name, pr.name,
				r.nsPerPoint, 1e3/r.nsPerPoint, r.cpuNsPerPoint, r.allocsPerPoint, r.bytesPerStream, d, o, r.exact && exactD)
			if !r.exact || !exactD {
				t.Errorf("%s %s: cumulative totals not exact", w.name, pr.name)
			}
		}
		fmt.Fprintf(&b, "%-24s %-12s %10.2fx %10.2fx %12.2fx %12.4fx %12.2fx %15.2fx %15.2fx\n", w.name, "ours/contrib",
			rows[0].nsPerPoint/rows[1].nsPerPoint, rows[1].nsPerPoint/rows[0].nsPerPoint, rows[0].cpuNsPerPoint/rows[1].cpuNsPerPoint,
			rows[0].allocsPerPoint/rows[1].allocsPerPoint,
			rows[0].bytesPerStream/rows[1].bytesPerStream, par[0][0]/par[1][0], par[0][1]/par[1][1])
	}
	b.WriteString("\nours/contrib: each column's ratio as is (Mpoints/s above 1x, the others below 1x favour otelgateway); " +
		"ns/point is wall time, cpu ns/point the process's CPU time (GC included); " +
		"4g = 4 goroutines, wall ns per point incl. batch resets\n")
	t.Log(b.String())
}
