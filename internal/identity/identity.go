// Package identity hashes OpenTelemetry attribute sets into series identities.
//
// Hash contract: every function here returns an in-process 64-bit hash,
// stable for the life of the process only (strings hash with the runtime's
// hash/maphash under a per-process seed, several times faster than xxhash on
// short attribute keys and values): never persist it, send it, or compare it
// across processes. What must agree across processes and restarts uses a
// stable hash instead: the exporter's ?shard= selects series by xxhash of
// their rendered labels (exporter/promstreamexporter/internal/series).
//
// Attribute maps hash order-independently (a map is a set of key/value pairs),
// without sorting and without allocating, so the hot path can hash attributes
// exactly as they arrive. A hash is never an identity on its own: callers
// confirm a hit by comparing the real labels, because two label sets can
// collide: Set is the exact, canonical encoding to compare against, and Cache
// the bounded, collision-safe map from label set to handle built on both.
package identity // import "github.com/otelgateway/otelgateway/internal/identity"

import (
	"math"

	"hash/maphash"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// seed is this process's hash/maphash seed.
var seed = maphash.MakeSeed()

// Seeds that separate value kinds, so Str("1"), Int(1) and Double(1) differ.
const (
	kindEmpty uint64 = 0x9e3779b97f4a7c15 + iota
	kindStr
	kindBool
	kindInt
	kindDouble
	kindBytes
	kindSlice
	kindMap
)

// mix is the splitmix64 finalizer: it spreads every input bit over the output,
// which keeps the commutative sum in OfMap from cancelling structure out.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// Combine folds b into a, order-dependently. Use it to chain identities
// (resource, then scope, then metric, then attributes).
func Combine(a, b uint64) uint64 {
	return mix(a*31 + b + 0x632be59bd9b4e019)
}

// OfString hashes one string.
func OfString(s string) uint64 {
	return maphash.String(seed, s)
}

// OfValue hashes one attribute value, including its type.
func OfValue(v pcommon.Value) uint64 {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return Combine(kindStr, maphash.String(seed, v.Str()))
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return Combine(kindBool, 1)
		}
		return Combine(kindBool, 0)
	case pcommon.ValueTypeInt:
		return Combine(kindInt, uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		return Combine(kindDouble, math.Float64bits(v.Double()))
	case pcommon.ValueTypeBytes:
		return Combine(kindBytes, maphash.Bytes(seed, v.Bytes().AsRaw()))
	case pcommon.ValueTypeSlice:
		h := kindSlice
		s := v.Slice()
		for i := 0; i < s.Len(); i++ {
			h = Combine(h, OfValue(s.At(i)))
		}
		return h
	case pcommon.ValueTypeMap:
		return Combine(kindMap, OfMap(v.Map()))
	default:
		return kindEmpty
	}
}

// OfMap hashes an attribute map independently of the order of its entries:
// each key/value pair is hashed and mixed on its own, and the pair hashes are
// added, so no sort and no allocation is needed.
//
// Each pair costs two string hashes and one mix: the key's hash is spread by
// an odd multiplier before the value's is folded in, so swapping a key and a
// value, or moving a value to another key, changes the pair's hash.
func OfMap(m pcommon.Map) uint64 {
	var sum uint64
	for k, v := range m.All() {
		var vh uint64
		if v.Type() == pcommon.ValueTypeStr {
			vh = maphash.String(seed, v.Str()) ^ kindStr // the common case, inlined
		} else {
			vh = OfValue(v)
		}
		sum += mix(maphash.String(seed, k)*0x9e3779b97f4a7c15 ^ vh)
	}
	return Combine(uint64(m.Len()), sum)
}
