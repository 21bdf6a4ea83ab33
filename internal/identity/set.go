package identity

import (
	"encoding/binary"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Set is the canonical, immutable encoding of one attribute set: the exact
// identity that a 64-bit hash only approximates.
//
// Encoding: uvarint(number of entries), then per entry, sorted by key
// (byte-wise): uvarint(len(key)), key, then the value as one type byte
// followed by
//
//	Str, Bytes  uvarint(len), bytes
//	Bool        one byte, 0 or 1
//	Int         8 bytes, little-endian two's complement
//	Double      8 bytes, little-endian IEEE 754 bits (so NaN equals NaN, -0 differs from +0)
//	Slice       uvarint(len), then each element as a value
//	Map         a nested Set encoding (sorted)
//	Empty       nothing
//
// Two attribute maps with the same entries in any order have equal
// encodings, and equal encodings mean equal entries; a map with a duplicated
// key (invalid OTLP) keeps both entries, so it only ever equals itself through
// the encoding (Equal against the pcommon.Map reports false, which costs the
// caller a slow path, never a wrong identity).
//
// The zero Set is the empty attribute set. A Set is a string, so it is
// comparable and can key a Go map; it is safe for concurrent use.
type Set struct {
	enc string
}

// Value types as encoded; the numbers are part of the encoding.
const (
	tagEmpty byte = iota
	tagStr
	tagBool
	tagInt
	tagDouble
	tagBytes
	tagSlice
	tagMap
)

// SetOf returns the canonical Set of m. It sorts and allocates: call it on a
// cache miss, never per point.
func SetOf(m pcommon.Map) Set {
	if m.Len() == 0 {
		return Set{}
	}
	return Set{enc: string(appendMap(nil, m))}
}

// String returns the encoding itself (binary, not for display). It is meant
// for keying maps and for tests.
func (s Set) String() string { return s.enc }

// Len returns the number of entries.
func (s Set) Len() int {
	d := decoder{s: s.enc}
	return d.uvarint()
}

func appendMap(dst []byte, m pcommon.Map) []byte {
	keys := make([]string, 0, m.Len())
	for k := range m.All() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for i, k := range keys {
		// A duplicated key appears once per occurrence; Get returns the first
		// value, so take the n-th occurrence's value for the n-th copy.
		v := nthValue(m, k, countBefore(keys, i))
		dst = appendString(dst, k)
		dst = appendValue(dst, v)
	}
	return dst
}

func countBefore(keys []string, i int) int {
	n := 0
	for j := i - 1; j >= 0 && keys[j] == keys[i]; j-- {
		n++
	}
	return n
}

func nthValue(m pcommon.Map, key string, n int) pcommon.Value {
	for k, v := range m.All() {
		if k == key {
			if n == 0 {
				return v
			}
			n--
		}
	}
	return pcommon.NewValueEmpty()
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func appendValue(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return appendString(append(dst, tagStr), v.Str())
	case pcommon.ValueTypeBool:
		if v.Bool() {
			return append(dst, tagBool, 1)
		}
		return append(dst, tagBool, 0)
	case pcommon.ValueTypeInt:
		return binary.LittleEndian.AppendUint64(append(dst, tagInt), uint64(v.Int()))
	case pcommon.ValueTypeDouble:
		return binary.LittleEndian.AppendUint64(append(dst, tagDouble), math.Float64bits(v.Double()))
	case pcommon.ValueTypeBytes:
		dst = binary.AppendUvarint(append(dst, tagBytes), uint64(v.Bytes().Len()))
		return append(dst, v.Bytes().AsRaw()...)
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		dst = binary.AppendUvarint(append(dst, tagSlice), uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			dst = appendValue(dst, s.At(i))
		}
		return dst
	case pcommon.ValueTypeMap:
		return appendMap(append(dst, tagMap), v.Map())
	default:
		return append(dst, tagEmpty)
	}
}

// Equal reports whether m holds exactly the entries of s, in any order. It
// neither sorts nor allocates (this is the confirmation of every cache hit).
func (s Set) Equal(m pcommon.Map) bool {
	if s.enc == "" {
		return m.Len() == 0
	}
	d := decoder{s: s.enc}
	return d.mapEqual(m) && !d.err
}

func (d *decoder) skipValue() {
	switch d.byte() {
	case tagStr, tagBytes:
		d.str()
	case tagBool:
		d.byte()
	case tagInt, tagDouble:
		d.u64()
	case tagSlice:
		for range d.uvarint() {
			d.skipValue()
		}
	case tagMap:
		for range d.uvarint() {
			d.str()
			d.skipValue()
		}
	}
}

// CopyTo replaces the contents of dest with the entries of s, in canonical
// (key) order. It allocates what dest needs; use it when emitting a stream
// whose attributes are not at hand.
func (s Set) CopyTo(dest pcommon.Map) {
	dest.Clear()
	if s.enc == "" {
		return
	}
	d := decoder{s: s.enc}
	d.decodeMap(dest)
}

// decoder walks an encoding produced by appendMap; err latches on malformed
// input, which only a bug could produce (Sets are built by SetOf).
type decoder struct {
	s   string
	i   int
	err bool
}

func (d *decoder) uvarint() int {
	// Fast path: every length below 128 is one byte.
	if d.i < len(d.s) && d.s[d.i] < 0x80 {
		d.i++
		return int(d.s[d.i-1])
	}
	return d.uvarintSlow()
}

func (d *decoder) uvarintSlow() int {
	var x uint64
	var shift uint
	for d.i < len(d.s) {
		b := d.s[d.i]
		d.i++
		x |= uint64(b&0x7f) << shift
		if b < 0x80 {
			return int(x)
		}
		shift += 7
	}
	d.err = true
	return 0
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.i+n > len(d.s) {
		d.err = true
		return ""
	}
	v := d.s[d.i : d.i+n]
	d.i += n
	return v
}

func (d *decoder) byte() byte {
	if d.i >= len(d.s) {
		d.err = true
		return 0
	}
	b := d.s[d.i]
	d.i++
	return b
}

func (d *decoder) u64() uint64 {
	if d.i+8 > len(d.s) {
		d.err = true
		return 0
	}
	var v uint64
	for j := 7; j >= 0; j-- {
		v = v<<8 | uint64(d.s[d.i+j])
	}
	d.i += 8
	return v
}

// mapEqual compares one encoded map with m. Counts match and every encoded
// key has an equal value in m; with no duplicate keys in m that is equality.
func (d *decoder) mapEqual(m pcommon.Map) bool {
	n := d.uvarint()
	if n != m.Len() {
		return false
	}
	for range n {
		v, ok := m.Get(d.str())
		if !ok || !d.valueEqual(v) || d.err {
			return false
		}
	}
	return true
}

func (d *decoder) valueEqual(v pcommon.Value) bool {
	tag := d.byte()
	switch tag {
	case tagStr:
		return v.Type() == pcommon.ValueTypeStr && d.str() == v.Str()
	case tagBool:
		return v.Type() == pcommon.ValueTypeBool && (d.byte() == 1) == v.Bool()
	case tagInt:
		return v.Type() == pcommon.ValueTypeInt && int64(d.u64()) == v.Int()
	case tagDouble:
		return v.Type() == pcommon.ValueTypeDouble && d.u64() == math.Float64bits(v.Double())
	case tagBytes:
		if v.Type() != pcommon.ValueTypeBytes {
			return false
		}
		b := d.str()
		raw := v.Bytes().AsRaw()
		return len(b) == len(raw) && b == string(raw) // no allocation: compiler-optimised conversion
	case tagSlice:
		if v.Type() != pcommon.ValueTypeSlice {
			return false
		}
		s := v.Slice()
		if d.uvarint() != s.Len() {
			return false
		}
		for i := 0; i < s.Len(); i++ {
			if !d.valueEqual(s.At(i)) {
				return false
			}
		}
		return true
	case tagMap:
		if v.Type() != pcommon.ValueTypeMap {
			return false
		}
		return d.mapEqual(v.Map())
	case tagEmpty:
		return v.Type() == pcommon.ValueTypeEmpty
	default:
		d.err = true
		return false
	}
}

func (d *decoder) decodeMap(dest pcommon.Map) {
	n := d.uvarint()
	dest.EnsureCapacity(n)
	for range n {
		// Keys and string values share the Set's immutable encoding.
		d.decodeValue(dest.PutEmpty(d.str()))
		if d.err {
			return
		}
	}
}

func (d *decoder) decodeValue(v pcommon.Value) {
	switch d.byte() {
	case tagStr:
		v.SetStr(d.str())
	case tagBool:
		v.SetBool(d.byte() == 1)
	case tagInt:
		v.SetInt(int64(d.u64()))
	case tagDouble:
		v.SetDouble(math.Float64frombits(d.u64()))
	case tagBytes:
		v.SetEmptyBytes().FromRaw([]byte(d.str()))
	case tagSlice:
		n := d.uvarint()
		s := v.SetEmptySlice()
		s.EnsureCapacity(n)
		for range n {
			d.decodeValue(s.AppendEmpty())
		}
	case tagMap:
		d.decodeMap(v.SetEmptyMap())
	case tagEmpty:
	default:
		d.err = true
	}
}

// fastAttr is one attribute of a Set as substrings of the Set's encoding:
// its key and its scalar value (a string's bytes, 8 little-endian bytes of an
// int or double, 1 byte of a bool), so a cache hit compares strings instead
// of decoding.
type fastAttr struct {
	key, val string
	tag      byte
}

// fastOf lists the attributes of s in the order m has them (m must equal s),
// for equalFast. It returns nil when an attribute is not a scalar: such sets
// are compared with Equal. Slow path only.
func (s Set) fastOf(m pcommon.Map) []fastAttr {
	if !s.Equal(m) {
		return nil
	}
	offs := make(map[string]int, m.Len())
	d := decoder{s: s.enc}
	n := d.uvarint()
	for range n {
		at := d.i
		offs[d.str()] = at
		d.skipValue()
	}
	fast := make([]fastAttr, 0, m.Len())
	for k := range m.All() {
		d.i = offs[k]
		key := d.str()
		tag := d.byte()
		var val string
		switch tag {
		case tagStr:
			val = d.str()
		case tagInt, tagDouble:
			val = s.enc[d.i : d.i+8]
		case tagBool:
			val = s.enc[d.i : d.i+1]
		default:
			return nil
		}
		fast = append(fast, fastAttr{key: key, val: val, tag: tag})
	}
	return fast
}

// equalFast is Equal for a map whose entries come in the order fastOf
// recorded: one pass of string comparisons. It reports (equal, sure); when a
// key is not where the order says (the source reordered its attributes),
// sure is false and the caller falls back to Equal.
func equalFast(fast []fastAttr, m pcommon.Map) (equal, sure bool) {
	if len(fast) != m.Len() {
		return false, true // fast lists every attribute of the set
	}
	i := 0
	for k, v := range m.All() {
		f := &fast[i]
		i++
		if f.key != k {
			return false, false
		}
		switch f.tag {
		case tagStr:
			if v.Type() != pcommon.ValueTypeStr || v.Str() != f.val {
				return false, true
			}
		case tagInt:
			if v.Type() != pcommon.ValueTypeInt || uint64(v.Int()) != le64s(f.val) {
				return false, true
			}
		case tagDouble:
			if v.Type() != pcommon.ValueTypeDouble || math.Float64bits(v.Double()) != le64s(f.val) {
				return false, true
			}
		case tagBool:
			if v.Type() != pcommon.ValueTypeBool || (f.val[0] == 1) != v.Bool() {
				return false, true
			}
		}
	}
	return true, true
}

func le64s(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
