package traffic

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// concurrentEvents is what TestAddIsExactConcurrently's goroutines add:
// per goroutine, batches of requests over 40 routes shared by all, so the
// goroutines update the same series at once. Every third request is
// traced; every 7th has a route longer than maxLabel (cut, and counted as
// truncated; cut, it is one of the shared routes); under kong every 11th
// has no route (not counted) and every 13th is superseded by its node's
// pushed metrics.
func concurrentEvents(goroutines, batches, batch int, superseded gateway.KongFamilySet) [][]gateway.Event {
	long := strings.Repeat("x", maxLabel+5)
	out := make([][]gateway.Event, goroutines*batches)
	for b := range out {
		evs := make([]gateway.Event, batch)
		for i := range evs {
			n := b*batch + i
			e := &evs[i]
			e.Reset()
			e.Kind, e.Gateway, e.Instance = gateway.KindKong, "kong", "node-1"
			e.Route = "/r" + strconv.Itoa(n%40)
			if n%7 == 0 {
				e.Route = "/r" + long
			}
			e.Method, e.StatusCode, e.Source = "GET", []int64{200, 200, 404, 503}[n%4], gateway.SourceUpstream
			e.TotalMS, e.UpstreamMS = float64(1+n%250), float64(n%200)
			e.RequestSize, e.ResponseSize = int64(n%1000), int64(n%3000)
			if n%3 == 0 {
				e.TraceID, e.SpanID = [16]byte{1, byte(n), byte(n >> 8)}, [8]byte{2, byte(n)}
			}
			if n%11 == 0 {
				e.Route = "" // kong: not counted; otel: a tuple of its own
			}
			if n%13 == 0 {
				e.Superseded = superseded
			}
		}
		out[b] = evs
	}
	return out
}

// maxLabel is TestAddIsExactConcurrently's MaxLabelBytes.
const maxLabel = 8

// summary is a window's points as comparable text, by family and label
// set: totals, counts, sums (to 9 digits), buckets, and how many exemplars each kept
// (which traced request a bucket keeps is a random draw; that each bucket
// with a traced request keeps one is not).
func summary(w *Window) map[string]string {
	out := map[string]string{}
	for i := range w.points {
		p := &w.points[i]
		f := &w.a.fams[p.fam]
		var buckets []uint64
		if f.hist && f.expoSize == 0 {
			buckets = p.counts(w.buckets, len(f.bounds)+1)
		}
		k := f.name + f.constVal + "|" + p.enc
		if _, dup := out[k]; dup {
			out[k+"|dup"] = "a second point of this series"
		}
		// Sums to 9 digits: a histogram's are of values scaled to seconds,
		// whose rounding depends on the order they were added in; a lost
		// or doubled event moves them by at least 1e-3 of a few tens.
		out[k] = fmt.Sprintf("%v %.9g %v %v %v", p.total, p.sum, p.count, buckets, p.exEnd-p.exStart)
	}
	return out
}

// Add from several goroutines at once counts exactly what one goroutine
// adding the same batches counts: every series' totals, sums, counts and
// buckets, the exemplars kept, and what Add returns (not counted,
// superseded, truncated), under every profile, over three windows: all the
// routes, then a few (the others' rows are let go, and every held tuple
// lets go of its rows), then all again (found again from the held tuples'
// encodings). Run with -race.
func TestAddIsExactConcurrently(t *testing.T) {
	const goroutines, batches, batch = 4, 25, 64
	allFams := gateway.KongFamilySet(1<<32 - 1)
	for _, prof := range []*profile{&otelProfile, &kongProfile, &apisixProfile} {
		t.Run(prof.name, func(t *testing.T) {
			in := concurrentEvents(goroutines, batches, batch, allFams)
			windows := [][][]gateway.Event{in, {in[0][:8]}, in}
			lim := Limits{MaxLabelBytes: maxLabel}
			serial, a := testAggregator(prof, lim), testAggregator(prof, lim)
			for wi, win := range windows {
				var want Counts
				for _, evs := range win {
					c := serial.Add(evs)
					want.NotCounted += c.NotCounted
					want.Superseded += c.Superseded
					want.Truncated += c.Truncated
				}
				if wi == 0 && (want.Truncated == 0 || prof == &kongProfile && (want.NotCounted == 0 || want.Superseded == 0)) {
					t.Fatalf("serial counts %+v: the events do not exercise truncation, not counted and superseded", want)
				}
				wantPoints := summary(serial.Take())

				got := make([]Counts, goroutines)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						<-start
						for b := g; b < len(win); b += goroutines {
							c := a.Add(win[b])
							got[g].NotCounted += c.NotCounted
							got[g].Superseded += c.Superseded
							got[g].Truncated += c.Truncated
							got[g].Overflowed += c.Overflowed
						}
					})
				}
				close(start)
				wg.Wait()
				var sum Counts
				for _, c := range got {
					sum.NotCounted += c.NotCounted
					sum.Superseded += c.Superseded
					sum.Truncated += c.Truncated
					sum.Overflowed += c.Overflowed
				}
				if sum != want {
					t.Errorf("window %d: concurrent Adds returned %+v in all, one goroutine %+v", wi, sum, want)
				}
				gotPoints := summary(a.Take())
				if len(gotPoints) != len(wantPoints) {
					t.Errorf("window %d: %d points, one goroutine %d", wi, len(gotPoints), len(wantPoints))
				}
				for k, w := range wantPoints {
					if g := gotPoints[k]; g != w {
						t.Errorf("window %d: series %q: %s, one goroutine %s", wi, k, g, w)
					}
				}
			}
		})
	}
}

// Under max_series, concurrent Adds hold exactly max_series tuples (no
// more: the bound is one count, whichever goroutine admits a tuple), fold
// every other event into the overflow tuple, and lose none: the requests
// counted are the events added, the overflow tuple's are the events Add
// says it overflowed.
func TestAddHoldsMaxTuplesConcurrently(t *testing.T) {
	const goroutines, batches, batch, maxTuples = 4, 25, 64, 10
	in := concurrentEvents(goroutines, batches, batch, 0)
	a := testAggregator(&otelProfile, Limits{MaxTuples: maxTuples, MaxGateways: 10, MaxLabelBytes: maxLabel})
	overflowed := make([]int64, goroutines)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for b := g; b < len(in); b += goroutines {
				overflowed[g] += a.Add(in[b]).Overflowed
			}
		})
	}
	close(start)
	wg.Wait()
	var over int64
	for _, n := range overflowed {
		over += n
	}
	if n := a.HeldTuples(); n != maxTuples {
		t.Errorf("%d tuples held, want max_series %d", n, maxTuples)
	}
	got := requestsByTuple(a.Take())
	var all int64
	for _, n := range got {
		all += n
	}
	if want := int64(goroutines * batches * batch); all != want {
		t.Errorf("%d requests counted, %d added", all, want)
	}
	if got["kong overflow"] != over || over == 0 {
		t.Errorf("overflow tuple counted %d requests, Add said %d overflowed", got["kong overflow"], over)
	}
	if len(got) != maxTuples+1 {
		t.Errorf("%d tuples in the window, want %d and the overflow tuple: %v", len(got), maxTuples, got)
	}
}
