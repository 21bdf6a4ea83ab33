package series

import (
	"encoding/binary"
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// packedAttrs is an attribute map packed into one byte slice, kept by an
// index entry to confirm hash hits: about the size of the keys and values
// themselves, where a pcommon.Map copy costs several times that. Encoding,
// per attribute in map order: uvarint key length, key, type byte, value
// (string: uvarint length + bytes; int, double: 8 bytes; bool: 1 byte; other
// types: their AsString form as a string).
type packedAttrs []byte

const (
	packedStr byte = iota
	packedInt
	packedDouble
	packedBool
	packedOther
)

func pack(attrs pcommon.Map) packedAttrs {
	b := make([]byte, 0, 16*attrs.Len())
	b = binary.AppendUvarint(b, uint64(attrs.Len()))
	for k, v := range attrs.All() {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
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

// equal reports whether attrs holds exactly the packed attributes, in any
// order. Quadratic in the attribute count, which is small, and allocation
// free for scalar values.
func (p packedAttrs) equal(attrs pcommon.Map) bool {
	n, used := binary.Uvarint(p)
	if used <= 0 || int(n) != attrs.Len() {
		return false
	}
	body := p[used:]
	for k, v := range attrs.All() {
		if !body.has(k, v) {
			return false
		}
	}
	return true
}

// has scans the packed attributes for key k and compares its value with v.
func (p packedAttrs) has(k string, v pcommon.Value) bool {
	for len(p) > 0 {
		kl, used := binary.Uvarint(p)
		p = p[used:]
		key := p[:kl]
		p = p[kl:]
		typ := p[0]
		p = p[1:]
		var val []byte
		switch typ {
		case packedStr, packedOther:
			vl, used := binary.Uvarint(p)
			val = p[used : used+int(vl)]
			p = p[used+int(vl):]
		case packedInt, packedDouble:
			val, p = p[:8], p[8:]
		case packedBool:
			val, p = p[:1], p[1:]
		}
		if string(key) != k {
			continue
		}
		switch typ {
		case packedStr:
			return v.Type() == pcommon.ValueTypeStr && string(val) == v.Str()
		case packedInt:
			return v.Type() == pcommon.ValueTypeInt && binary.LittleEndian.Uint64(val) == uint64(v.Int())
		case packedDouble:
			return v.Type() == pcommon.ValueTypeDouble && binary.LittleEndian.Uint64(val) == math.Float64bits(v.Double())
		case packedBool:
			return v.Type() == pcommon.ValueTypeBool && (val[0] == 1) == v.Bool()
		default:
			return v.Type() != pcommon.ValueTypeStr && v.Type() != pcommon.ValueTypeInt &&
				v.Type() != pcommon.ValueTypeDouble && v.Type() != pcommon.ValueTypeBool && string(val) == v.AsString()
		}
	}
	return false
}
