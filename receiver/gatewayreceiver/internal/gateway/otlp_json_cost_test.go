package gateway

import (
	"runtime"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// repeatJSON is n copies of elem, comma-separated.
func repeatJSON(elem string, n int) string {
	return strings.TrimSuffix(strings.Repeat(elem+",", n), ",")
}

// otlpShapes are OTLP JSON exports made of n elements of one kind each: the
// shapes for which pdata keeps the most per body byte.
func otlpShapes(n int) map[string]string {
	span := func(inner string) string {
		return `{"resourceSpans":[{"scopeSpans":[{"spans":[` + inner + `]}]}]}`
	}
	return map[string]string{
		"resourceSpans":        `{"resourceSpans":[` + repeatJSON(`{}`, n) + `]}`,
		"resource_spans":       `{"resource_spans":[` + repeatJSON(`{}`, n) + `]}`,
		"scopeSpans":           `{"resourceSpans":[{"scopeSpans":[` + repeatJSON(`{}`, n) + `]}]}`,
		"spans":                span(repeatJSON(`{}`, n)),
		"spans, escaped key":   `{"resourceSpans":[{"scopeSpans":[{"sp\u0061ns":[` + repeatJSON(`{}`, n) + `]}]}]}`,
		"spans with a field":   span(repeatJSON(`{"droppedAttributesCount":1}`, n)),
		"span attributes":      span(`{"attributes":[` + repeatJSON(`{}`, n) + `]}`),
		"span attributes, kv":  span(`{"attributes":[` + repeatJSON(`{"key":"k","value":{"stringValue":"v"}}`, n) + `]}`),
		"resource attributes":  `{"resourceSpans":[{"resource":{"attributes":[` + repeatJSON(`{}`, n) + `]}}]}`,
		"events":               span(`{"events":[` + repeatJSON(`{}`, n) + `]}`),
		"event attributes":     span(`{"events":[{"attributes":[` + repeatJSON(`{}`, n) + `]}]}`),
		"links":                span(`{"links":[` + repeatJSON(`{}`, n) + `]}`),
		"array values":         span(`{"attributes":[{"key":"a","value":{"arrayValue":{"values":[` + repeatJSON(`{}`, n) + `]}}}]}`),
		"kvlist values":        span(`{"attributes":[{"key":"a","value":{"kvlistValue":{"values":[` + repeatJSON(`{}`, n) + `]}}}]}`),
		"spans, spaced":        "{ \"resourceSpans\" : [ { \"scopeSpans\" : [ { \"spans\" \n: [ " + repeatJSON(`{ }`, n) + " ] } ] } ] }",
		"unknown array of {}s": `{"resourceSpans":[{"scopeSpans":[{"extra":[` + repeatJSON(`{}`, n) + `]}]}]}`,
	}
}

// TestOTLPJSONCostCoversPdata: for every element kind pdata keeps a struct
// for, the estimate is at least what pdata's decoding of the body holds
// (its heap after a collection), so a pdata upgrade that keeps more fails
// here; and the elements of an array pdata skips cost nothing.
func TestOTLPJSONCostCoversPdata(t *testing.T) {
	const n = 50_000
	for name, body := range otlpShapes(n) {
		c, err := OTLPJSONCost([]byte(body), 416)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		held := heldBy(t, name, func() (ptrace.Traces, error) { return (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(body)) })
		t.Logf("%-22s body %8d B, pdata holds %9d B, estimate %9d B (%d elements, %d spans)", name, len(body), held, c.Bytes, c.Elements, c.Spans)
		if name == "unknown array of {}s" {
			// Its resource and scope are the only elements.
			if c.Elements != 2 || c.Bytes != 2*int64(len(body))+elementBytes[arrayResourceSpans]+elementBytes[arrayScopeSpans] {
				t.Errorf("%s: %d elements, %d bytes; want the resource and the scope only", name, c.Elements, c.Bytes)
			}
			continue
		}
		if c.Elements < n {
			t.Errorf("%s: %d elements counted, want at least %d", name, c.Elements, n)
		}
		if c.Bytes < held {
			t.Errorf("%s: estimate %d bytes, pdata holds %d", name, c.Bytes, held)
		}
		if strings.HasPrefix(name, "spans") && c.Spans != n {
			t.Errorf("%s: %d spans, want %d", name, c.Spans, n)
		}
	}
}

// OTLPJSONCost refuses what CheckJSONDepth refuses, at the same depth.
func TestOTLPJSONCostDepth(t *testing.T) {
	for _, body := range []string{
		strings.Repeat("[", 416) + strings.Repeat("]", 416),
		strings.Repeat("[", 417) + strings.Repeat("]", 417),
		`{"a":` + strings.Repeat(`{"b":`, 415) + `1` + strings.Repeat("}", 416),
		`{"a":` + strings.Repeat(`{"b":`, 416) + `1` + strings.Repeat("}", 417),
		`{"a":"` + strings.Repeat("[", 1000) + `"}`, // brackets in a string
		`{"a":"\"` + strings.Repeat("[", 1000) + `"}`,
		`]]]]{`,
	} {
		_, got := OTLPJSONCost([]byte(body), 416)
		want := CheckJSONDepth([]byte(body), 416)
		if (got == nil) != (want == nil) || got != nil && got.Error() != want.Error() {
			t.Errorf("%.40q…: OTLPJSONCost %v, CheckJSONDepth %v", body, got, want)
		}
	}
}

// FuzzOTLPJSONCost: whatever the bytes, the estimate never panics, refuses
// exactly what CheckJSONDepth refuses, and is at least twice the body's
// length.
func FuzzOTLPJSONCost(f *testing.F) {
	for _, body := range otlpShapes(3) {
		f.Add([]byte(body))
	}
	f.Add([]byte(`{"spans":[{},{"spans":[{}]}],"x":"\"spans\":[{}]"}`))
	f.Add([]byte(`{"sp\u0061ns":[{}],"bad\q":[{}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := OTLPJSONCost(b, 20)
		if want := CheckJSONDepth(b, 20); (err == nil) != (want == nil) {
			t.Fatalf("OTLPJSONCost %v, CheckJSONDepth %v", err, want)
		}
		if err == nil && (c.Bytes < 2*int64(len(b)) || c.Spans > c.Elements) {
			t.Fatalf("cost %+v for %d bytes", c, len(b))
		}
	})
}

// TestOTLPProtoCostCoversPdata: the same shapes as protobuf, which pdata
// unmarshals for a receiver in a traces pipeline: the estimate is at least
// what pdata holds, and counts the elements.
func TestOTLPProtoCostCoversPdata(t *testing.T) {
	const n = 50_000
	for name, body := range otlpShapes(n) {
		pb := protoOf(t, body)
		c := OTLPProtoCost(pb)
		held := heldBy(t, name, func() (ptrace.Traces, error) { return (&ptrace.ProtoUnmarshaler{}).UnmarshalTraces(pb) })
		t.Logf("%-22s protobuf %8d B, pdata holds %9d B, estimate %9d B (%d elements, %d spans)", name, len(pb), held, c.Bytes, c.Elements, c.Spans)
		if c.Bytes < held {
			t.Errorf("%s: estimate %d bytes, pdata holds %d", name, c.Bytes, held)
		}
		if name != "unknown array of {}s" && c.Elements < n {
			t.Errorf("%s: %d elements counted, want at least %d", name, c.Elements, n)
		}
	}
}

// FuzzOTLPProtoCost: whatever the bytes, the walk never panics and the
// estimate is at least twice the body.
func FuzzOTLPProtoCost(f *testing.F) {
	for _, body := range otlpShapes(3) {
		f.Add(protoOf(f, body))
	}
	f.Add([]byte{0x0a, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		if c := OTLPProtoCost(b); c.Bytes < 2*int64(len(b)) || c.Spans > c.Elements {
			t.Fatalf("cost %+v for %d bytes", c, len(b))
		}
	})
}

// heldBy is what decode's traces hold on the heap, after a collection.
func heldBy(t *testing.T, name string, decode func() (ptrace.Traces, error)) int64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	td, err := decode()
	if err != nil {
		t.Fatalf("%s: pdata: %v", name, err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(td)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// protoOf is OTLP JSON body as protobuf (its pdata gone once returned).
func protoOf(t testing.TB, body string) []byte {
	t.Helper()
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	pb, err := (&ptrace.ProtoMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	return pb
}
