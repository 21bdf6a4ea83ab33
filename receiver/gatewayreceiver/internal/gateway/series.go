package gateway

import "github.com/cespare/xxhash/v2"

// seriesIndex finds the series a mapping call already wrote, so points of
// one series (Kong's request counts per method, Envoy's duplicate stats)
// merge into one. A 64-bit hash alone is not identity: entries that share a
// hash are chained, and the caller's eq confirms a hit on the labels
// themselves, so two label sets that collide stay two series.
//
// Not safe for concurrent use; reset between calls reuses its memory.
type seriesIndex struct {
	heads map[uint64]int32
	// next chains the entries of one hash: next[i] is the entry added
	// before i with the same hash, -1 for none.
	next []int32
	d    xxhash.Digest
}

func (x *seriesIndex) reset() {
	if x.heads == nil {
		x.heads = make(map[uint64]int32)
	}
	clear(x.heads)
	x.next = x.next[:0]
}

// hash starts a series key; feed it with str, then sum.
func (x *seriesIndex) hash() { x.d.Reset() }

// str adds one component (a name or a label value) to the key, with a
// separator byte no UTF-8 text contains, so ("ab","c") ≠ ("a","bc").
func (x *seriesIndex) str(s string) {
	_, _ = x.d.WriteString(s)
	_, _ = x.d.Write(sep[:])
}

var sep = [1]byte{0xff}

// num adds a number (a metric's index) to the key.
func (x *seriesIndex) num(v uint32) {
	b := [4]byte{byte(v), byte(v >> 8), byte(v >> 16), byte(v >> 24)}
	_, _ = x.d.Write(b[:])
}

func (x *seriesIndex) sum() uint64 { return x.d.Sum64() }

// find returns the entry of hash h for which eq holds, -1 when none does.
func (x *seriesIndex) find(h uint64, eq func(int32) bool) int32 {
	i, ok := x.heads[h]
	if !ok {
		return -1
	}
	for ; i >= 0; i = x.next[i] {
		if eq(i) {
			return i
		}
	}
	return -1
}

// add records a new entry of hash h and returns its number (0, 1, 2… in
// the order added).
func (x *seriesIndex) add(h uint64) int32 {
	i := int32(len(x.next))
	prev, ok := x.heads[h]
	if !ok {
		prev = -1
	}
	x.next = append(x.next, prev)
	x.heads[h] = i
	return i
}
