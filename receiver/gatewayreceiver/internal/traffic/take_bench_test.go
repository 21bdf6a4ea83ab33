package traffic

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// BenchmarkTakePause is what a flush costs ingest (issue 28 item 2): one op
// is one Take of a window in which every one of n tuples was used (the
// otel profile, default limits without max_tuples), while another
// goroutine adds batches of 64 events of those tuples (the cached path)
// as fast as it can. take-ms is the Take's wall time; max-add-ms the
// longest Add call that overlapped it (Add waits for the aggregator's
// lock: with a Take that holds it throughout, about take-ms);
// quiet-max-add-ms the longest in as long again after it, without a Take
// (what the machine itself adds); adds/round the batches added in both.
// Run with: go test -run '^$' -bench TakePause -benchtime 3x ./receiver/gatewayreceiver/internal/traffic
func BenchmarkTakePause(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) { takePause(b, n) })
	}
}

func takePause(b *testing.B, n int) {
	lim := defaultLimits
	lim.MaxTuples = 0
	a := testAggregator(&otelProfile, lim)
	routes := make([]string, n)
	for i := range routes {
		routes[i] = "/api/v1/r" + strconv.Itoa(i)
	}
	batch := make([]gateway.Event, 64)
	fill := func(batch []gateway.Event, from int) {
		for i := range batch {
			batch[i] = otelEvent("kong", routes[(from+i)%n])
		}
	}
	touchAll := func() {
		for i := 0; i < n; i += len(batch) {
			fill(batch, i)
			a.Add(batch)
		}
	}
	touchAll()
	a.Take() // the window's arrays grown, as after a first flush
	var takeNs, maxAddNs, quietNs, adds int64
	for b.Loop() {
		b.StopTimer()
		touchAll()
		b.StartTimer()
		// An Add that started before the Take returned overlapped it
		// (takeEnd is 0 until then); later ones are the quiet period's.
		var stop atomic.Bool
		var takeEnd atomic.Int64
		var maxMid, maxQuiet, count atomic.Int64
		done := make(chan struct{})
		started := make(chan struct{})
		go func() {
			defer close(done)
			evs := make([]gateway.Event, 64)
			close(started)
			for i := 0; !stop.Load(); i += len(evs) {
				fill(evs, i)
				t0 := time.Now()
				a.Add(evs)
				d := int64(time.Since(t0))
				m := &maxMid
				if end := takeEnd.Load(); end != 0 && t0.UnixNano() >= end {
					m = &maxQuiet
				}
				if d > m.Load() {
					m.Store(d)
				}
				count.Add(1)
			}
		}()
		<-started
		t0 := time.Now()
		a.Take()
		d := int64(time.Since(t0))
		takeEnd.Store(time.Now().UnixNano())
		// As long again without a Take: the longest Add the machine
		// itself causes (scheduling, other processes).
		time.Sleep(time.Duration(d))
		stop.Store(true)
		<-done
		takeNs += d
		maxAddNs = max(maxAddNs, maxMid.Load())
		quietNs = max(quietNs, maxQuiet.Load())
		adds += count.Load()
	}
	b.ReportMetric(float64(takeNs)/float64(b.N)/1e6, "take-ms")
	b.ReportMetric(float64(maxAddNs)/1e6, "max-add-ms")
	b.ReportMetric(float64(quietNs)/1e6, "quiet-max-add-ms")
	b.ReportMetric(float64(adds)/float64(b.N), "adds/round")
}
