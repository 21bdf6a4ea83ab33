package series

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
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
type stall struct{ lat []time.Duration }

func (s *stall) String() string {
	slices.Sort(s.lat)
	over := len(s.lat) - sort.Search(len(s.lat), func(i int) bool { return s.lat[i] > time.Millisecond })
	q := func(f float64) time.Duration { return s.lat[int(f*float64(len(s.lat)-1))] }
	return fmt.Sprintf("%7d updates: p50 %v, p99 %v, p99.9 %v, max %v, %d over 1ms",
		len(s.lat), q(0.5), q(0.99), q(0.999), s.lat[len(s.lat)-1], over)
}

func (s *stall) p99() time.Duration {
	slices.Sort(s.lat)
	return s.lat[(len(s.lat)-1)*99/100]
}

// ingest updates the series keep[0], keep[1], ... round robin, as the
// exporter does for each point (find the series under the family lock,
// store the value), until stop is closed and at least minUpdates were made,
// and adds the latency of each update to s.
func (s *stall) ingest(tb testing.TB, f *Family, keys []Key, keep []int, minUpdates int, stop <-chan struct{}) {
	labels := labelList{{Name: "unused", Value: "a hit never asks"}}
	for n := 0; ; n++ {
		if n >= minUpdates {
			select {
			case <-stop:
				return
			default:
			}
		}
		i := keep[n%len(keep)]
		start := time.Now()
		series, err := f.Series(uint64(i), &keys[i], 2, labels)
		if err != nil {
			tb.Fatal(err)
		}
		series.SetValue(float64(n), 2)
		s.lat = append(s.lat, time.Since(start))
	}
}

// TestRemovalStall measures what removing 1,000 series of an 80,000-series
// family (a Kong upstream with its targets deleted) costs the ingestion of
// the family's other series: the latency of updates made by one goroutine
// while another removes the 1,000 with one Remove each, or by expiry; 20
// rounds of each, the series put back between rounds.
//
// It asserts issue 11's contract in a form a loaded machine cannot make
// flaky: no update of an existing series took the family lock
// (Family.locked) while Remove or Expire ran, so none can have waited for
// either. That is the cause the timings showed (p99 4.2 times idle, updates
// over 1 ms, while Remove held the lock the lookups took); timings
// themselves are only logged (run with -v; the benchmark of record for
// Remove is BenchmarkRemove), as on a shared machine they measure the
// scheduler as much as the table. It also asserts what removal must leave
// behind:
//
//	go test -run RemovalStall -v -count 1 ./exporter/promstreamexporter/internal/series
func TestRemovalStall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an 80,000-series family")
	}
	const n, k, rounds = 80_000, 1000, 20
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
	closed := make(chan struct{})
	close(closed)
	idle := &stall{lat: make([]time.Duration, 0, 200_000)}
	idle.ingest(t, f, keys, keep, 200_000, closed)

	// run has one goroutine remove while this one ingests, and returns how
	// long the removal took.
	// It also returns how many times the updates took the family lock.
	run := func(s *stall, remove func()) (time.Duration, int64) {
		locked := f.locked.Load()
		stop := make(chan struct{})
		var took time.Duration
		var wg sync.WaitGroup
		wg.Go(func() {
			start := time.Now()
			remove()
			took = time.Since(start)
			close(stop)
		})
		s.ingest(t, f, keys, keep, 1, stop)
		wg.Wait()
		return took, f.locked.Load() - locked
	}
	during, expiry, other := &stall{}, &stall{}, &stall{}
	var removeTook, expireTook, otherTook, longestRemove time.Duration
	var lockedRemove, lockedExpire, lockedOther int64
	add := func(sum *time.Duration, locked *int64) func(time.Duration, int64) {
		return func(d time.Duration, n int64) { *sum += d; *locked += n }
	}
	for range rounds {
		// For reference: a second ingest goroutine updating 5,000 other
		// series of the family, back to back.
		add(&otherTook, &lockedOther)(run(other, func() {
			labels := labelList{{Name: "unused", Value: "a hit never asks"}}
			for _, i := range keep[len(keep)-5000:] {
				s, _ := f.Series(uint64(i), &keys[i], 2, labels)
				s.SetValue(1, 2)
			}
		}))
		add(&removeTook, &lockedRemove)(run(during, func() {
			for _, i := range gone {
				start := time.Now()
				if !f.Remove(uint64(i), &keys[i]) {
					t.Errorf("series %d not found", i)
				}
				longestRemove = max(longestRemove, time.Since(start))
			}
		}))
		if got := tbl.Len(); got != n-k {
			t.Fatalf("Len = %d after removing %d of %d, want %d", got, k, n, n-k)
		}
		// Put them back as stale series and let expiry take them.
		for _, i := range gone {
			create(t, f, keys, i, 1)
		}
		var expired int
		add(&expireTook, &lockedExpire)(run(expiry, func() { expired = tbl.Expire(2) }))
		if expired != k || tbl.Len() != n-k {
			t.Fatalf("Expire removed %d (Len %d), want %d (Len %d)", expired, tbl.Len(), k, n-k)
		}
		for _, i := range gone {
			create(t, f, keys, i, 2)
		}
	}
	if s, _ := f.Series(uint64(keep[0]), &keys[keep[0]], 3, nil); s == nil || s.removed() {
		t.Fatalf("series %d lost", keep[0])
	}

	t.Logf("family of %d gauge series, %d removed, %d rounds", n, k, rounds)
	t.Logf("idle:          %v", idle)
	t.Logf("during Remove: %v (1,000 Remove calls took %v, the longest %v)", during, removeTook/rounds, longestRemove)
	t.Logf("during Expire: %v (Expire took %v)", expiry, expireTook/rounds)
	t.Logf("during ingest: %v (5,000 updates by another goroutine took %v)", other, otherTook/rounds)
	t.Logf("p99 during Remove / idle: %.2f; during Expire / idle: %.2f",
		float64(during.p99())/float64(idle.p99()), float64(expiry.p99())/float64(idle.p99()))
	t.Logf("family lock taken by updates of existing series: %d during Remove, %d during Expire, %d beside another ingest goroutine",
		lockedRemove, lockedExpire, lockedOther)
	if lockedRemove != 0 || lockedExpire != 0 || lockedOther != 0 {
		t.Errorf("updates of existing series took the family lock %d times during Remove, %d during Expire, %d beside another writer; want 0: they must find their series without it",
			lockedRemove, lockedExpire, lockedOther)
	}
}

// TestRemoveUnlinksEveryKey: removing a series takes every key that shares
// it out of the index, and leaves the keys that share its hash chain.
func TestRemoveUnlinksEveryKey(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("m", "", exposition.TypeGauge)
	key := func(attr, route string) *Key {
		k := &Key{Context: kong, Attrs: pcommon.NewMap()}
		k.Attrs.PutStr(attr, route)
		return k
	}
	labels := labelList{{Name: "job", Value: "kong"}, {Name: "route", Value: "/a"}}
	// Two keys that render alike (attributes http.route and route), in one
	// hash chain with a third series.
	a, _ := f.Series(7, key("route", "/a"), 1, labels)
	alias, _ := f.Series(7, key("http.route", "/a"), 1, labels)
	set(t, f, 7, "/b", 2, 1)
	if a != alias || tbl.Len() != 2 {
		t.Fatalf("two keys rendering alike made %d series", tbl.Len())
	}
	if !f.Remove(7, key("http.route", "/a")) {
		t.Fatal("Remove by the second key found nothing")
	}
	if f.Remove(7, key("route", "/a")) {
		t.Fatal("the first key still found the removed series")
	}
	if got, want := render(t, tbl), "# TYPE m gauge\nm{job=\"kong\",route=\"/b\"} 2\n"; got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if set(t, f, 7, "/b", 3, 2) {
		t.Fatal("the series sharing the hash chain was lost")
	}
	if b, _ := f.Series(7, key("route", "/a"), 2, labels); b == a || tbl.Len() != 2 {
		t.Fatal("setting the removed key again did not create a new series")
	}
	if f.index.live != 2 || len(f.byLabels) != 2 || len(f.aliases) != 0 {
		t.Fatalf("indexes hold %d keys, %d label sets, %d aliased series; want 2, 2, 0", f.index.live, len(f.byLabels), len(f.aliases))
	}
}
