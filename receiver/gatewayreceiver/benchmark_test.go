package gatewayreceiver

import (
	"context"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// BenchmarkIngest counts exports of 100 Kong requests (root + balancer span
// each) spread over 50 label tuples: the receiver's per-span hot path.
// Compare runs with: go test -run '^$' -bench Ingest -count 6 ./receiver/gatewayreceiver | benchstat -
func BenchmarkIngest(b *testing.B) {
	r, err := newReceiver(createDefaultConfig(), receivertest.NewNopSettings(metadata.Type), consumertest.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	td := ptrace.NewTraces()
	for i := range 100 {
		kongExport("GET", "/route/"+strconv.Itoa(i%50), 200).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	ctx := context.Background()
	r.ingest(ctx, td) // first sighting of every tuple: the only allocating pass
	b.ReportAllocs()
	for b.Loop() {
		r.ingest(ctx, td)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*200), "ns/span")
}

// BenchmarkAggregate is aggregation alone on the cached path, one op per
// event: Kong-shaped events (as bench/receiver's workload: 10k routes, 90 %
// 200s, a balancer target each) whose tuples were all seen before the timer
// starts, added under one lock as addEvents does. allocs/op is allocations
// per event (issue 5: 0; with exponential histograms too, issue 14). bench/receiver's TestReport runs it too.
// Compare runs with: go test -run '^$' -bench Aggregate -count 6 ./receiver/gatewayreceiver | benchstat -
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
		{profileOTel, &otelProfile, evs}, {profileKong, &kongProfile, evs},
		{profileOTel + "-traced", &otelProfile, traced}, {profileKong + "-traced", &kongProfile, traced},
		{profileOTel + "-exponential", exponential, evs}, {profileOTel + "-exponential-traced", exponential, traced},
	} {
		prof, evs := c.prof, c.evs
		b.Run(c.name, func(b *testing.B) {
			a := newAggregator(prof, dimensions{}, limits{maxLabelBytes: defaultMaxLabelValueLength})
			a.mu.Lock()
			defer a.mu.Unlock()
			for i := range evs {
				a.addLocked(&evs[i]) // first sightings: the only allocating pass
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				a.addLocked(&evs[i])
				if i++; i == len(evs) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkAggregateNew is BenchmarkAggregate's events, each one a tuple
// the aggregator has not seen (one op per event, a fresh aggregator every
// 16,384 events, outside the timer): the new-tuple path, against the
// cached path of BenchmarkAggregate (issue 15: within 3×). It reports
// allocs per new tuple as allocs/op. As in BenchmarkAggregate, the lock is
// taken once for many events (addEvents takes it once per batch).
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
	bounded := limits{maxSeries: events, maxGateways: defaultMaxGateways, maxLabelBytes: defaultMaxLabelValueLength}
	expiring := limits{maxSeries: events, maxGateways: defaultMaxGateways, expiryWindows: 1, maxLabelBytes: defaultMaxLabelValueLength}
	for _, c := range []struct {
		name   string
		prof   *profile
		lim    limits
		cached bool
	}{
		{profileOTel, &otelProfile, bounded, false}, {profileKong, &kongProfile, bounded, false},
		{profileOTel + "-cached", &otelProfile, bounded, true}, {profileKong + "-cached", &kongProfile, bounded, true},
		{profileOTel + "-unbounded", &otelProfile, limits{}, false}, {profileKong + "-unbounded", &kongProfile, limits{}, false},
		{profileOTel + "-reuse", &otelProfile, expiring, false}, {profileKong + "-reuse", &kongProfile, expiring, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			a := newAggregator(c.prof, dimensions{}, c.lim)
			a.mu.Lock()
			if c.cached {
				for i := range evs {
					a.addLocked(&evs[i])
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
					if c.lim.expiryWindows > 0 {
						a.take() // the round's window
						a.take() // a window without events: every tuple expires
						if n := a.heldTuples(); n != 0 {
							b.Fatalf("%d tuples held after expiry", n)
						}
					} else {
						a = newAggregator(c.prof, dimensions{}, c.lim)
					}
					a.mu.Lock()
					i = 0
					b.StartTimer()
				}
				a.addLocked(&evs[i])
				i++
			}
			if a.overflowed != 0 {
				b.Fatalf("%d events overflowed: not new tuples", a.overflowed)
			}
			a.mu.Unlock()
		})
	}
}

// BenchmarkToMetrics renders one emitted chunk (emitChunk points of the
// otel and kong profiles, every family of 512 tuples' worth of events) as
// pdata: what a flush allocates per point, which the pipeline then drops.
// ns/op and B/op are per point.
func BenchmarkToMetrics(b *testing.B) {
	evs := distinctEvents(emitChunk)
	for _, prof := range []*profile{&otelProfile, &kongProfile} {
		b.Run(prof.name, func(b *testing.B) {
			a := newAggregator(prof, dimensions{}, limits{})
			a.mu.Lock()
			for i := range evs {
				a.addLocked(&evs[i])
			}
			a.mu.Unlock()
			points, buckets := a.take()
			points = points[:min(len(points), emitChunk)]
			b.ReportAllocs()
			for b.Loop() {
				_ = a.toMetrics(points, buckets, 1, 2)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(points)), "ns/point")
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
