package gateway

import (
	"os"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/protobuf/encoding/protowire"
)

func marshal(t testing.TB, td ptrace.Traces) []byte {
	t.Helper()
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// richTrace has what the mappers skip but pdata still checks: span events
// and links, nested attribute values, scope attributes, entity-free resource.
func richTrace() ptrace.Traces {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{})
	envoyTrace(td, "503")
	ss := td.ResourceSpans().At(0).ScopeSpans().At(0)
	ss.Scope().Attributes().PutStr("otel.scope.x", "y")
	root := ss.Spans().At(0)
	root.SetTraceID(pcommon.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	root.Status().SetCode(ptrace.StatusCodeError)
	root.Status().SetMessage("boom")
	ev := root.Events().AppendEmpty()
	ev.SetName("exception")
	ev.Attributes().PutStr("exception.message", "x")
	l := root.Links().AppendEmpty()
	l.SetSpanID(pcommon.SpanID{7, 7, 7, 7, 7, 7, 7, 7})
	arr := root.Attributes().PutEmptySlice("http.request.header.accept")
	arr.AppendEmpty().SetStr("text/html")
	arr.AppendEmpty().SetEmptyMap().PutInt("k", 1)
	root.Attributes().PutEmptyBytes("gen_ai.request.model").FromRaw([]byte("abc"))
	root.Attributes().PutBool("http.route", true)
	return td
}

// legacyBody encodes a ResourceSpans whose spans sit in the deprecated
// instrumentation_library_spans field (1000) only, as old SDKs sent them.
func legacyBody(t testing.TB, withScopeSpans bool) []byte {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{})
	rs := marshalRS(t, td)
	// Move the scope_spans (field 2) of the ResourceSpans to field 1000.
	var out []byte
	for len(rs) > 0 {
		num, typ, n := protowire.ConsumeTag(rs)
		m := protowire.ConsumeFieldValue(num, typ, rs[n:])
		field := rs[n : n+m]
		if num == 2 {
			out = protowire.AppendTag(out, 1000, protowire.BytesType)
			out = append(out, field...)
			if withScopeSpans {
				out = protowire.AppendTag(out, 2, protowire.BytesType)
				out = protowire.AppendBytes(out, nil)
			}
		} else {
			out = protowire.AppendTag(out, num, typ)
			out = append(out, field...)
		}
		rs = rs[n+m:]
	}
	body := protowire.AppendTag(nil, 1, protowire.BytesType)
	return protowire.AppendBytes(body, out)
}

// marshalRS returns the bytes of the first ResourceSpans of td's request.
func marshalRS(t testing.TB, td ptrace.Traces) []byte {
	b := marshal(t, td)
	_, _, n := protowire.ConsumeTag(b)
	v, _ := protowire.ConsumeBytes(b[n:])
	return v
}

// differential runs body through pdata + Count and through CountProto and
// reports how they differ; "" when they agree.
func differential(body []byte) string {
	req := ptraceotlp.NewExportRequest()
	pdataErr := req.UnmarshalProto(body)
	var c SpanCounter
	var fromProto []Event
	pe, pc, protoErr := c.CountProto(body, func(e *Event) { fromProto = append(fromProto, *e) })
	if (pdataErr == nil) != (protoErr == nil) {
		return "pdata error: " + errText(pdataErr) + "; CountProto error: " + errText(protoErr)
	}
	if pdataErr != nil {
		if pe != 0 || pc != 0 || len(fromProto) != 0 {
			return "a refused body reported events"
		}
		return ""
	}
	var fromPdata []Event
	examined, counted := c.Count(req.Traces(), func(e *Event) { fromPdata = append(fromPdata, *e) })
	if pe != examined || pc != counted || !slices.EqualFunc(fromProto, fromPdata, sameEvent) {
		return "events differ"
	}
	return ""
}

// sameEvent is == with NaN equal to itself (a fuzzed double can be NaN).
func sameEvent(a, b Event) bool {
	if a == b {
		return true
	}
	return a.TotalMS != a.TotalMS && b.TotalMS != b.TotalMS || a.UpstreamMS != a.UpstreamMS && b.UpstreamMS != b.UpstreamMS
}

func errText(err error) string {
	if err == nil {
		return "none"
	}
	return err.Error()
}

func TestCountProtoMatchesPdata(t *testing.T) {
	bodies := map[string][]byte{
		"rich":                 marshal(t, richTrace()),
		"legacy only":          legacyBody(t, false),
		"legacy beside scopes": legacyBody(t, true),
		"empty":                nil,
	}
	for name, body := range bodies {
		if d := differential(body); d != "" {
			t.Errorf("%s: %s", name, d)
		}
	}
	var c SpanCounter
	examined, counted, err := c.CountProto(legacyBody(t, false), func(*Event) {})
	if err != nil || examined != 3 || counted != 1 {
		t.Errorf("legacy only: examined %d, counted %d, err %v; want 3, 1 (pdata migrates the deprecated field)", examined, counted, err)
	}
	examined, counted, err = c.CountProto(legacyBody(t, true), func(*Event) {})
	if err != nil || examined != 0 || counted != 0 {
		t.Errorf("legacy beside scope_spans: examined %d, counted %d, err %v; want 0, 0", examined, counted, err)
	}
}

func TestCountProtoErrorsNameTheField(t *testing.T) {
	td := richTrace()
	good := marshal(t, td)
	cases := []struct {
		name string
		body []byte
		want string
	}{
		{"truncated", good[:len(good)-3], "truncated"},
		{"bad span id", oneSpan(field(5, []byte("kong")), field(2, make([]byte, 7))),
			"resource_spans[0].scope_spans[0].spans[0]: span_id is 7 bytes, want 8"},
		{"bad link", oneSpan(field(13, field(2, make([]byte, 9)))), "spans[0].links: span_id is 9 bytes, want 8"},
		{"bad nested value", oneSpan(field(9, slices.Concat(field(1, []byte("k")), field(2, field(5, []byte{0x0a, 0x05}))))),
			"spans[0].attributes[0]: truncated"},
		{"wrong wire type", []byte{0x08, 0x01}, "wrong wire type 0 for field resource_spans"},
		{"field zero", []byte{0x00}, "illegal field number 0"},
	}
	for _, c := range cases {
		if d := differential(c.body); d != "" {
			t.Errorf("%s: %s", c.name, d)
		}
		var sc SpanCounter
		_, _, err := sc.CountProto(c.body, func(*Event) { t.Errorf("%s: reported an event", c.name) })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// field encodes one length-delimited field.
func field(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
}

// oneSpan is a request with one ResourceSpans, one ScopeSpans and one span
// made of spanFields.
func oneSpan(spanFields ...[]byte) []byte {
	return field(1, field(2, field(2, slices.Concat(spanFields...))))
}

func FuzzCountProto(f *testing.F) {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
	f.Add(marshal(f, td))
	f.Add(marshal(f, richTrace()))
	f.Add(legacyBody(f, false))
	f.Add(legacyBody(f, true))
	for _, name := range []string{"traefik-3.6-detailed.json", "traefik-3.6-minimal.json"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(marshal(f, td))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if d := differential(body); d != "" {
			t.Fatal(d)
		}
	})
}
