package series

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// healthFamily builds Kong's kong_upstream_target_health family with n
// series (5 labels, as the gateway writes them) and returns its keys; key i
// has hash i.
func healthFamily(tb testing.TB, n int) (*Table, *Family, []Key) {
	tb.Helper()
	tbl := New(Options{})
	f, _ := tbl.Family("kong_upstream_target_health", "Health status of targets of upstream.", exposition.TypeGauge)
	keys := make([]Key, n)
	for i := range n {
		keys[i] = Key{Context: kong, Attrs: pcommon.NewMap()}
		keys[i].Attrs.PutStr("target", strconv.Itoa(i))
		create(tb, f, keys, i, 1)
	}
	return tbl, f, keys
}

// create (re)creates series i of a healthFamily at time now.
func create(tb testing.TB, f *Family, keys []Key, i int, now int64) {
	addr := "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250) + ":8080"
	s, err := f.Series(uint64(i), &keys[i], now, labelList{
		{Name: "address", Value: addr}, {Name: "state", Value: "healthy"}, {Name: "subsystem", Value: "http"},
		{Name: "target", Value: addr}, {Name: "upstream", Value: "upstream-" + strconv.Itoa(i/2)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	s.SetValue(1, now)
}

// removed returns the indexes of k series spread evenly over n, as a
// deleted upstream's targets are spread over a family that grew over time.
func removed(n, k int) []int {
	out := make([]int, k)
	for j := range out {
		out[j] = j * n / k
	}
	return out
}

// BenchmarkRemove removes one series from a family of n gauge series (and,
// with the timer stopped, puts every 1,000 removed back so the family stays
// at n). Compare with:
// go test -run '^$' -bench Remove -count 6 ./exporter/promstreamexporter/internal/series | benchstat -
func BenchmarkRemove(b *testing.B) {
	for _, n := range []int{10_000, 80_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			_, f, keys := healthFamily(b, n)
			gone := removed(n, 1000)
			j := 0
			b.ReportAllocs()
			for b.Loop() {
				i := gone[j]
				if !f.Remove(uint64(i), &keys[i]) {
					b.Fatalf("series %d not found", i)
				}
				if j++; j == len(gone) {
					b.StopTimer()
					for _, i := range gone {
						create(b, f, keys, i, 1)
					}
					j = 0
					b.StartTimer()
				}
			}
		})
	}
}

// stall is the latency of the updates one ingest goroutine made while
// something else ran.
type stall struct {
	updates       int
	p50, p99, max time.Duration
}

func (s stall) String() string {
	return strconv.Itoa(s.updates) + " updates: p50 " + s.p50.String() + ", p99 " + s.p99.String() + ", max " + s.max.String()
}

// ingest updates the series keep[0], keep[1], ... round robin, as the
// exporter does for each point (find the series under the family lock, store
// the value), until stop is closed and at least minUpdates were made; it
// returns the latency of each update.
func ingest(tb testing.TB, f *Family, keys []Key, keep []int, minUpdates int, now int64, stop <-chan struct{}) stall {
	lat := make([]time.Duration, 0, minUpdates)
	labels := labelList{{Name: "unused", Value: "a hit never asks"}}
	for n := 0; ; n++ {
		if n >= minUpdates {
			select {
			case <-stop:
				slices.Sort(lat)
				return stall{updates: len(lat), p50: lat[len(lat)/2], p99: lat[len(lat)*99/100], max: lat[len(lat)-1]}
			default:
			}
		}
		i := keep[n%len(keep)]
		start := time.Now()
		s, err := f.Series(uint64(i), &keys[i], now, labels)
		if err != nil {
			tb.Fatal(err)
		}
		s.SetValue(float64(n), now)
		lat = append(lat, time.Since(start))
	}
}

// TestRemovalStall measures what removing 1,000 series of an 80,000-series
// family (a Kong upstream with its targets deleted), one Remove each and
// then by expiry, costs the ingestion of the family's other series. It logs
// the figures (run with -v; the benchmark of record is BenchmarkRemove) and
// asserts only what removal must leave behind:
//
//	go test -run RemovalStall -v -count 1 ./exporter/promstreamexporter/internal/series
func TestRemovalStall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an 80,000-series family")
	}
	const n, k = 80_000, 1000
	tbl, f, keys := healthFamily(t, n)
	gone := removed(n, k)
	isGone := make(map[int]bool, k)
	for _, i := range gone {
		isGone[i] = true
	}
	var keep []int
	for i := range n {
		if !isGone[i] {
			keep = append(keep, i)
		}
	}
	const minUpdates = 100_000
	closed := make(chan struct{})
	close(closed)
	idle := ingest(t, f, keys, keep, minUpdates, 2, closed)

	// Remove, one series at a time, while another goroutine ingests.
	var took atomic.Int64
	run := func(remove func()) stall {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			start := time.Now()
			remove()
			took.Store(int64(time.Since(start)))
			close(stop)
		})
		s := ingest(t, f, keys, keep, 1, 2, stop)
		wg.Wait()
		return s
	}
	during := run(func() {
		for _, i := range gone {
			if !f.Remove(uint64(i), &keys[i]) {
				t.Errorf("series %d not found", i)
			}
		}
	})
	removeTook := time.Duration(took.Load())
	if got := tbl.Len(); got != n-k {
		t.Fatalf("Len = %d after removing %d of %d, want %d", got, k, n, n-k)
	}

	// Put them back as stale series and let expiry take them.
	for _, i := range gone {
		create(t, f, keys, i, 1)
	}
	var expired int
	expiry := run(func() { expired = tbl.Expire(2) })
	expireTook := time.Duration(took.Load())
	if expired != k || tbl.Len() != n-k {
		t.Fatalf("Expire removed %d (Len %d), want %d (Len %d)", expired, tbl.Len(), k, n-k)
	}
	for _, i := range keep[:100] {
		if s, _ := f.Series(uint64(i), &keys[i], 3, nil); s == nil || s.dead {
			t.Fatalf("series %d lost", i)
		}
	}

	t.Logf("family of %d series, %d removed", n, k)
	t.Logf("idle:             %v", idle)
	t.Logf("during Remove:    %v (1,000 Remove calls took %v)", during, removeTook)
	t.Logf("during Expire:    %v (Expire took %v)", expiry, expireTook)
	t.Logf("p99 during Remove / idle: %.2f", float64(during.p99)/float64(idle.p99))
}
