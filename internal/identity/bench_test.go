package identity

import (
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Compare runs with:
//
//	go test -run '^$' -bench 'Cache|Set' -benchmem -count 6 ./internal/identity | tee new.txt && benchstat old.txt new.txt

// BenchmarkCacheGetHit is the hot path given the attribute hash (computed
// once per point by the caller): probe, confirm by comparing 6 attributes.
//
// Sizes: 1 (one hot series: the pure cost of probe + compare), 1k label
// sets (the AI gateway's hot set, in L2)
// and 100k (memory-bound: each hit touches cold cache lines of the slot,
// the entry and the caller's attributes).
func BenchmarkCacheGetHit(b *testing.B) {
	for _, n := range []int{1, 1_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			c, maps := filledCache(n)
			hashes := make([]uint64, len(maps))
			for i, m := range maps {
				hashes[i] = OfMap(m)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := c.Get(1, hashes[i], maps[i]); !ok {
					b.Fatal("miss")
				}
				i++
				if i == len(maps) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkCacheHashAndGetHit adds hashing the 6 attributes (OfMap) to the
// hit: what one point costs end to end.
func BenchmarkCacheHashAndGetHit(b *testing.B) {
	for _, n := range []int{1, 1_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			c, maps := filledCache(n)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, ok := c.Get(1, OfMap(maps[i]), maps[i]); !ok {
					b.Fatal("miss")
				}
				i++
				if i == len(maps) {
					i = 0
				}
			}
		})
	}
}

// BenchmarkCacheMiss is the slow path of a label set not cached: probe,
// canonicalise (sort, encode: allocates), create, add (evicting).
func BenchmarkCacheMiss(b *testing.B) {
	c := NewCache[int](1024)
	maps := attrMaps(100_000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m := maps[i]
		c.GetOrCreate(uint64(i), OfMap(m), m, func(Set) int { return i })
		i++
		if i == len(maps) {
			i = 0
		}
	}
}

func BenchmarkSetOf(b *testing.B) {
	m := gatewayAttrs("/anything")
	b.ReportAllocs()
	for b.Loop() {
		_ = SetOf(m)
	}
}

func attrMaps(n int) []pcommon.Map {
	maps := make([]pcommon.Map, n)
	for i := range maps {
		maps[i] = gatewayAttrs("/route/" + strconv.Itoa(i))
	}
	return maps
}

func filledCache(n int) (*Cache[int], []pcommon.Map) {
	c := NewCache[int](n * 2)
	maps := attrMaps(n)
	for i, m := range maps {
		c.Add(1, OfMap(m), m, SetOf(m), i)
	}
	return c, maps
}

// BenchmarkCacheFill creates n keys in a new cache of the cumulative
// processor's default bound (200k): what a collector's first minutes cost
// the cache, the table's allocation (and any growth) included. Per key.
func BenchmarkCacheFill(b *testing.B) {
	for _, n := range []int{20_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			maps := attrMaps(n)
			hashes := make([]uint64, n)
			for i, m := range maps {
				hashes[i] = OfMap(m)
			}
			var ko KeyOrder
			b.ReportAllocs()
			for b.Loop() {
				c := NewCache[int](200_000)
				for i, m := range maps {
					c.Create(1, hashes[i], m, &ko, func(Set) int { return i })
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
		})
	}
}
