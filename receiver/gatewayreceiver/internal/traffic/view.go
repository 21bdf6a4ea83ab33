package traffic

import (
	"encoding/binary"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
)

// view is the labels some families keep of a tuple: keep projects a tuple
// onto them. Families that name the same *view project every tuple alike,
// so they share its rows: their series are found with one lookup and
// allocated together (a pointer, not a function, because Go cannot compare
// functions). A profile declares one per distinct set of labels.
type view struct {
	keep func(k tuple) tuple
}

// mask is a view that only keeps or clears fields of the tuple, as the
// fields it clears: it keeps the whole of a tuple whose cleared fields are
// empty already (whole), and the projected tuple's encoding is the tuple's
// with those fields empty (encodeFrom), both told without building,
// comparing and encoding a 328-byte projected tuple. newMask finds the
// cleared fields by projecting a tuple whose every field is set;
// TestMasks checks, for every profile's views, that whole and encodeFrom
// agree with keep and encodeTuple.
type mask struct {
	ok bool // keep only keeps or clears fields
	// strs are the string fields cleared, as indexes of strings(); cleared
	// marks them.
	strs    []int
	cleared [tupleStrings]bool
	// The other fields cleared.
	status, port, source, stream, overflow bool
}

// newMask is v as a mask; not ok when v's projection of a tuple with every
// field set has a field that is neither kept nor cleared.
func newMask(v *view) mask {
	var probe tuple
	for i, f := range probe.strings() {
		*f = string(rune('a' + i)) // distinct: a field moved to another is not kept
	}
	probe.status, probe.targetPort, probe.source, probe.stream, probe.overflow = 1, 2, gateway.SourceGateway, true, true
	pk := v.keep(probe)
	var m mask
	for i, f := range pk.strings() {
		switch *f {
		case *probe.strings()[i]:
		case "":
			m.strs, m.cleared[i] = append(m.strs, i), true
		default:
			return mask{}
		}
	}
	// The other fields are kept (the probe's value) or cleared (zero).
	if pk.status != 0 && pk.status != probe.status || pk.targetPort != 0 && pk.targetPort != probe.targetPort ||
		pk.source != gateway.SourceUnknown && pk.source != probe.source {
		return mask{}
	}
	m.status, m.port, m.source = pk.status == 0, pk.targetPort == 0, pk.source == gateway.SourceUnknown
	m.stream, m.overflow = !pk.stream, !pk.overflow
	m.ok = true
	return m
}

// whole reports whether m's projection of k is k itself: the fields it
// clears are empty.
func (m *mask) whole(k *tuple) bool {
	if m.status && k.status != 0 || m.port && k.targetPort != 0 || m.source && k.source != gateway.SourceUnknown ||
		m.stream && k.stream || m.overflow && k.overflow {
		return false
	}
	strs := k.strings()
	for _, i := range m.strs {
		if *strs[i] != "" {
			return false
		}
	}
	return true
}

// encodeFrom appends encodeTuple of m's projection of tuple k, read from
// full, encodeTuple of k (no projected tuple built): the kept bytes are
// copied in runs (a cleared field that is empty already is the byte it
// encodes to), so a new tuple's projections cost a few copies of its
// encoding, not a walk of its fields.
func (m *mask) encodeFrom(dst, full []byte) []byte {
	i, run := 0, 0
	for f := range tupleStrings {
		n, w := uint64(full[i]), 1
		if n >= 0x80 {
			n, w = binary.Uvarint(full[i:])
		}
		end := i + w + int(n)
		if m.cleared[f] && n != 0 {
			dst = append(append(dst, full[run:i]...), 0)
			run = end
		}
		i = end
	}
	dst = append(dst, full[run:i]...)
	for _, cleared := range [2]bool{m.status, m.port} {
		_, w := binary.Varint(full[i:])
		if cleared {
			dst = append(dst, 0)
		} else {
			dst = append(dst, full[i:i+w]...)
		}
		i += w
	}
	flags := full[i]
	if m.source {
		flags &= 3
	}
	if m.overflow {
		flags &^= 1
	}
	if m.stream {
		flags &^= 2
	}
	return append(dst, flags)
}
