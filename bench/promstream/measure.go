package promstream

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// Fetch scrapes once and returns the (decompressed) body.
func Fetch(addr string, gz bool) ([]byte, Response, error) {
	c := NewClient(addr)
	defer c.Close()
	var body bytes.Buffer
	resp, err := c.Scrape(gz, &body)
	if err != nil {
		return nil, resp, err
	}
	if !resp.Gzip {
		return body.Bytes(), resp, nil
	}
	zr, err := gzip.NewReader(&body)
	if err != nil {
		return nil, resp, err
	}
	plain, err := io.ReadAll(zr)
	return plain, resp, err
}

// Timing is the wall time of n scrapes after one warm-up scrape.
type Timing struct {
	Median, Min, Max time.Duration
	N                int
	Bytes            int64 // bytes on the wire per scrape
	Gzip             bool  // the server answered with Content-Encoding: gzip
}

// TimeScrapes times n scrapes (each: request written → last body byte read)
// on one keep-alive connection, after a warm-up scrape.
func TimeScrapes(addr string, gz bool, n int) (Timing, error) {
	c := NewClient(addr)
	defer c.Close()
	resp, err := c.Scrape(gz, nil) // warm-up: connection, pools, sorted state
	if err != nil {
		return Timing{}, err
	}
	t := Timing{N: n, Bytes: resp.Bytes, Gzip: resp.Gzip}
	d := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		resp, err := c.Scrape(gz, nil)
		if err != nil {
			return t, err
		}
		d = append(d, resp.Duration)
	}
	slices.Sort(d)
	t.Median, t.Min, t.Max = d[len(d)/2], d[0], d[len(d)-1]
	return t, nil
}

// Allocs is what one scrape allocates in this process. The raw client does
// not allocate after its first scrape, so this is the server side: the HTTP
// server's per-request objects plus the contender's handler.
type Allocs struct {
	Objects float64 // heap objects allocated per scrape (MemStats.Mallocs delta)
	Bytes   float64 // bytes allocated per scrape (MemStats.TotalAlloc delta)
	// PeakHeap is the largest growth of heap object memory (live objects
	// plus not-yet-swept garbage, runtime/metrics
	// /memory/classes/heap/objects:bytes) over its value after a GC, sampled
	// every 200µs during a scrape; the maximum over n scrapes.
	PeakHeap uint64
	// Chunks is the number of HTTP chunks per scrape: net/http's
	// chunkWriter formats each chunk header with fmt.Fprintf("%x\r\n",
	// len(p)), one 8-byte allocation per chunk, so this many of Objects are
	// net/http's framing, a function of body size and flush size.
	Chunks float64
}

// MeasureAllocs runs one warm-up scrape, a GC, then n scrapes between two
// runtime.ReadMemStats; then n more scrapes, each after a GC with the heap
// sampler running, and keeps the largest growth.
func MeasureAllocs(addr string, gz bool, n int) (Allocs, error) {
	var a Allocs
	c := NewClient(addr)
	defer c.Close()
	if _, err := c.Scrape(gz, nil); err != nil {
		return a, err
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	chunks := 0
	for i := 0; i < n; i++ {
		resp, err := c.Scrape(gz, nil)
		if err != nil {
			return a, err
		}
		chunks += resp.Chunks
	}
	runtime.ReadMemStats(&after)
	a.Chunks = float64(chunks) / float64(n)
	a.Objects = float64(after.Mallocs-before.Mallocs) / float64(n)
	a.Bytes = float64(after.TotalAlloc-before.TotalAlloc) / float64(n)

	for i := 0; i < n; i++ {
		p, err := peakHeap(c, gz)
		if err != nil {
			return a, err
		}
		a.PeakHeap = max(a.PeakHeap, p)
	}
	return a, nil
}

// peakHeap runs a GC, then one scrape while a goroutine samples heap object
// bytes every 200µs, and returns the largest growth over the post-GC value.
func peakHeap(c *Client, gz bool) (uint64, error) {
	runtime.GC()
	sample := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	rtmetrics.Read(sample)
	base := sample[0].Value.Uint64()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []rtmetrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(200 * time.Microsecond)
		defer t.Stop()
		for {
			rtmetrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	_, err := c.Scrape(gz, nil)
	close(stop)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base, err
	}
	return 0, err
}

// FirstScrape is the first scrape after loading: duration and what the
// server allocated (caches some contenders fill lazily).
type FirstScrape struct {
	Duration       time.Duration
	Objects, Bytes uint64
}

// MeasureFirstScrape scrapes once on a fresh connection (the client's
// buffers allocated beforehand, so the MemStats delta is the server's plus
// the connection's).
func MeasureFirstScrape(addr string) (FirstScrape, error) {
	c := NewClient(addr)
	defer c.Close()
	conn, err := c.dial(addr)
	if err != nil {
		return FirstScrape{}, err
	}
	c.conn, c.br = conn, bufio.NewReaderSize(conn, 64<<10)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, err := c.Scrape(false, nil)
	runtime.ReadMemStats(&after)
	return FirstScrape{Duration: resp.Duration, Objects: after.Mallocs - before.Mallocs, Bytes: after.TotalAlloc - before.TotalAlloc}, err
}

// Latencies summarises ConsumeMetrics durations.
type Latencies struct {
	N             int
	P50, P99, Max time.Duration
	Over1ms       int // calls that took longer than 1 ms
	Scrapes       int // scrapes completed concurrently (0 when idle)
	// Diagnostics for outliers, process-wide over the phase (runtime/metrics):
	// time goroutines spent blocked on sync.Mutex/RWMutex, the longest
	// time a runnable goroutine waited for a CPU (histogram bucket upper
	// bound), and GC cycles.
	MutexWait, SchedMax time.Duration
	GCs                 uint64
}

var diagSamples = []string{"/sync/mutex/wait/total:seconds", "/sched/latencies:seconds", "/gc/cycles/total:gc-cycles"}

func readDiag() []rtmetrics.Sample {
	s := make([]rtmetrics.Sample, len(diagSamples))
	for i, n := range diagSamples {
		s[i].Name = n
	}
	rtmetrics.Read(s)
	return s
}

func (l *Latencies) setDiag(before, after []rtmetrics.Sample) {
	if before[0].Value.Kind() == rtmetrics.KindFloat64 {
		l.MutexWait = time.Duration((after[0].Value.Float64() - before[0].Value.Float64()) * 1e9)
	}
	if before[1].Value.Kind() == rtmetrics.KindFloat64Histogram {
		hb, ha := before[1].Value.Float64Histogram(), after[1].Value.Float64Histogram()
		for i := len(ha.Counts) - 1; i >= 0; i-- {
			if ha.Counts[i] > hb.Counts[i] {
				l.SchedMax = time.Duration(ha.Buckets[i+1] * 1e9)
				break
			}
		}
	}
	if before[2].Value.Kind() == rtmetrics.KindUint64 {
		l.GCs = after[2].Value.Uint64() - before[2].Value.Uint64()
	}
}

// IngestBatchRoutes is the size of the ingest batch, in routes.
const IngestBatchRoutes = 10

// MeasureIngest times ConsumeMetrics of a 10-route batch (request counters
// and latency histograms of existing series, new values), paced 200µs
// apart. With underScrape, another goroutine scrapes back to back the whole
// time, and the run lasts until at least minScrapes scrapes completed (or
// maxDur passed). bump0 offsets the counter values so repeated runs keep
// counters increasing.
func MeasureIngest(s *Server, w Workload, calls int, underScrape bool, minScrapes int, maxDur time.Duration, bump0 int) (Latencies, error) {
	var l Latencies
	if s.Consume == nil {
		return l, errors.New(s.Key + " has no ConsumeMetrics")
	}
	ctx := context.Background()
	from := w.Routes / 2
	var (
		stop       atomic.Bool
		scrapes    atomic.Int64
		scrapeFail atomic.Bool
		scrapeEr   error // written by the scraper, read after wg.Wait
		wg         sync.WaitGroup
	)
	if underScrape {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewClient(s.Addr)
			defer c.Close()
			for i := 0; i < 100000 && !stop.Load(); i++ {
				if _, err := c.Scrape(false, nil); err != nil {
					scrapeEr = err
					scrapeFail.Store(true)
					return
				}
				scrapes.Add(1)
			}
		}()
		// Let the first scrape get going before timing.
		time.Sleep(5 * time.Millisecond)
	}
	d := make([]time.Duration, 0, calls)
	diag := readDiag()
	start := time.Now()
	var err error
	for i := 0; ; i++ {
		if i >= calls && (!underScrape || scrapes.Load() >= int64(minScrapes) || time.Since(start) > maxDur) {
			break
		}
		if i >= 50*calls || scrapeFail.Load() {
			break
		}
		md := w.RouteBatch(from, from+IngestBatchRoutes, bump0+i+1)
		t0 := time.Now()
		err = s.Consume(ctx, md)
		d = append(d, time.Since(t0))
		if err != nil {
			break
		}
		time.Sleep(200 * time.Microsecond)
	}
	l.setDiag(diag, readDiag())
	stop.Store(true)
	wg.Wait()
	if err == nil {
		err = scrapeEr
	}
	slices.Sort(d)
	l.N = len(d)
	if l.N > 0 {
		l.P50, l.P99, l.Max = d[l.N/2], d[l.N*99/100], d[l.N-1]
	}
	for _, x := range d {
		if x > time.Millisecond {
			l.Over1ms++
		}
	}
	l.Scrapes = int(scrapes.Load())
	return l, err
}

// Retained is the memory the contender keeps per stored counter series.
type Retained struct {
	Series         int
	BytesPerSeries float64 // heap growth after GC / series
	PrefixLen      float64 // mean length of the exposed `name{labels}` of a counter line
}

// MeasureRetained starts contender key empty, feeds it only the request
// counters of w, and reports the live-heap growth (after GC) per series
// against the mean length of the rendered `name{labels}` block.
func MeasureRetained(key string, w Workload) (Retained, error) {
	r := Retained{Series: w.RequestSeries()}
	s, err := Start(key, Workload{})
	if err != nil {
		return r, err
	}
	defer s.Close()
	md := w.CounterMetrics()
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	if err := s.Consume(context.Background(), md); err != nil {
		return r, err
	}
	after := heap()
	runtime.KeepAlive(md)
	r.BytesPerSeries = (float64(after) - float64(before)) / float64(r.Series)
	body, _, err := Fetch(s.Addr, false)
	if err != nil {
		return r, err
	}
	e, err := Parse(body)
	if err != nil {
		return r, err
	}
	if n := e.Families[RequestsName]; n > 0 {
		r.PrefixLen = float64(e.RequestPrefixBytes) / float64(n)
	}
	return r, nil
}

// Encoded is one kind of scrape of MeasureEncodings: the median wall time
// and process CPU of its scrapes, and its body bytes on the wire.
type Encoded struct {
	Wall, CPU time.Duration
	Bytes     int64
	N         int
	// Encoding is the Content-Encoding answered ("" for none).
	Encoding string
}

// EncodingShards is the shard count MeasureEncodings scrapes.
const EncodingShards = 4

// Change says what changes before each scrape of MeasureEncodings.
type Change int

const (
	// Unchanged: nothing (the table as loaded).
	Unchanged Change = iota
	// EighthOfRoutes: the request counters and latency histograms of one
	// route in 8 (every 8th), new values.
	EighthOfRoutes
	// AllRoutes: the request counters and latency histograms of every
	// route, new values (the health gauges, a third of the lines, stay).
	AllRoutes
)

// ScrapeKind is one kind of scrape: its encoding and shard.
type ScrapeKind struct {
	Encoding string // Accept-Encoding: "", "gzip" or "zstd"
	Shard    int    // -1: the whole table
}

// MeasureEncodings scrapes s in every kind (whole plain, gzip and zstd;
// each of EncodingShards shards plain and gzip) after each change, n
// rounds of each, the kinds interleaved within a round so that the
// machine's noise falls on all alike. A changing case consumes its batch
// (untimed) before every scrape, so each scrape finds the change new.
// CPU is this process's (getrusage) across the scrape: the server's, plus
// the client reading the body; a changing case runs a GC after its batch,
// so that the batch's garbage is not collected during the scrape.
func MeasureEncodings(s *Server, w Workload, n int, changes []Change) (map[Change]map[ScrapeKind]Encoded, error) {
	kinds := []ScrapeKind{{"", -1}, {"gzip", -1}, {"zstd", -1}}
	for i := range EncodingShards {
		kinds = append(kinds, ScrapeKind{"", i}, ScrapeKind{"gzip", i})
	}
	c := NewClient(s.Addr)
	defer c.Close()
	reqs := make(map[ScrapeKind][]byte, len(kinds))
	for _, k := range kinds {
		path := "/metrics"
		if k.Shard >= 0 {
			path += "?shard=" + strconv.Itoa(k.Shard) + "&shards=" + strconv.Itoa(EncodingShards)
		}
		reqs[k] = c.Request(path, k.Encoding)
	}
	out := make(map[Change]map[ScrapeKind]Encoded, len(changes))
	bump := 1_000_000 // past what MeasureIngest's batches used
	for _, change := range changes {
		if change != Unchanged && s.Consume == nil {
			continue
		}
		var batch func() pmetric.Metrics
		switch change {
		case EighthOfRoutes:
			batch = func() pmetric.Metrics { return w.routeBatchEvery(8, bump) }
		case AllRoutes:
			batch = func() pmetric.Metrics { return w.RouteBatch(0, w.Routes, bump) }
		}
		wall := make(map[ScrapeKind][]time.Duration, len(kinds))
		cpu := make(map[ScrapeKind][]time.Duration, len(kinds))
		res := make(map[ScrapeKind]Encoded, len(kinds))
		for round := -1; round < n; round++ { // round -1: warm-up
			for _, k := range kinds {
				if batch != nil {
					bump++
					if err := s.Consume(context.Background(), batch()); err != nil {
						return nil, err
					}
					// The batch's garbage collected now, not by background
					// workers during the scrape, whose CPU they would add to.
					runtime.GC()
				}
				c0 := processCPU()
				resp, err := c.Do(reqs[k], nil)
				if err != nil {
					return nil, fmt.Errorf("%+v: %w", k, err)
				}
				used := processCPU() - c0
				if round < 0 {
					continue
				}
				wall[k] = append(wall[k], resp.Duration)
				cpu[k] = append(cpu[k], used)
				e := res[k]
				e.Bytes, e.N = resp.Bytes, len(wall[k])
				switch {
				case resp.Gzip:
					e.Encoding = "gzip"
				case resp.Zstd:
					e.Encoding = "zstd"
				}
				res[k] = e
			}
		}
		for _, k := range kinds {
			e := res[k]
			e.Wall, e.CPU = median(wall[k]), median(cpu[k])
			res[k] = e
		}
		out[change] = res
	}
	return out, nil
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}

// processCPU returns the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
