package series

import (
	"encoding/binary"
	"unsafe"
)

// text is an immutable string held as one pointer, 8 bytes where a string
// header takes 16: its bytes are preceded by their length, a uvarint.
// Every series' first key keeps its packed attributes as one, which, with
// the labels' 32-bit length (Series.ln), takes a Series from 128 bytes to
// 112 (a size class down, for a series allocated on its own). Reading one
// decodes a byte or two, and touches its bytes' memory: so it is for what
// is read to be compared or copied whole (packed attributes, protobuf
// labels), not for what a caller needs only the length of.
//
// The bytes are never written once a text points at them (they are in a
// bucket's arena, which only grows past them, or in an allocation of their
// own), so the string String returns is immutable, as Go requires. The
// empty string is the nil text: a text never points at a length of 0, whose
// string would point past the end of its allocation.
type text struct{ p *byte }

// appendText appends a text's bytes for s, which must not be empty: its
// length, then s.
func appendText(dst, s []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// textSize is the size of a text's bytes for n bytes.
func textSize(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n)) + n
}

// newText copies s into an allocation of its own.
func newText(s []byte) text {
	if len(s) == 0 {
		return text{}
	}
	b := appendText(make([]byte, 0, textSize(len(s))), s)
	return text{&b[0]}
}

// String returns the text's string, sharing its bytes. Small enough to be
// inlined for a text under 128 bytes (a one-byte length): an index lookup
// compares one per point.
func (t text) String() string {
	if t.p == nil {
		return ""
	}
	if n := *t.p; n < 0x80 {
		return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(t.p), 1)), int(n))
	}
	return t.long()
}

// long is String for a text of 128 bytes or more: its length is two bytes
// or more, and its bytes over a hundred, so a view of the longest uvarint
// stays inside its allocation.
func (t text) long() string {
	n, w := uvarint(unsafe.String(t.p, binary.MaxVarintLen64))
	return unsafe.String((*byte)(unsafe.Add(unsafe.Pointer(t.p), w)), int(n))
}
