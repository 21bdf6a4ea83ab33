package gateway

// The OTLP messages CountProto checks but never reads (span events and links,
// entity refs, nested attribute values) are checked against this schema:
// pdata unmarshals them, so a body it refuses for a bad one must be refused
// here too.

type msgType uint8

const (
	msgNone msgType = iota
	msgKeyValue
	msgAnyValue
	msgArrayValue
	msgKeyValueList
	msgEntityRef
	msgSpanEvent
	msgSpanLink
)

// fieldSpec is one known field: its wire type, the message it holds (when
// length-delimited), or the id size it must have (0 or idLen bytes).
type fieldSpec struct {
	num   int32
	wt    wireType
	msg   msgType
	idLen int
	name  string
}

var schema = [...][]fieldSpec{
	msgKeyValue: {{1, wireLen, msgNone, 0, "key"}, {2, wireLen, msgAnyValue, 0, "value"}, {3, wireVarint, msgNone, 0, "key_strindex"}},
	msgAnyValue: {{1, wireLen, msgNone, 0, "string_value"}, {2, wireVarint, msgNone, 0, "bool_value"},
		{3, wireVarint, msgNone, 0, "int_value"}, {4, wireI64, msgNone, 0, "double_value"},
		{5, wireLen, msgArrayValue, 0, "array_value"}, {6, wireLen, msgKeyValueList, 0, "kvlist_value"},
		{7, wireLen, msgNone, 0, "bytes_value"}, {8, wireVarint, msgNone, 0, "string_value_strindex"}},
	msgArrayValue:   {{1, wireLen, msgAnyValue, 0, "values"}},
	msgKeyValueList: {{1, wireLen, msgKeyValue, 0, "values"}},
	msgEntityRef: {{1, wireLen, msgNone, 0, "schema_url"}, {2, wireLen, msgNone, 0, "type"},
		{3, wireLen, msgNone, 0, "id_keys"}, {4, wireLen, msgNone, 0, "description_keys"}},
	msgSpanEvent: {{1, wireI64, msgNone, 0, "time_unix_nano"}, {2, wireLen, msgNone, 0, "name"},
		{3, wireLen, msgKeyValue, 0, "attributes"}, {4, wireVarint, msgNone, 0, "dropped_attributes_count"}},
	msgSpanLink: {{1, wireLen, msgNone, 16, "trace_id"}, {2, wireLen, msgNone, 8, "span_id"},
		{3, wireLen, msgNone, 0, "trace_state"}, {4, wireLen, msgKeyValue, 0, "attributes"},
		{5, wireVarint, msgNone, 0, "dropped_attributes_count"}, {6, wireI32, msgNone, 0, "flags"}},
}

// nested reports whether pdata counts m toward its recursion limit (the
// attribute value types; a KeyValue under any other message starts at 0).
func nested(m msgType) bool { return m <= msgKeyValueList }

// validate checks that b is a well-formed message of type m.
func validate(b []byte, m msgType, depth int) error {
	if nested(m) {
		if depth >= recursionLimit {
			return errRecursionDepth
		}
		depth++
	} else {
		depth = 0
	}
	for pos := 0; pos < len(b); {
		num, wt, p, err := consumeTag(b, pos)
		if err != nil {
			return err
		}
		f := fieldOf(m, num)
		if f == nil {
			if pos, err = consumeUnknown(b, p, wt); err != nil {
				return err
			}
			continue
		}
		if f.wt != wireLen {
			if _, pos, err = consumeNumber(b, p, wt, f.wt, f.name); err != nil {
				return err
			}
			continue
		}
		var v []byte
		if v, pos, err = consumeField(b, p, wt, f.name); err != nil {
			return err
		}
		switch {
		case f.idLen > 0:
			err = checkID(v, f.idLen, f.name)
		case f.msg != msgNone:
			err = at(validate(v, f.msg, depth), f.name, -1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func fieldOf(m msgType, num int32) *fieldSpec {
	fields := schema[m]
	for i := range fields {
		if fields[i].num == num {
			return &fields[i]
		}
	}
	return nil
}
