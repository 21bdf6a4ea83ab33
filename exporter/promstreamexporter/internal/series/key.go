package series

import (
	"encoding/binary"
	"math"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// packedAttrs is an index entry's copy of the attributes it was created
// with, kept to confirm hash hits. The attribute keys of a family repeat from
// series to series, so they are stored once per family as a schema (the keys
// in arrival order) and each entry keeps only its schema number and values:
// about the size of the values themselves.
//
// Encoding: uvarint schema number, then per attribute, in schema order, a
// type byte and the value (string: uvarint length + bytes; int, double: 8
// bytes little-endian; bool: 1 byte; other types: their AsString form as a
// string).
type packedAttrs string

const (
	packedStr byte = iota
	packedInt
	packedDouble
	packedBool
	packedOther
)

// schemas interns the key sequences of one family.
//
// Concurrency contract: of (which may add a schema) is called under the
// family's lock; keys (which equal reads, through index.find) may run at
// any time without it. The list is append-only and published through an
// atomic pointer: of appends into spare capacity beyond every published
// length (or into a new array), then publishes the longer slice, so a
// reader only ever reads schemas published before its load.
type schemas struct {
	list  atomic.Pointer[[][]string] // schema number → keys in order
	index map[string]int             // joined keys → schema number (under the family's lock)
}

// keys returns the published schemas.
func (sc *schemas) keys() [][]string {
	if p := sc.list.Load(); p != nil {
		return *p
	}
	return nil
}

// of returns the schema number of attrs' key sequence, adding it if new;
// scratch is reused to build the lookup key. The caller holds the family's
// lock.
func (sc *schemas) of(attrs pcommon.Map, scratch []byte) (int, []byte) {
	b := scratch[:0]
	for k := range attrs.All() {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	if n, ok := sc.index[string(b)]; ok {
		return n, b
	}
	if sc.index == nil {
		sc.index = make(map[string]int)
	}
	keys := make([]string, 0, attrs.Len())
	for k := range attrs.All() {
		// Copy: a key may point into the buffer the request was decoded from.
		keys = append(keys, strings.Clone(k))
	}
	list := sc.keys()
	n := len(list)
	list = append(list, keys) // never overwrites an element a reader can see
	sc.list.Store(&list)
	sc.index[string(b)] = n
	return n, b
}

// pack encodes attrs under schema number n into scratch and returns it;
// the caller keeps an exact-size copy (newText: a series keeps it for life,
// so no slack is worth it).
func pack(scratch []byte, n int, attrs pcommon.Map) []byte {
	b := binary.AppendUvarint(scratch[:0], uint64(n))
	for _, v := range attrs.All() {
		switch v.Type() {
		case pcommon.ValueTypeStr:
			b = append(b, packedStr)
			b = binary.AppendUvarint(b, uint64(len(v.Str())))
			b = append(b, v.Str()...)
		case pcommon.ValueTypeInt:
			b = append(b, packedInt)
			b = binary.LittleEndian.AppendUint64(b, uint64(v.Int()))
		case pcommon.ValueTypeDouble:
			b = append(b, packedDouble)
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v.Double()))
		case pcommon.ValueTypeBool:
			b = append(b, packedBool)
			if v.Bool() {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		default:
			s := v.AsString()
			b = append(b, packedOther)
			b = binary.AppendUvarint(b, uint64(len(s)))
			b = append(b, s...)
		}
	}
	return b
}

// equalAttrs reports whether attrs holds exactly the packed attributes t
// (packedAttrs) in the same key order (a source that reorders its
// attributes gets one entry per order, found through the series' rendered
// labels). Allocation free for scalar values. A method of the text, which
// it decodes itself, so that a lookup (index.find, entry.matches inlined)
// makes one call, as it did when an entry kept a string.
func (t text) equalAttrs(sc *schemas, attrs pcommon.Map) bool {
	p := packedAttrs(t.String())
	n, used := uvarint(string(p))
	list := sc.keys()
	if used <= 0 || int(n) >= len(list) {
		return false
	}
	keys := list[n]
	if len(keys) != attrs.Len() {
		return false
	}
	p = p[used:]
	i := 0
	for k, v := range attrs.All() {
		if keys[i] != k || len(p) == 0 {
			return false
		}
		i++
		var ok bool
		if ok, p = p.valueEqual(v); !ok {
			return false
		}
	}
	return true
}

// valueEqual compares the value at the start of p with v and returns the
// rest of p.
func (p packedAttrs) valueEqual(v pcommon.Value) (bool, packedAttrs) {
	typ := p[0]
	p = p[1:]
	switch typ {
	case packedStr, packedOther:
		vl, used := uvarint(string(p))
		if used <= 0 || used+int(vl) > len(p) {
			return false, p
		}
		val := string(p[used : used+int(vl)])
		rest := p[used+int(vl):]
		if typ == packedStr {
			return v.Type() == pcommon.ValueTypeStr && val == v.Str(), rest
		}
		t := v.Type()
		return t != pcommon.ValueTypeStr && t != pcommon.ValueTypeInt && t != pcommon.ValueTypeDouble &&
			t != pcommon.ValueTypeBool && val == v.AsString(), rest
	case packedInt, packedDouble:
		if len(p) < 8 {
			return false, p
		}
		u := le64(p)
		if typ == packedInt {
			return v.Type() == pcommon.ValueTypeInt && u == uint64(v.Int()), p[8:]
		}
		return v.Type() == pcommon.ValueTypeDouble && u == math.Float64bits(v.Double()), p[8:]
	case packedBool:
		if len(p) < 1 {
			return false, p
		}
		return v.Type() == pcommon.ValueTypeBool && (p[0] == 1) == v.Bool(), p[1:]
	default:
		return false, p
	}
}

// uvarint decodes a uvarint from the start of s (binary.Uvarint for strings).
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		b := s[i]
		if b < 0x80 {
			return x | uint64(b)<<shift, i + 1
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
	}
	return 0, 0
}

func le64(s packedAttrs) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(s[i])
	}
	return v
}
