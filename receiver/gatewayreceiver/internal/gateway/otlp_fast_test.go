package gateway

import (
	"math/rand/v2"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"google.golang.org/protobuf/encoding/protowire"
)

// The fast readings (decodeSpanFast, keyValueFast) must read what they
// accept exactly as the checked readings do, and accept nothing those
// refuse; these tests hold them to that directly, beside the differential
// test against pdata, which sees only the events.

// reorder re-encodes message b with its fields in reverse order, each
// length-delimited field whose number has an entry in nested re-encoded by
// it. pdata writes fields last to first; reordering its output gives the
// first-to-last order of most other encoders (Kong's among them).
func reorder(b []byte, nested map[protowire.Number]func([]byte) []byte) []byte {
	var fields [][]byte
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if n < 0 || m < 0 {
			panic("reorder: malformed input")
		}
		f := protowire.AppendTag(nil, num, typ)
		if fn := nested[num]; fn != nil && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			f = protowire.AppendBytes(f, fn(v))
		} else {
			f = append(f, b[n:n+m]...)
		}
		fields = append(fields, f)
		b = b[n+m:]
	}
	slices.Reverse(fields)
	return slices.Concat(fields...)
}

func reorderKeyValue(b []byte) []byte { return reorder(b, nil) }

func reorderSpan(b []byte) []byte {
	return reorder(b, map[protowire.Number]func([]byte) []byte{9: reorderKeyValue})
}

// ascending re-encodes an ExportTraceServiceRequest with its resource
// spans, resources, scope spans, spans and attributes in field order.
func ascending(body []byte) []byte {
	resource := func(b []byte) []byte { return reorder(b, map[protowire.Number]func([]byte) []byte{1: reorderKeyValue}) }
	scopeSpans := func(b []byte) []byte { return reorder(b, map[protowire.Number]func([]byte) []byte{2: reorderSpan}) }
	rs := func(b []byte) []byte {
		return reorder(b, map[protowire.Number]func([]byte) []byte{1: resource, 2: scopeSpans})
	}
	return reorder(body, map[protowire.Number]func([]byte) []byte{1: rs})
}

// spansOf returns the encoded spans of a request, as pdata wrote them and
// in field order.
func spansOf(t testing.TB, td ptrace.Traces) [][]byte {
	var out [][]byte
	var walk func(b []byte, path []protowire.Number)
	walk = func(b []byte, path []protowire.Number) {
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if num == path[0] && typ == protowire.BytesType {
				v, _ := protowire.ConsumeBytes(b[n:])
				if len(path) == 1 {
					out = append(out, v, reorderSpan(v))
				} else {
					walk(v, path[1:])
				}
			}
			b = b[n+m:]
		}
	}
	walk(marshal(t, td), []protowire.Number{1, 2, 2})
	return out
}

// checkSpanFast decodes span b both ways and reports how they differ.
func checkSpanFast(t *testing.T, b []byte) (fastAccepted bool) {
	t.Helper()
	var fast, checked SpanCounter
	s := spanRec{}
	ok := fast.decodeSpanFast(b, &s)
	err := checked.decodeSpanChecked(b)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("decodeSpanFast accepted a span decodeSpanChecked refuses (%v): %x", err, b)
	}
	s.attrHi = int32(len(fast.attrs))
	if len(checked.spans) != 1 || s != checked.spans[0] || !slices.Equal(fast.attrs, checked.attrs) {
		t.Fatalf("decodeSpanFast read\n%+v %+v\ndecodeSpanChecked\n%+v %+v\nfrom %x", s, fast.attrs, checked.spans, checked.attrs, b)
	}
	return true
}

func TestSpanFastMatchesChecked(t *testing.T) {
	td := kongLoadExport(rand.New(rand.NewPCG(3, 4)), 4, 0)
	for i, b := range append(spansOf(t, td), spansOf(t, richTrace())...) {
		if !checkSpanFast(t, b) && i < 16 {
			t.Errorf("span %d of the Kong export: decodeSpanFast declined it", i)
		}
	}
	// The bodies the fast readings decline or refuse answer as pdata does,
	// and so do the Kong bodies in field order.
	body := marshal(t, td)
	for name, b := range map[string][]byte{
		"field order":           ascending(body),
		"rich in field order":   ascending(marshal(t, richTrace())),
		"two-byte tag for kind": oneSpan(field(5, []byte("kong")), protowire.AppendVarint([]byte{0xb0, 0x00}, 2)),
		"kind as bytes":         oneSpan(field(6, []byte{2})),
		"trace id of 15":        oneSpan(field(1, make([]byte, 15))),
		"three-byte length":     oneSpan(field(5, make([]byte, 1<<14))),
		"flags":                 oneSpan(field(5, []byte("kong")), []byte{0x85, 0x01, 1, 0, 0, 0}),
	} {
		if d := differential(b); d != "" {
			t.Errorf("%s: %s", name, d)
		}
	}
}

func FuzzSpanFast(f *testing.F) {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
	for _, b := range append(spansOf(f, td), spansOf(f, richTrace())...) {
		f.Add(b)
	}
	for _, b := range spansOf(f, kongLoadExport(rand.New(rand.NewPCG(3, 4)), 2, 0)) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSpanFast(t, b) })
}

func FuzzKeyValueFast(f *testing.F) {
	for _, kv := range [][]byte{
		slices.Concat(field(1, []byte("http.route")), field(2, field(1, []byte("/a")))),
		slices.Concat(field(2, []byte{0x18, 0xc8, 0x01}), field(1, []byte("http.status_code"))),
		slices.Concat(field(2, []byte{0x21, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f}), field(1, []byte("try_count"))),
		slices.Concat(field(2, []byte{0x10, 1}), field(1, []byte("x"))),
		slices.Concat(field(1, []byte("k")), field(2, nil)),
	} {
		f.Add(kv)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		key, val, ok := keyValueFast(b)
		want, err := decodeKeyValueChecked(b, nil)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("keyValueFast accepted a KeyValue decodeKeyValueChecked refuses (%v): %x", err, b)
		}
		var got attrs
		if k := lookupAttrKey(key); k != akNone {
			got = attrs{keyedOf(k, val)}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("keyValueFast read %+v, decodeKeyValueChecked %+v, from %x", got, want, b)
		}
	})
}
