package traffic

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// BenchmarkAggregate is aggregation alone on the cached path, one op per
// event: Kong-shaped events (as bench/receiver's workload: 10k routes, 90 %
// 200s, a balancer target each) whose tuples were all seen before the timer
// starts, each prepared and recorded (add: Add's work per event, without
// its batch) under one lock held for the run. allocs/op is allocations per
// event (issue 5: 0; with exponential histograms too, issue 14); cpu-ns/event
// the thread's CPU time per event, which waiting for a core on a shared
// machine does not inflate. bench/receiver's TestReport runs it too;
// BenchmarkUnmarshal is its yardstick.
// Compare runs with: go test -run '^$' -bench Aggregate -count 6 ./receiver/gatewayreceiver/internal/traffic | benchstat -
func BenchmarkAggregate(b *testing.B) {
	evs := aggregateEvents()
	// traced: the same events carrying their span's trace and span ids, so
	// histogram observations also keep their buckets' exemplars.
	traced := tracedEvents(evs)
	// exponential: the otel profile with histogram.exponential (max_size 160).
	exponential := otelProfile.withDurationHistograms(nil, defaultExpoMaxSize)
	// The -windows runs end a window (Take, outside the timer and the CPU
	// figure) after every pass over the events: 1.6 requests per route
	// and window, so most traced observations are their bucket's first
	// in the window (always kept); the others run one window of ever
	// more requests, where a bucket's exemplar is rarely replaced.
	for _, c := range []struct {
		name    string
		prof    *profile
		evs     []gateway.Event
		windows bool
	}{
		{ProfileOTel, &otelProfile, evs, false}, {ProfileKong, &kongProfile, evs, false},
		{ProfileOTel + "-traced", &otelProfile, traced, false}, {ProfileKong + "-traced", &kongProfile, traced, false},
		{ProfileOTel + "-windows", &otelProfile, evs, true}, {ProfileKong + "-windows", &kongProfile, evs, true},
		{ProfileOTel + "-traced-windows", &otelProfile, traced, true}, {ProfileKong + "-traced-windows", &kongProfile, traced, true},
		{ProfileOTel + "-exponential", exponential, evs, false}, {ProfileOTel + "-exponential-traced", exponential, traced, false},
	} {
		prof, evs := c.prof, c.evs
		b.Run(c.name, func(b *testing.B) {
			a := testAggregator(prof, Limits{MaxLabelBytes: defaultMaxLabelBytes})
			a.mu.Lock()
			defer a.mu.Unlock()
			for i := range evs {
				a.add(&evs[i]) // first sightings: the only allocating pass
			}
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var takeCPU int64
			cpu0 := testutil.ThreadCPU()
			i := 0
			for b.Loop() {
				a.add(&evs[i])
				if i++; i == len(evs) {
					i = 0
					if c.windows {
						b.StopTimer()
						t0 := testutil.ThreadCPU()
						a.mu.Unlock()
						a.Take()
						a.mu.Lock()
						takeCPU += testutil.ThreadCPU() - t0
						b.StartTimer()
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/event")
			b.ReportMetric(float64(testutil.ThreadCPU()-cpu0-takeCPU)/float64(b.N), "cpu-ns/event")
		})
	}
}

// aggregateEvents are BenchmarkAggregate's events: Kong-shaped requests
// (as bench/receiver's workload: 10k routes, 90 % 200s, a balancer target
// each), every route, scattered.
func aggregateEvents() []gateway.Event {
	const routes, events = 10_000, 16_384
	methods := [...]string{"GET", "POST", "GET", "PUT", "GET", "DELETE", "GET", "PATCH"}
	statuses := [...]int64{200, 200, 200, 200, 200, 200, 200, 200, 200, 201, 404, 503}
	evs := make([]gateway.Event, events)
	for i := range evs {
		route := i * 7919 % routes
		e := &evs[i]
		e.Reset()
		e.Kind, e.Gateway, e.Instance = gateway.KindKong, "kong", "node-1"
		e.Route = "/api/v1/r" + strconv.Itoa(route)
		e.Method, e.StatusCode, e.Source = methods[route%len(methods)], statuses[i%len(statuses)], gateway.SourceUpstream
		e.TotalMS, e.UpstreamMS = float64(2+i%300), float64(1+i%300)
		e.Upstream, e.Target, e.TargetPort = "svc-"+strconv.Itoa(route%100)+".internal", "10.0.0."+strconv.Itoa(1+route%4), 8080
	}
	return evs
}

// tracedEvents is a copy of evs, each with its span's trace and span ids.
func tracedEvents(evs []gateway.Event) []gateway.Event {
	traced := make([]gateway.Event, len(evs))
	copy(traced, evs)
	for i := range traced {
		traced[i].TraceID = [16]byte{1, byte(i), byte(i >> 8)}
		traced[i].SpanID = [8]byte{2, byte(i), byte(i >> 8)}
	}
	return traced
}

// kongBodyEvents is the requests of one of kongBodies' exports.
const kongBodyEvents = 256

// kongBodies is evs as a Kong (≥ 3.5) node exports them over OTLP/HTTP
// protobuf: exports of kongBodyEvents requests, a `kong` root SERVER span
// with the attributes of docs/gateways.md §1a and a `kong.balancer` child
// each (bench/kongload's shape), the events' trace and span ids.
func kongBodies(tb testing.TB, evs []gateway.Event) [][]byte {
	var bodies [][]byte
	base := pcommon.Timestamp(1_782_900_000_000_000_000)
	for first := 0; first < len(evs); first += kongBodyEvents {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		res := rs.Resource().Attributes()
		res.PutStr("service.name", "kong")
		res.PutStr("service.instance.id", "9343ac04-81d6-4ac8-bb5a-c7322c823368")
		res.PutStr("service.version", "3.9.1")
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("kong-internal")
		ss.Scope().SetVersion("0.1.0")
		for i := first; i < min(first+kongBodyEvents, len(evs)); i++ {
			e := &evs[i]
			start := base + pcommon.Timestamp(i)*1e6
			root := ss.Spans().AppendEmpty()
			root.SetTraceID(e.TraceID)
			root.SetSpanID(e.SpanID)
			root.SetName("kong")
			root.SetKind(ptrace.SpanKindServer)
			root.SetStartTimestamp(start)
			root.SetEndTimestamp(start + pcommon.Timestamp(e.TotalMS*1e6))
			a := root.Attributes()
			a.PutStr("http.method", e.Method)
			a.PutStr("http.url", "http://api.example.com"+e.Route+"?page="+strconv.Itoa(i%10))
			a.PutStr("http.host", "api.example.com")
			a.PutStr("http.scheme", "http")
			a.PutStr("http.flavor", "1.1")
			a.PutStr("http.client_ip", "10.1.2."+strconv.Itoa(i%256))
			a.PutStr("net.peer.ip", "10.1.2."+strconv.Itoa(i%256))
			a.PutStr("kong.request.id", "7c0b0a2f5e4d3c2b1a09f8e7d6c5b4a3")
			a.PutInt("http.status_code", e.StatusCode)
			a.PutStr("http.route", e.Route)
			child := ss.Spans().AppendEmpty()
			child.SetTraceID(e.TraceID)
			child.SetSpanID(pcommon.SpanID{3, byte(i), byte(i >> 8)})
			child.SetParentSpanID(e.SpanID)
			child.SetName("kong.balancer")
			child.SetKind(ptrace.SpanKindClient)
			child.SetStartTimestamp(start + pcommon.Timestamp((e.TotalMS-e.UpstreamMS)*1e6))
			child.SetEndTimestamp(start + pcommon.Timestamp(e.TotalMS*1e6))
			c := child.Attributes()
			c.PutDouble("try_count", 1)
			c.PutStr("net.peer.ip", e.Target)
			c.PutDouble("net.peer.port", float64(e.TargetPort))
			c.PutStr("net.peer.name", e.Upstream)
		}
		body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
		if err != nil {
			tb.Fatal(err)
		}
		bodies = append(bodies, body)
	}
	return bodies
}

// BenchmarkUnmarshal is the yardstick of BenchmarkAggregate (issue 28 item
// 3: aggregation and exemplar capture as a ratio to it, run side by side):
// pdata's unmarshal of BenchmarkAggregate's traced events as a Kong node
// exports them (kongBodies), per event.
// Compare runs with: go test -run '^$' -bench 'Aggregate$|Unmarshal' -count 6 ./receiver/gatewayreceiver/internal/traffic
func BenchmarkUnmarshal(b *testing.B) {
	evs := aggregateEvents()
	bodies := kongBodies(b, tracedEvents(evs))
	req := ptraceotlp.NewExportRequest()
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := testutil.ThreadCPU()
	i := 0
	for b.Loop() {
		if err := req.UnmarshalProto(bodies[i]); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(bodies) {
			i = 0
		}
	}
	// One op is one export of kongBodyEvents events: per event, as the
	// aggregation's.
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kongBodyEvents), "ns/event")
	b.ReportMetric(float64(testutil.ThreadCPU()-cpu0)/float64(b.N*kongBodyEvents), "cpu-ns/event")
}

// BenchmarkAggregateNew is BenchmarkAggregate's events, each one a tuple
// the aggregator has not seen (one op per event, a fresh aggregator every
// 16,384 events, outside the timer): the new-tuple path, against the
// cached path of BenchmarkAggregate (issue 15: within 3×). It reports
// allocs per new tuple as allocs/op. As in BenchmarkAggregate, the lock is
// taken once for many events (Add takes it once per batch).
//
// otel and kong run under bounds as the default config's, max_series
// raised to hold every event's tuple (an overflowed event is a cached one):
// the maps are sized from the bounds. The -unbounded runs have none
// (max_series: 0), so new tuples also grow the maps. The -reuse runs keep
// one aggregator whose tuples all expire between rounds (tuple_expiry of
// one window, two flushes outside the timer): new tuples in their place
// reuse the bundles and sets of the expired ones, as under churn. The
// -cached runs are the same events again, every tuple already held: the
// cached path measured on the very tuples the new path creates.
func BenchmarkAggregateNew(b *testing.B) {
	const events = 16_384
	evs := distinctEvents(events)
	bounded := Limits{MaxTuples: events, MaxGateways: defaultMaxGateways, MaxLabelBytes: defaultMaxLabelBytes}
	expiring := Limits{MaxTuples: events, MaxGateways: defaultMaxGateways, ExpiryWindows: 1, MaxLabelBytes: defaultMaxLabelBytes}
	for _, c := range []struct {
		name   string
		prof   *profile
		lim    Limits
		cached bool
	}{
		{ProfileOTel, &otelProfile, bounded, false}, {ProfileKong, &kongProfile, bounded, false},
		{ProfileOTel + "-cached", &otelProfile, bounded, true}, {ProfileKong + "-cached", &kongProfile, bounded, true},
		{ProfileOTel + "-unbounded", &otelProfile, Limits{}, false}, {ProfileKong + "-unbounded", &kongProfile, Limits{}, false},
		{ProfileOTel + "-reuse", &otelProfile, expiring, false}, {ProfileKong + "-reuse", &kongProfile, expiring, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := testAggregator(c.prof, c.lim)
			a.mu.Lock()
			if c.cached {
				for i := range evs {
					a.add(&evs[i])
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if i == len(evs) && c.cached {
					i = 0
				} else if i == len(evs) {
					b.StopTimer()
					a.mu.Unlock()
					if c.lim.ExpiryWindows > 0 {
						a.Take() // the round's window
						a.Take() // a window without events: every tuple expires
						if n := a.HeldTuples(); n != 0 {
							b.Fatalf("%d tuples held after expiry", n)
						}
					} else {
						a = testAggregator(c.prof, c.lim)
					}
					a.mu.Lock()
					i = 0
					b.StartTimer()
				}
				a.add(&evs[i])
				i++
			}
			if a.counts.Overflowed != 0 {
				b.Fatalf("%d events overflowed: not new tuples", a.counts.Overflowed)
			}
			a.mu.Unlock()
		})
	}
}

// BenchmarkToMetrics renders one emitted chunk (the receiver's emitChunk,
// 512 points of the otel and kong profiles, every family of 512 tuples'
// worth of events) as pdata: what a flush allocates per point, which the
// pipeline then drops. ns/op and B/op are per chunk.
// Compare runs with: go test -run '^$' -bench ToMetrics -count 6 ./receiver/gatewayreceiver/internal/traffic | benchstat -
func BenchmarkToMetrics(b *testing.B) {
	const chunk = 512
	evs := distinctEvents(chunk)
	for _, prof := range []*profile{&otelProfile, &kongProfile} {
		b.Run(prof.name, func(b *testing.B) {
			a := testAggregator(prof, Limits{})
			a.Add(evs)
			w := a.Take()
			n := min(w.Len(), chunk)
			b.ReportAllocs()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu0 := testutil.ThreadCPU()
			for b.Loop() {
				_ = w.Metrics(0, n, 1, 2)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/point")
			b.ReportMetric(float64(testutil.ThreadCPU()-cpu0)/float64(b.N*n), "cpu-ns/point")
		})
	}
}

// distinctEvents returns n Kong requests, each of its own route: n tuples.
func distinctEvents(n int) []gateway.Event {
	evs := make([]gateway.Event, n)
	for i := range evs {
		e := &evs[i]
		e.Reset()
		e.Kind, e.Gateway, e.Instance = gateway.KindKong, "kong", "node-1"
		e.Route = "/api/v1/r" + strconv.Itoa(i)
		e.Method, e.StatusCode, e.Source = "GET", 200, gateway.SourceUpstream
		e.TotalMS, e.UpstreamMS = float64(2+i%300), float64(1+i%300)
		e.Upstream, e.Target, e.TargetPort = "svc-"+strconv.Itoa(i%100)+".internal", "10.0.0."+strconv.Itoa(1+i%4), 8080
	}
	return evs
}

// BenchmarkAdd is BenchmarkAggregate's events through Add, in batches of
// kongBodyEvents (one export's worth, as the receiver calls it), from as
// many goroutines as GOMAXPROCS: one op is one batch, ns/event the wall
// time per event of all goroutines together, cpu-ns/event the process's
// CPU time per event (every goroutine's, the garbage collector's, and what
// waiting for the lock spins), cores the CPU time over the wall time. Run
// with -cpu 1,2: the ratio of the two ns/event is how aggregation alone
// scales with a second core (issue 28 item 6), what the aggregator's lock
// leaves of it; on a machine shared with other work, cores says how much
// of a second core the run got.
// Compare runs with: go test -run '^$' -bench 'Add$' -cpu 1,2 -count 6 ./receiver/gatewayreceiver/internal/traffic
func BenchmarkAdd(b *testing.B) {
	evs := aggregateEvents()
	traced := tracedEvents(evs)
	for _, c := range []struct {
		name string
		prof *profile
		evs  []gateway.Event
	}{
		{ProfileOTel, &otelProfile, evs}, {ProfileKong, &kongProfile, evs},
		{ProfileOTel + "-traced", &otelProfile, traced},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := testAggregator(c.prof, Limits{MaxLabelBytes: defaultMaxLabelBytes})
			a.Add(c.evs) // first sightings: the only allocating pass
			batches := len(c.evs) / kongBodyEvents
			var next atomic.Int64 // each goroutine starts at another batch
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := testutil.ProcessCPU()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(7)) % batches
				for pb.Next() {
					a.Add(c.evs[i*kongBodyEvents : (i+1)*kongBodyEvents])
					if i++; i == batches {
						i = 0
					}
				}
			})
			cpu := testutil.ProcessCPU() - cpu0
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*kongBodyEvents), "ns/event")
			b.ReportMetric(float64(cpu)/float64(b.N*kongBodyEvents), "cpu-ns/event")
			b.ReportMetric(float64(cpu)/float64(b.Elapsed().Nanoseconds()), "cores")
		})
	}
}
