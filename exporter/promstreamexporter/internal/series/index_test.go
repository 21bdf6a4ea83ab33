package series

import (
	"strconv"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// TestIndexProbesEndAmidTombstones: removals leave tombstones, inserts
// rebuild before the slots pass 3/4, so every lookup (a miss included)
// ends, and finds exactly the live keys, through many rounds of churn on
// hashes that differ only in their low bits.
func TestIndexProbesEndAmidTombstones(t *testing.T) {
	_, f, keys := healthFamily(t, 3000)
	for round := range 20 {
		for i := round % 3; i < len(keys); i += 3 {
			if !f.Remove(uint64(i), &keys[i]) {
				t.Fatalf("round %d: series %d not found", round, i)
			}
		}
		if p := f.index.slots.Load(); f.index.used*4 > len(*p)*3 {
			t.Fatalf("round %d: %d of %d slots used", round, f.index.used, len(*p))
		}
		for i := round % 3; i < len(keys); i += 3 {
			if e := f.index.find(&f.schemas, uint64(i), &keys[i]); e != nil {
				t.Fatalf("round %d: removed series %d still found", round, i)
			}
			create(t, f, keys, i, 1)
		}
		if f.index.live != len(keys) {
			t.Fatalf("round %d: %d live entries, want %d", round, f.index.live, len(keys))
		}
	}
	for i := range keys {
		if e := f.index.find(&f.schemas, uint64(i), &keys[i]); e == nil || e.s.removed() {
			t.Fatalf("series %d lost", i)
		}
	}
}

// TestConcurrentRemoveAndUpdates is for the race detector and the gone
// protocol: lock-free updates of some keys while others are removed,
// recreated and expired. At the end every key names at most one series,
// and the scrape holds exactly the table's series.
func TestConcurrentRemoveAndUpdates(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("m", "", exposition.TypeGauge)
	keys := make([]Key, 600)
	for i := range keys {
		keys[i] = Key{Context: kong, Attrs: pcommon.NewMap()}
		keys[i].Attrs.PutStr("route", strconv.Itoa(i))
	}
	upd := func(i int, now int64) {
		s, err := f.Series(uint64(i), &keys[i], now, labelList{{Name: "route", Value: strconv.Itoa(i)}})
		if err != nil {
			t.Error(err)
			return
		}
		s.SetValue(float64(now), now)
	}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for n := range 5000 {
				upd((n*7+w)%len(keys), int64(1000+n))
			}
		})
	}
	wg.Go(func() {
		for n := range 3000 {
			i := (n * 13) % len(keys)
			f.Remove(uint64(i), &keys[i])
		}
	})
	wg.Go(func() {
		for n := range 20 {
			tbl.Expire(int64(1000 + n*200))
		}
	})
	wg.Wait()
	seen := map[*Series]bool{}
	for i := range keys {
		if e := f.index.find(&f.schemas, uint64(i), &keys[i]); e != nil {
			if e.s.removed() || seen[e.s] {
				t.Fatalf("key %d: removed or shared series in the index", i)
			}
			seen[e.s] = true
		}
	}
	if int64(len(seen)) != tbl.Len() || f.index.live != len(seen) {
		t.Fatalf("index holds %d series (%d entries), Len %d", len(seen), f.index.live, tbl.Len())
	}
	if got := sampleLines(render(t, tbl)); got != tbl.Len() {
		t.Fatalf("rendered %d series, Len says %d", got, tbl.Len())
	}
}

// TestUpdateDoesNotAllocate: finding an existing series (the lock-free
// path every point of an existing series takes) allocates nothing.
func TestUpdateDoesNotAllocate(t *testing.T) {
	_, f, keys := healthFamily(t, 2000)
	var labels LabelSource = labelList{{Name: "unused", Value: "a hit never asks"}}
	i := 0
	locked := f.locked.Load()
	allocs := testing.AllocsPerRun(1000, func() {
		i = (i + 7) % len(keys)
		s, _ := f.Series(uint64(i), &keys[i], 2, labels)
		s.SetValue(1, 2)
	})
	if locked = f.locked.Load() - locked; allocs != 0 || locked != 0 {
		t.Fatalf("an update allocated %v times per call and took the family lock %d times; want 0, 0", allocs, locked)
	}
}
