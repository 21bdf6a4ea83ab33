package identity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

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

// SetOf returns the canonical Set of m. It sorts and allocates once (the
// encoding): call it on a cache miss, never per point.
func SetOf(m pcommon.Map) Set {
	if m.Len() == 0 {
		return Set{}
	}
	var buf [encScratch]byte
	enc, _ := appendMap(buf[:0], m, nil, nil)
	return Set{enc: string(enc)}
}

// String returns the encoding itself (binary, not for display). It is meant
// for keying maps and for tests.
func (s Set) String() string { return s.enc }

// Len returns the number of entries.
func (s Set) Len() int {
	d := decoder{s: s.enc}
	return d.uvarint()
}

// encScratch is the stack space an encoding is built in before its one
// copy to the heap: 6 gateway attributes take about 150 bytes.
const encScratch = 512

// inlineAttrs is how many entries a map may have for appendMap to sort
// them in stack space: more than a real point carries, so the only
// allocation of a new Set is its encoding.
const inlineAttrs = 32

// appendMap appends the encoding of m, sorting its keys with the help of
// ko when it is not nil (see KeyOrder). When offs is not nil (len m.Len()),
// offs[i] is set to the position in dst of the i-th entry of m in m's own
// order, and ordered reports whether those entries can be compared in
// place (setAndOrder): every value a scalar other than bytes, every key and
// string value shorter than 128 bytes (a one-byte length), no key twice.
//
// It is not recursive, and nested values are encoded apart (appendNested):
// escape analysis moves the arguments of a recursive function to the heap,
// which would cost every new Set the stack buffer its encoding is built in.
func appendMap(dst []byte, m pcommon.Map, offs []int, ko *KeyOrder) (enc []byte, ordered bool) {
	var sc sortScratch
	keys, vals, perm := sc.sorted(m, ko)
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	ordered = offs != nil
	for j, i := range perm {
		k, v := keys[i], vals[i]
		if offs != nil {
			offs[i] = len(dst)
			ordered = ordered && len(k) < 0x80 && (j == 0 || k != keys[perm[j-1]])
		}
		dst = appendString(dst, k)
		// One type switch per value (each Type or Str is one on the
		// value's interface), which also decides orderable: what
		// equalOrdered compares in place is a scalar other than bytes,
		// a string shorter than 128 bytes.
		switch t := v.Type(); t {
		case pcommon.ValueTypeStr:
			str := v.Str()
			ordered = ordered && len(str) < 0x80
			dst = appendString(append(dst, tagStr), str)
		case pcommon.ValueTypeInt:
			dst = binary.LittleEndian.AppendUint64(append(dst, tagInt), uint64(v.Int()))
		case pcommon.ValueTypeDouble:
			dst = binary.LittleEndian.AppendUint64(append(dst, tagDouble), math.Float64bits(v.Double()))
		case pcommon.ValueTypeBool:
			dst = appendScalar(dst, v)
		default:
			ordered = false
			if isScalar(t) {
				dst = appendScalar(dst, v)
			} else {
				dst = append(dst, appendNested(nil, v)...)
			}
		}
	}
	return dst, ordered
}

// sortScratch is the stack space of a map's entries while they are sorted.
type sortScratch struct {
	keys [inlineAttrs]string
	vals [inlineAttrs]pcommon.Value
	perm [inlineAttrs]int32
}

// sorted returns m's keys and values in m's order, and perm, the indices
// into them sorted by key. Stable: a duplicated key (invalid OTLP) appears
// once per occurrence, the n-th copy with the n-th occurrence's value. The
// slices are sc's arrays unless m has more than inlineAttrs entries.
//
// With ko, the order of the last map sorted with it is tried first, and
// this one's is recorded for the next.
func (sc *sortScratch) sorted(m pcommon.Map, ko *KeyOrder) ([]string, []pcommon.Value, []int32) {
	keys, vals, perm := sc.keys[:0], sc.vals[:0], sc.perm[:0]
	n := m.Len()
	if n > inlineAttrs {
		keys, vals, perm = make([]string, 0, n), make([]pcommon.Value, 0, n), make([]int32, 0, n)
		ko = nil
	}
	for k, v := range m.All() {
		keys = append(keys, k)
		vals = append(vals, v)
	}
	perm = perm[:len(keys)]
	if ko != nil && ko.reuse(perm, keys) {
		return keys, vals, perm
	}
	for i := range perm {
		perm[i] = int32(i)
	}
	sortByKey(perm, keys)
	if ko != nil {
		ko.keep(perm)
	}
	return keys, vals, perm
}

// KeyOrder remembers the sorted order of the keys of the last attribute map
// encoded with it. The points of one metric almost always carry their
// attributes in one order (an SDK's or a source's own), so the next map is
// first tried in that order, which one pass checks (n-1 comparisons; the
// keys strictly increasing), instead of sorted (here 12 comparisons for 6
// gateway attributes). A map whose keys are in another order, or that has
// a duplicated key, is sorted as without it: the encoding never depends on
// the hint.
//
// The zero KeyOrder is ready to use. It is not safe for concurrent use:
// keep one per goroutine (say, per batch).
type KeyOrder struct {
	n    uint8
	perm [inlineAttrs]uint8
}

// reuse fills perm (len(keys) long) with the remembered order and reports
// whether it sorts keys, strictly.
func (ko *KeyOrder) reuse(perm []int32, keys []string) bool {
	if int(ko.n) != len(keys) || len(keys) == 0 {
		return false
	}
	perm[0] = int32(ko.perm[0])
	for j := 1; j < len(keys); j++ {
		perm[j] = int32(ko.perm[j])
		if !(keys[perm[j-1]] < keys[perm[j]]) {
			return false
		}
	}
	return true
}

// keep remembers perm, at most inlineAttrs long.
func (ko *KeyOrder) keep(perm []int32) {
	ko.n = uint8(len(perm))
	for j, i := range perm {
		ko.perm[j] = uint8(i)
	}
}

// sortByKey sorts perm, indices into keys, by key, stably. Insertion sort
// for the handful of attributes a point has (no closure, no allocation).
func sortByKey(perm []int32, keys []string) {
	if len(perm) > inlineAttrs {
		slices.SortStableFunc(perm, func(a, b int32) int { return strings.Compare(keys[a], keys[b]) })
		return
	}
	for i := 1; i < len(perm); i++ {
		for j := i; j > 0 && keys[perm[j]] < keys[perm[j-1]]; j-- {
			perm[j], perm[j-1] = perm[j-1], perm[j]
		}
	}
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

func isScalar(t pcommon.ValueType) bool {
	return t != pcommon.ValueTypeSlice && t != pcommon.ValueTypeMap
}

// appendScalar appends a value that is not a slice or a map.
func appendScalar(dst []byte, v pcommon.Value) []byte {
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
	default:
		return append(dst, tagEmpty)
	}
}

// appendNested appends any value, slices and maps recursively (allocating
// as it goes: nested attributes are rare in metrics).
func appendNested(dst []byte, v pcommon.Value) []byte {
	switch v.Type() {
	case pcommon.ValueTypeSlice:
		s := v.Slice()
		dst = binary.AppendUvarint(append(dst, tagSlice), uint64(s.Len()))
		for i := 0; i < s.Len(); i++ {
			dst = appendNested(dst, s.At(i))
		}
		return dst
	case pcommon.ValueTypeMap:
		var sc sortScratch
		keys, vals, perm := sc.sorted(v.Map(), nil)
		dst = binary.AppendUvarint(append(dst, tagMap), uint64(len(keys)))
		for _, i := range perm {
			dst = appendNested(appendString(dst, keys[i]), vals[i])
		}
		return dst
	default:
		return appendScalar(dst, v)
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

// ParseSet returns the Set whose encoding (Set.String) is enc, for a reader
// of stored bytes that may be corrupt (a checkpoint): it checks what the
// decoder otherwise trusts — known value tags, lengths and counts within
// the bytes left, nesting at most maxDepth, no trailing bytes — without
// allocating from a length it read. A Set it returns decodes like one
// SetOf made (CopyTo); its entries need not be in canonical order, so a
// caller that keys streams by it re-canonicalises (SetOf of the map).
func ParseSet(enc string, maxDepth int) (Set, error) {
	d := decoder{s: enc}
	if enc != "" {
		d.checkMap(maxDepth)
	}
	switch {
	case d.err:
		return Set{}, errors.New("malformed attribute set")
	case d.i != len(enc):
		return Set{}, fmt.Errorf("%d bytes after an attribute set", len(enc)-d.i)
	}
	return Set{enc: enc}, nil
}

// count reads a count of items taking at least min bytes each.
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n < 0 || n > (len(d.s)-d.i)/min {
		d.err = true
		return 0
	}
	return n
}

func (d *decoder) checkMap(depth int) {
	for range d.count(2) {
		d.str()
		d.checkValue(depth)
		if d.err {
			return
		}
	}
}

func (d *decoder) checkValue(depth int) {
	if depth < 0 {
		d.err = true
		return
	}
	switch d.byte() {
	case tagStr, tagBytes:
		d.str()
	case tagBool:
		d.byte()
	case tagInt, tagDouble:
		d.u64()
	case tagSlice:
		for range d.count(1) {
			if d.checkValue(depth - 1); d.err {
				return
			}
		}
	case tagMap:
		d.checkMap(depth - 1)
	case tagEmpty:
	default:
		d.err = true
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
	if n < 0 || n > len(d.s)-d.i {
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

// setAndOrder returns the Set of m and its order table, in one allocation:
// the table is 2 bytes per entry of m, in m's order, each the offset
// (little-endian) of that entry in the Set's encoding, so that a cache hit
// from a source that keeps its attribute order compares each attribute in
// place (equalOrdered) instead of looking it up in m.
//
// The table is empty, and the caller falls back to Equal, when an entry is
// not a scalar (string, int, double, bool), when a key is duplicated (such
// a map never equals its Set), or when the encoding is beyond 64 KiB.
// Lifetime: the table shares the Set's memory; both are immutable.
func setAndOrder(m pcommon.Map) (Set, string) {
	var buf [encScratch]byte
	enc, size := appendSetAndOrder(buf[:0], m, nil)
	all := string(enc)
	return Set{enc: all[:size]}, all[size:]
}

// appendSetAndOrder appends the encoding of m's Set (size bytes) and then
// its order table (see setAndOrder), for the caller to copy into memory of
// its choosing. ko, when not nil, is appendMap's sorting hint.
func appendSetAndOrder(dst []byte, m pcommon.Map, ko *KeyOrder) (enc []byte, size int) {
	n := m.Len()
	if n == 0 {
		return dst, 0
	}
	var ob [inlineAttrs]int
	offs := ob[:0]
	if n > inlineAttrs {
		offs = make([]int, 0, n)
	}
	offs = offs[:n]
	base := len(dst)
	enc, ordered := appendMap(dst, m, offs, ko)
	size = len(enc) - base
	if ordered && size <= 0xFFFF {
		for _, o := range offs {
			enc = binary.LittleEndian.AppendUint16(enc, uint16(o-base))
		}
	}
	return enc, size
}

// orderOf is setAndOrder's table for a Set built elsewhere (Cache.Add): an
// extra allocation, on a path that is rare.
func (s Set) orderOf(m pcommon.Map) string {
	if t, order := setAndOrder(m); t == s {
		return order
	}
	return ""
}

// equalOrdered is Equal for a map whose entries come in the order the
// table records: one pass, each attribute compared in place. It reports
// (equal, sure); when a key is not where the table says (the source
// reordered its attributes), sure is false and the caller falls back to
// Equal. The table's entries are as appendMap checked: scalars with
// one-byte lengths.
func (s Set) equalOrdered(order string, m pcommon.Map) (equal, sure bool) {
	if len(order) != 2*m.Len() {
		return false, true // the table lists every entry of the set
	}
	enc := s.enc
	i := 0
	for k, v := range m.All() {
		p := int(order[i]) | int(order[i+1])<<8
		i += 2
		n := int(enc[p])
		p++
		if enc[p:p+n] != k {
			return false, false
		}
		p += n
		switch enc[p] {
		case tagStr:
			n = int(enc[p+1])
			if v.Type() != pcommon.ValueTypeStr || v.Str() != enc[p+2:p+2+n] {
				return false, true
			}
		case tagInt:
			if v.Type() != pcommon.ValueTypeInt || uint64(v.Int()) != le64s(enc[p+1:p+9]) {
				return false, true
			}
		case tagDouble:
			if v.Type() != pcommon.ValueTypeDouble || math.Float64bits(v.Double()) != le64s(enc[p+1:p+9]) {
				return false, true
			}
		case tagBool:
			if v.Type() != pcommon.ValueTypeBool || (enc[p+1] == 1) != v.Bool() {
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
