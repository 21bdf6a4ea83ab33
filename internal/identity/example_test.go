package identity_test

import (
	"fmt"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/internal/identity"
)

// A series table keeps its authoritative state in a map keyed by the exact
// Set and puts a bounded cache in front of it: a hit costs one hash and one
// comparison, a miss (first sight or eviction) canonicalises once.
func ExampleCache() {
	type series struct{ total int64 }
	table := map[identity.Set]*series{} // authoritative: never evicted
	cache := identity.NewCache[*series](1024)
	const metricID = 1 // namespace: the registered metric the points belong to

	record := func(attrs pcommon.Map, v int64) {
		s, hit, _ := cache.GetOrCreate(metricID, identity.OfMap(attrs), attrs, func(set identity.Set) *series {
			if s, ok := table[set]; ok { // idempotent: the entry may have been evicted
				return s
			}
			s := &series{}
			table[set] = s
			return s
		})
		s.total += v
		fmt.Printf("hit=%v total=%d\n", hit, s.total)
	}

	a := pcommon.NewMap()
	a.PutStr("http.route", "/anything")
	a.PutInt("http.response.status_code", 200)
	b := pcommon.NewMap() // the same set, in another order
	b.PutInt("http.response.status_code", 200)
	b.PutStr("http.route", "/anything")

	record(a, 3)
	record(b, 4)
	fmt.Println("series:", len(table))
	// Output:
	// hit=false total=3
	// hit=true total=7
	// series: 1
}

func ExampleSet() {
	m := pcommon.NewMap()
	m.PutStr("route", "/a")
	m.PutInt("code", 200)
	set := identity.SetOf(m)

	other := pcommon.NewMap()
	other.PutInt("code", 200)
	other.PutStr("route", "/a")
	fmt.Println(set.Len(), set.Equal(other))

	back := pcommon.NewMap()
	set.CopyTo(back)
	fmt.Println(back.AsRaw())
	// Output:
	// 2 true
	// map[code:200 route:/a]
}
