package traffic

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// BenchmarkAggregate is aggregation alone on the cached path, one op per
// event: Kong-shaped events (as bench/receiver's workload: 10k routes, 90 %
// 200s, a balancer target each) whose tuples were all seen before the timer
// starts, added under one lock as Add does. allocs/op is allocations per
// event (issue 5: 0; with exponential histograms too, issue 14); cpu-ns/op
// the thread's CPU time per event, which waiting for a core on a shared
// machine does not inflate. bench/receiver's TestReport runs it too.
// Compare runs with: go test -run '^$' -bench Aggregate -count 6 ./receiver/gatewayreceiver/internal/traffic | benchstat -
func BenchmarkAggregate(b *testing.B) {
	const routes, events = 10_000, 16_384
	methods := [...]string{"GET", "POST", "GET", "PUT", "GET", "DELETE", "GET", "PATCH"}
	statuses := [...]int64{200, 200, 200, 200, 200, 200, 200, 200, 200, 201, 404, 503}
	evs := make([]gateway.Event, events)
	for i := range evs {
		route := i * 7919 % routes // every route, scattered
		e := &evs[i]
		e.Reset()
		e.Kind, e.Gateway, e.Instance = gateway.KindKong, "kong", "node-1"
		e.Route = "/api/v1/r" + strconv.Itoa(route)
		e.Method, e.StatusCode, e.Source = methods[route%len(methods)], statuses[i%len(statuses)], gateway.SourceUpstream
		e.TotalMS, e.UpstreamMS = float64(2+i%300), float64(1+i%300)
		e.Upstream, e.Target, e.TargetPort = "svc-"+strconv.Itoa(route%100)+".internal", "10.0.0."+strconv.Itoa(1+route%4), 8080
	}
	// traced: the same events carrying their span's trace and span ids, so
	// every histogram observation also keeps its bucket's exemplar.
	traced := make([]gateway.Event, len(evs))
	copy(traced, evs)
	for i := range traced {
		traced[i].TraceID = [16]byte{1, byte(i), byte(i >> 8)}
		traced[i].SpanID = [8]byte{2, byte(i), byte(i >> 8)}
	}
	// exponential: the otel profile with histogram.exponential (max_size 160).
	exponential := otelProfile.withDurationHistograms(nil, defaultExpoMaxSize)
	for _, c := range []struct {
		name string
		prof *profile
		evs  []gateway.Event
	}{
		{ProfileOTel, &otelProfile, evs}, {ProfileKong, &kongProfile, evs},
		{ProfileOTel + "-traced", &otelProfile, traced}, {ProfileKong + "-traced", &kongProfile, traced},
		{ProfileOTel + "-exponential", exponential, evs}, {ProfileOTel + "-exponential-traced", exponential, traced},
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
			cpu0 := testutil.ThreadCPU()
			i := 0
			for b.Loop() {
				a.add(&evs[i])
				if i++; i == len(evs) {
					i = 0
				}
			}
			b.ReportMetric(float64(testutil.ThreadCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
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
