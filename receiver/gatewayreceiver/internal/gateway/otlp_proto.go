package gateway

import (
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"unsafe"
)

// readProto reduces every ResourceSpans of an OTLP protobuf body (see
// CountProto) and maps each (endResource); it returns how many spans it
// examined.
func (c *SpanCounter) readProto(body []byte) (examined int, err error) {
	pos, rs := 0, 0
	for pos < len(body) {
		num, wt, p, err := consumeTag(body, pos)
		if err != nil {
			return 0, err
		}
		if num != 1 {
			if pos, err = consumeUnknown(body, p, wt); err != nil {
				return 0, err
			}
			continue
		}
		var v []byte
		if v, pos, err = consumeField(body, p, wt, "resource_spans"); err != nil {
			return 0, err
		}
		n, err := c.decodeResourceSpans(v)
		if err != nil {
			if c.refused != nil {
				return 0, c.refused
			}
			return 0, at(err, "resource_spans", rs)
		}
		examined += n
		rs++
	}
	return examined, nil
}

// decodeResourceSpans reduces one ResourceSpans and maps it; it returns the
// number of spans it held.
func (c *SpanCounter) decodeResourceSpans(b []byte) (int, error) {
	c.res, c.spans, c.attrs = c.res[:0], c.spans[:0], c.attrs[:0]
	var scopes, legacy int
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return 0, err
		}
		var v []byte
		switch num {
		case 1:
			if v, pos, err = consumeField(b, p, wt, "resource"); err == nil {
				err = c.decodeResource(v)
			}
			err = at(err, "resource", -1)
		case 2:
			if v, pos, err = consumeField(b, p, wt, "scope_spans"); err == nil {
				err = c.decodeScopeSpans(v, false)
			}
			err = at(err, "scope_spans", scopes)
			scopes++
		case 3:
			_, pos, err = consumeField(b, p, wt, "schema_url")
		case 1000:
			if v, pos, err = consumeField(b, p, wt, "instrumentation_library_spans"); err == nil {
				err = c.decodeScopeSpans(v, true)
			}
			err = at(err, "instrumentation_library_spans", legacy)
			legacy++
		default:
			pos, err = consumeUnknown(b, p, wt)
		}
		if err != nil {
			return 0, err
		}
	}
	if legacy > 0 && scopes > 0 {
		// As pdata migrates: the deprecated list is used only when
		// scope_spans is absent.
		c.spans = dropLegacy(c.spans)
	}
	c.endResource()
	if err := c.reserveGrowth(); err != nil { // the events, and the last span's growth
		return 0, err
	}
	return len(c.spans), nil
}

func dropLegacy(spans []spanRec) []spanRec {
	kept := spans[:0]
	for _, s := range spans {
		if !s.legacy {
			kept = append(kept, s)
		}
	}
	return kept
}

// Sizes of what reserveGrowth charges.
const (
	sizeofSpanRec = int64(unsafe.Sizeof(spanRec{}))
	sizeofKeyed   = int64(unsafe.Sizeof(keyed{}))
	sizeofEvent   = int64(unsafe.Sizeof(Event{})) + 8 // and its lastTry
)

// reserveGrowth asks Reserve for the buffers grown since its last call.
func (c *SpanCounter) reserveGrowth() error {
	if c.Reserve == nil {
		return nil
	}
	var n int64
	if k := cap(c.spans); k > c.capSpans {
		n += int64(k) * sizeofSpanRec
		c.capSpans = k
	}
	if k := cap(c.attrs); k > c.capAttrs {
		n += int64(k) * sizeofKeyed
		c.capAttrs = k
	}
	if k := cap(c.events); k > c.capEvents {
		n += int64(k) * sizeofEvent
		c.capEvents = k
	}
	if n == 0 {
		return nil
	}
	c.refused = c.Reserve(n)
	return c.refused
}

func (c *SpanCounter) decodeResource(b []byte) error {
	attrs := 0
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return err
		}
		var v []byte
		switch num {
		case 1:
			if v, pos, err = consumeField(b, p, wt, "attributes"); err == nil {
				c.res, err = decodeKeyValue(v, c.res)
			}
			err = at(err, "attributes", attrs)
			attrs++
		case 2:
			_, pos, err = consumeNumber(b, p, wt, wireVarint, "dropped_attributes_count")
		case 3:
			if v, pos, err = consumeField(b, p, wt, "entity_refs"); err == nil {
				err = validate(v, msgEntityRef, 0)
			}
			err = at(err, "entity_refs", -1)
		default:
			pos, err = consumeUnknown(b, p, wt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeScopeSpans reduces the spans of one ScopeSpans (legacy: of a
// deprecated InstrumentationLibrarySpans, the same message). The scope may
// follow its spans on the wire, so their scope is set at the end.
func (c *SpanCounter) decodeScopeSpans(b []byte, legacy bool) error {
	first, scope, spans := len(c.spans), "", 0
	for pos := 0; pos < len(b); {
		if b[pos] == 2<<3|byte(wireLen) { // spans, most of b: in line
			if start, end := fastLen(b, pos+1); end >= 0 {
				if err := c.decodeSpan(b[start:end]); err != nil {
					return at(err, "spans", spans)
				}
				spans++
				pos = end
				continue
			}
		}
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return err
		}
		var v []byte
		switch num {
		case 1:
			if v, pos, err = consumeField(b, p, wt, "scope"); err == nil {
				scope, err = decodeScope(v, scope)
			}
			err = at(err, "scope", -1)
		case 2:
			if v, pos, err = consumeField(b, p, wt, "spans"); err == nil {
				err = c.decodeSpan(v)
			}
			err = at(err, "spans", spans)
			spans++
		case 3:
			_, pos, err = consumeField(b, p, wt, "schema_url")
		default:
			pos, err = consumeUnknown(b, p, wt)
		}
		if err != nil {
			return err
		}
	}
	kind := detectScope(scope)
	for i := first; i < len(c.spans); i++ {
		c.spans[i].scope, c.spans[i].legacy = kind, legacy
	}
	return nil
}

// decodeScope returns the InstrumentationScope's name; name is the one a
// previous occurrence of the field set (protobuf merges repeated messages).
func decodeScope(b []byte, name string) (string, error) {
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return "", err
		}
		var v []byte
		switch num {
		case 1:
			if v, pos, err = consumeField(b, p, wt, "name"); err == nil {
				name = borrow(v)
			}
		case 2:
			_, pos, err = consumeField(b, p, wt, "version")
		case 3:
			if v, pos, err = consumeField(b, p, wt, "attributes"); err == nil {
				err = validate(v, msgKeyValue, 0)
			}
			err = at(err, "attributes", -1)
		case 4:
			_, pos, err = consumeNumber(b, p, wt, wireVarint, "dropped_attributes_count")
		default:
			pos, err = consumeUnknown(b, p, wt)
		}
		if err != nil {
			return "", err
		}
	}
	return name, nil
}

// decodeSpan reduces one Span. Most spans are read by decodeSpanFast; one
// it declines (malformed, or encoded in a way it does not read) is read
// again from the start by decodeSpanChecked, which also words every error,
// so the fast reading need only be right on what it accepts.
func (c *SpanCounter) decodeSpan(b []byte) error {
	// What the span before grew the buffers by is charged first.
	if cap(c.spans) > c.capSpans || cap(c.attrs) > c.capAttrs {
		if err := c.reserveGrowth(); err != nil {
			return err
		}
	}
	lo := len(c.attrs)
	c.spans = append(c.spans, spanRec{attrLo: int32(lo)})
	s := &c.spans[len(c.spans)-1]
	if c.decodeSpanFast(b, s) {
		s.attrHi = int32(len(c.attrs))
		return nil
	}
	c.spans, c.attrs = c.spans[:len(c.spans)-1], c.attrs[:lo]
	return c.decodeSpanChecked(b)
}

// decodeSpanFast is decodeSpanChecked's reading for the well-formed spans
// SDKs send, in any field order: it switches on the whole one-byte tag
// (field number and wire type, so a wrong wire type is simply not a case),
// reads lengths of up to two bytes in line, and hands other fields to the
// checked readers. It returns false, and s is then to be dropped, on
// anything else (a known field with a wrong wire type or a longer tag, a
// wrong id length, a malformed field).
func (c *SpanCounter) decodeSpanFast(b []byte, s *spanRec) bool {
	for pos := 0; pos < len(b); {
		tag := b[pos]
		pos++
		switch tag {
		case 1<<3 | byte(wireLen): // trace_id
			if pos >= len(b) {
				return false
			}
			switch b[pos] {
			case 16:
				if len(b)-pos < 17 {
					return false
				}
				copy(s.trace[:], b[pos+1:pos+17])
				pos += 17
			case 0: // empty: no id, as pdata reads it (and span ids here)
				s.trace = [16]byte{}
				pos++
			default:
				return false
			}
		case 2<<3 | byte(wireLen): // span_id
			if pos = readSpanIDFast(&s.id, b, pos); pos < 0 {
				return false
			}
		case 4<<3 | byte(wireLen): // parent_span_id
			if pos = readSpanIDFast(&s.parent, b, pos); pos < 0 {
				return false
			}
		case 3<<3 | byte(wireLen), 5<<3 | byte(wireLen): // trace_state, name
			start, end := fastLen(b, pos)
			if end < 0 {
				return false
			}
			if tag == 3<<3|byte(wireLen) {
				s.traceState = borrow(b[start:end])
			} else {
				s.name = borrow(b[start:end])
			}
			pos = end
		case 6<<3 | byte(wireVarint): // kind
			n, p, err := consumeVarint(b, pos)
			if err != nil {
				return false
			}
			s.kind, pos = int32(n), p
		case 7<<3 | byte(wireI64), 8<<3 | byte(wireI64): // start, end time
			if len(b)-pos < 8 {
				return false
			}
			t := binary.LittleEndian.Uint64(b[pos:])
			if tag == 7<<3|byte(wireI64) {
				s.start = t
			} else {
				s.end = t
			}
			pos += 8
		case 9<<3 | byte(wireLen): // attributes
			start, end := fastLen(b, pos)
			if end < 0 {
				return false
			}
			// decodeKeyValue, in line: the attribute loop is the hottest.
			if key, val, ok := keyValueFast(b[start:end]); ok {
				if k := lookupAttrKey(key); k != akNone {
					c.attrs = append(c.attrs, keyedOf(k, val))
				}
			} else {
				var err error
				if c.attrs, err = decodeKeyValueChecked(b[start:end], c.attrs); err != nil {
					return false
				}
			}
			pos = end
		case 15<<3 | byte(wireLen): // status
			start, end := fastLen(b, pos)
			if end < 0 || decodeStatus(b[start:end], &s.status) != nil {
				return false
			}
			pos = end
		default:
			// Fields no mapper reads (events, links, counts, flags: its
			// tag is two bytes) are checked and skipped as
			// decodeSpanChecked does; a field read above with another wire
			// type or tag encoding is left to decodeSpanChecked.
			num, wt, p, err := consumeTag(b, pos-1)
			if err != nil || num <= 9 || num == 15 {
				return false
			}
			if pos, err = c.skipSpanField(b, num, wt, p); err != nil {
				return false
			}
		}
	}
	return true
}

// fastLen reads the length prefix at b[pos] when it takes one or two bytes
// (fields of up to 16 KiB) and returns the bounds of the field's bytes;
// end is -1 when the prefix is longer or the field overruns b.
func fastLen(b []byte, pos int) (start, end int) {
	if pos >= len(b) {
		return 0, -1
	}
	n := int(b[pos])
	if n >= 0x80 {
		if pos+1 >= len(b) || b[pos+1] >= 0x80 {
			return 0, -1
		}
		n = n&0x7f | int(b[pos+1])<<7
		pos++
	}
	pos++
	if n > len(b)-pos {
		return 0, -1
	}
	return pos, pos + n
}

// readSpanIDFast is readSpanID on the field whose length prefix is at
// b[pos]; it returns the position after the field, -1 when the id is not 8
// bytes or empty or overruns b.
func readSpanIDFast(dst *[8]byte, b []byte, pos int) int {
	if pos >= len(b) {
		return -1
	}
	switch b[pos] {
	case 8:
		if len(b)-pos < 9 {
			return -1
		}
		*dst = [8]byte(b[pos+1 : pos+9])
		return pos + 9
	case 0:
		*dst = [8]byte{}
		return pos + 1
	}
	return -1
}

// decodeSpanChecked reads a span field by field as pdata does, giving
// pdata's answer (and a located error) on any input.
func (c *SpanCounter) decodeSpanChecked(b []byte) error {
	s := spanRec{attrLo: int32(len(c.attrs))}
	attrs := 0
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return err
		}
		var v []byte
		var n uint64
		switch num {
		case 1:
			if v, pos, err = consumeField(b, p, wt, "trace_id"); err == nil {
				if err = checkID(v, 16, "trace_id"); err == nil {
					s.trace = [16]byte{}
					copy(s.trace[:], v)
				}
			}
		case 2:
			if v, pos, err = consumeField(b, p, wt, "span_id"); err == nil {
				err = readSpanID(&s.id, v, "span_id")
			}
		case 3:
			if v, pos, err = consumeField(b, p, wt, "trace_state"); err == nil {
				s.traceState = borrow(v)
			}
		case 4:
			if v, pos, err = consumeField(b, p, wt, "parent_span_id"); err == nil {
				err = readSpanID(&s.parent, v, "parent_span_id")
			}
		case 5:
			if v, pos, err = consumeField(b, p, wt, "name"); err == nil {
				s.name = borrow(v)
			}
		case 6:
			if n, pos, err = consumeNumber(b, p, wt, wireVarint, "kind"); err == nil {
				s.kind = int32(n)
			}
		case 7:
			s.start, pos, err = consumeNumber(b, p, wt, wireI64, "start_time_unix_nano")
		case 8:
			s.end, pos, err = consumeNumber(b, p, wt, wireI64, "end_time_unix_nano")
		case 9:
			if v, pos, err = consumeField(b, p, wt, "attributes"); err == nil {
				c.attrs, err = decodeKeyValue(v, c.attrs)
			}
			err = at(err, "attributes", attrs)
			attrs++
		case 15:
			if v, pos, err = consumeField(b, p, wt, "status"); err == nil {
				err = decodeStatus(v, &s.status)
			}
			err = at(err, "status", -1)
		default:
			pos, err = c.skipSpanField(b, num, wt, p)
		}
		if err != nil {
			return err
		}
	}
	s.attrHi = int32(len(c.attrs))
	c.spans = append(c.spans, s)
	return nil
}

// skipSpanField checks and skips the Span fields no mapper reads.
func (c *SpanCounter) skipSpanField(b []byte, num int32, wt wireType, p int) (int, error) {
	var v []byte
	var err error
	switch num {
	case 10, 12, 14:
		_, p, err = consumeNumber(b, p, wt, wireVarint, "dropped_count")
	case 11:
		if v, p, err = consumeField(b, p, wt, "events"); err == nil {
			err = at(validate(v, msgSpanEvent, 0), "events", -1)
		}
	case 13:
		if v, p, err = consumeField(b, p, wt, "links"); err == nil {
			err = at(validate(v, msgSpanLink, 0), "links", -1)
		}
	case 16:
		_, p, err = consumeNumber(b, p, wt, wireI32, "flags")
	default:
		return consumeUnknown(b, p, wt)
	}
	return p, err
}

func decodeStatus(b []byte, code *int32) error {
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return err
		}
		var n uint64
		switch num {
		case 2:
			_, pos, err = consumeField(b, p, wt, "message")
		case 3:
			if n, pos, err = consumeNumber(b, p, wt, wireVarint, "code"); err == nil {
				*code = int32(n)
			}
		default:
			pos, err = consumeUnknown(b, p, wt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// decodeKeyValue appends the attribute in b to dst when a mapper reads it,
// and checks it otherwise.
func decodeKeyValue(b []byte, dst attrs) (attrs, error) {
	if key, val, ok := keyValueFast(b); ok {
		if k := lookupAttrKey(key); k != akNone {
			dst = append(dst, keyedOf(k, val))
		}
		return dst, nil
	}
	return decodeKeyValueChecked(b, dst)
}

// keyValueFast reads the KeyValues SDKs send: a key and a value field,
// once each, in either order (pdata writes fields last to first, most
// encoders first to last), with one-byte lengths, the value empty or one
// string, int, double or bool field. ok is false on anything else, which
// decodeKeyValueChecked then reads; what it accepts, it reads as that does.
func keyValueFast(b []byte) (key string, val value, ok bool) {
	if len(b) < 4 {
		return "", value{}, false
	}
	n := int(b[1])
	if n >= 0x80 || n > len(b)-4 {
		return "", value{}, false
	}
	first, rest := b[2:2+n], b[2+n:]
	if m := int(rest[1]); m >= 0x80 || m != len(rest)-2 {
		return "", value{}, false
	}
	var kb, vb []byte
	switch {
	case b[0] == 1<<3|byte(wireLen) && rest[0] == 2<<3|byte(wireLen):
		kb, vb = first, rest[2:]
	case b[0] == 2<<3|byte(wireLen) && rest[0] == 1<<3|byte(wireLen):
		kb, vb = rest[2:], first
	default:
		return "", value{}, false
	}
	if len(vb) == 0 {
		return borrow(kb), value{}, true
	}
	switch vb[0] {
	case 1<<3 | byte(wireLen): // string_value (vb is under 128 bytes)
		if len(vb) < 2 || int(vb[1]) != len(vb)-2 {
			return "", value{}, false
		}
		val = value{typ: vStr, str: borrow(vb[2:])}
	case 3<<3 | byte(wireVarint): // int_value
		n, p, err := consumeVarint(vb, 1)
		if err != nil || p != len(vb) {
			return "", value{}, false
		}
		val = value{typ: vInt, num: n}
	case 4<<3 | byte(wireI64): // double_value
		if len(vb) != 9 {
			return "", value{}, false
		}
		val = value{typ: vDouble, num: binary.LittleEndian.Uint64(vb[1:])}
	case 2<<3 | byte(wireVarint): // bool_value
		n, p, err := consumeVarint(vb, 1)
		if err != nil || p != len(vb) {
			return "", value{}, false
		}
		val = value{typ: vBool}
		if n != 0 {
			val.num = 1
		}
	default:
		return "", value{}, false
	}
	return borrow(kb), val, true
}

// decodeKeyValueChecked reads a KeyValue field by field as pdata does.
func decodeKeyValueChecked(b []byte, dst attrs) (attrs, error) {
	const depth = 1 // pdata counts the KeyValue itself
	var key string
	var val value
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return dst, err
		}
		var v []byte
		switch num {
		case 1:
			if v, pos, err = consumeField(b, p, wt, "key"); err == nil {
				key = borrow(v)
			}
		case 2:
			if v, pos, err = consumeField(b, p, wt, "value"); err == nil {
				err = decodeAnyValue(v, depth, &val)
			}
		case 3:
			_, pos, err = consumeNumber(b, p, wt, wireVarint, "key_strindex")
		default:
			pos, err = consumeUnknown(b, p, wt)
		}
		if err != nil {
			return dst, err
		}
	}
	if k := lookupAttrKey(key); k != akNone {
		dst = append(dst, keyedOf(k, val))
	}
	return dst, nil
}

// decodeAnyValue reads an attribute value into val. A later oneof field
// replaces an earlier one; a repeated value message merges into val, as
// protobuf (and pdata) do.
func decodeAnyValue(b []byte, depth int, val *value) error {
	if depth >= recursionLimit {
		return errRecursionDepth
	}
	depth++
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return err
		}
		var v []byte
		var n uint64
		switch num {
		case 1:
			if v, pos, err = consumeField(b, p, wt, "string_value"); err == nil {
				*val = value{typ: vStr, str: borrow(v)}
			}
		case 2:
			if n, pos, err = consumeNumber(b, p, wt, wireVarint, "bool_value"); err == nil {
				*val = value{typ: vBool}
				if n != 0 {
					val.num = 1
				}
			}
		case 3:
			if n, pos, err = consumeNumber(b, p, wt, wireVarint, "int_value"); err == nil {
				*val = value{typ: vInt, num: n}
			}
		case 4:
			if n, pos, err = consumeNumber(b, p, wt, wireI64, "double_value"); err == nil {
				*val = value{typ: vDouble, num: n}
			}
		case 5:
			if v, pos, err = consumeField(b, p, wt, "array_value"); err == nil {
				err = validate(v, msgArrayValue, depth)
				*val = value{typ: vOther}
			}
		case 6:
			if v, pos, err = consumeField(b, p, wt, "kvlist_value"); err == nil {
				err = validate(v, msgKeyValueList, depth)
				*val = value{typ: vOther}
			}
		case 7:
			if v, pos, err = consumeField(b, p, wt, "bytes_value"); err == nil {
				*val = value{typ: vBytes, str: borrow(v)}
			}
		case 8:
			// string_value_strindex (profiles only): pcommon reads it as
			// an empty value.
			if _, pos, err = consumeNumber(b, p, wt, wireVarint, "string_value_strindex"); err == nil {
				*val = value{}
			}
		default:
			pos, err = consumeUnknown(b, p, wt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func readSpanID(dst *[8]byte, v []byte, field string) error {
	if err := checkID(v, 8, field); err != nil {
		return err
	}
	*dst = [8]byte{}
	copy(dst[:], v)
	return nil
}

// checkID accepts an id of size bytes or an empty one, as pdata does.
func checkID(v []byte, size int, field string) error {
	if len(v) != 0 && len(v) != size {
		return errors.New(field + " is " + strconv.Itoa(len(v)) + " bytes, want " + strconv.Itoa(size))
	}
	return nil
}

// borrow views b as a string without copying; it lives as long as b's
// memory is not reused.
func borrow(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// pathError locates a decoding error in the message tree.
type pathError struct {
	path string
	err  error
}

func (e *pathError) Error() string { return e.path + ": " + e.err.Error() }
func (e *pathError) Unwrap() error { return e.err }

// at prefixes err's location with field (field[i] when i ≥ 0); nil stays
// nil, so the happy path costs a comparison.
func at(err error, field string, i int) error {
	if err == nil {
		return nil
	}
	if i >= 0 {
		field += "[" + strconv.Itoa(i) + "]"
	}
	var pe *pathError
	if errors.As(err, &pe) {
		return &pathError{path: field + "." + pe.path, err: pe.err}
	}
	return &pathError{path: field, err: err}
}

// The wire helpers below follow pdata's internal/proto (v1.71.0) step for
// step, so the two decoders agree on every malformed input.

type wireType int8

const (
	wireVarint     wireType = 0
	wireI64        wireType = 1
	wireLen        wireType = 2
	wireStartGroup wireType = 3
	wireEndGroup   wireType = 4
	wireI32        wireType = 5

	recursionLimit = 100
)

var (
	errInvalidLength   = errors.New("negative length")
	errIntOverflow     = errors.New("varint overflows 64 bits")
	errRecursionDepth  = errors.New("values nested deeper than 100")
	errUnexpectedGroup = errors.New("unexpected end of group")
	errTruncated       = errors.New("truncated: " + io.ErrUnexpectedEOF.Error())
)

func consumeVarint(b []byte, pos int) (uint64, int, error) {
	if pos < len(b) && b[pos] < 0x80 {
		return uint64(b[pos]), pos + 1, nil
	}
	var num uint64
	for shift := uint(0); ; shift += 7 {
		if shift >= 64 {
			return 0, 0, errIntOverflow
		}
		if pos >= len(b) {
			return 0, 0, errTruncated
		}
		c := b[pos]
		pos++
		num |= uint64(c&0x7F) << shift
		if c < 0x80 {
			return num, pos, nil
		}
	}
}

func consumeTag(b []byte, pos int) (int32, wireType, int, error) {
	tag, pos, err := consumeVarint(b, pos)
	if err != nil {
		return 0, 0, 0, err
	}
	num := int32(tag >> 3)
	if num <= 0 {
		return 0, 0, 0, errors.New("illegal field number " + strconv.Itoa(int(num)))
	}
	return num, wireType(tag & 7), pos, nil
}

func consumeLen(b []byte, pos int) (int, int, error) {
	n, pos, err := consumeVarint(b, pos)
	if err != nil {
		return 0, 0, err
	}
	length := int(n)
	if length < 0 {
		return 0, 0, errInvalidLength
	}
	pos += length
	if pos < 0 || pos > len(b) {
		return 0, 0, errTruncated
	}
	return length, pos, nil
}

// consumeField reads a length-delimited field's bytes.
func consumeField(b []byte, pos int, wt wireType, field string) ([]byte, int, error) {
	if wt != wireLen {
		return nil, 0, wrongWireType(field, wt)
	}
	n, end, err := consumeLen(b, pos)
	if err != nil {
		return nil, 0, err
	}
	return b[end-n : end], end, nil
}

// consumeNumber reads a varint, fixed64 or fixed32 field of wire type want.
func consumeNumber(b []byte, pos int, wt, want wireType, field string) (uint64, int, error) {
	if wt != want {
		return 0, 0, wrongWireType(field, wt)
	}
	switch want {
	case wireI64:
		if pos+8 < 0 || pos+8 > len(b) {
			return 0, 0, errTruncated
		}
		return binary.LittleEndian.Uint64(b[pos:]), pos + 8, nil
	case wireI32:
		if pos+4 < 0 || pos+4 > len(b) {
			return 0, 0, errTruncated
		}
		return uint64(binary.LittleEndian.Uint32(b[pos:])), pos + 4, nil
	}
	return consumeVarint(b, pos)
}

func wrongWireType(field string, wt wireType) error {
	return errors.New("wrong wire type " + strconv.Itoa(int(wt)) + " for field " + field)
}

// consumeUnknown skips a field no schema names (pdata's ConsumeUnknown,
// groups included).
func consumeUnknown(b []byte, pos int, wt wireType) (int, error) {
	var err error
	depth := 0
	for pos < len(b) {
		switch wt {
		case wireVarint:
			_, pos, err = consumeVarint(b, pos)
			return pos, err
		case wireI64:
			_, pos, err = consumeNumber(b, pos, wt, wt, "")
			return pos, err
		case wireLen:
			_, pos, err = consumeLen(b, pos)
			return pos, err
		case wireStartGroup:
			depth++
		case wireEndGroup:
			if depth == 0 {
				return 0, errUnexpectedGroup
			}
			depth--
		case wireI32:
			_, pos, err = consumeNumber(b, pos, wt, wt, "")
			return pos, err
		default:
			return 0, errors.New("illegal wire type " + strconv.Itoa(int(wt)))
		}
		if depth == 0 {
			return pos, nil
		}
		if _, wt, pos, err = consumeTag(b, pos); err != nil {
			return 0, err
		}
	}
	return 0, errTruncated
}
