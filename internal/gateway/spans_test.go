package gateway

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// kongTrace builds what Kong ≥ 3.4 exports for one proxied request
// (gateway-formats.md §1a): root `kong` SERVER span with old-style HTTP
// attributes, plus router and balancer children that must not be counted.
func kongTrace(td ptrace.Traces, parent pcommon.SpanID) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "kong")
	rs.Resource().Attributes().PutStr("service.instance.id", "9343ac04-81d6-4ac8-bb5a-c7322c823368")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("kong-internal")
	ss.Scope().SetVersion("0.1.0")

	root := ss.Spans().AppendEmpty()
	root.SetName("kong")
	root.SetKind(ptrace.SpanKindServer)
	root.SetSpanID(pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1})
	root.SetParentSpanID(parent)
	a := root.Attributes()
	a.PutStr("http.method", "POST")
	a.PutStr("http.url", "http://localhost/anything?secret=1")
	a.PutStr("http.route", "/anything")
	a.PutInt("http.status_code", 200)
	a.PutStr("http.flavor", "1.1")

	router := ss.Spans().AppendEmpty()
	router.SetName("kong.router")
	router.SetKind(ptrace.SpanKindInternal)
	router.SetParentSpanID(root.SpanID())

	balancer := ss.Spans().AppendEmpty()
	balancer.SetName("kong.balancer")
	balancer.SetKind(ptrace.SpanKindClient)
	balancer.SetParentSpanID(root.SpanID())
	balancer.Attributes().PutDouble("try_count", 1)
	balancer.Attributes().PutDouble("net.peer.port", 80)
}

// envoyTrace builds an Envoy ingress span: every tag is a string
// (gateway-formats.md §3b), there is no http.route, and the router child span
// is CLIENT.
func envoyTrace(td ptrace.Traces, status string) {
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "front-envoy")
	rs.Resource().Attributes().PutStr("service.namespace", "edge")
	ss := rs.ScopeSpans().AppendEmpty()
	root := ss.Spans().AppendEmpty()
	root.SetName("ingress")
	root.SetKind(ptrace.SpanKindServer)
	root.SetSpanID(pcommon.SpanID{2, 2, 2, 2, 2, 2, 2, 2})
	a := root.Attributes()
	a.PutStr("http.method", "get")
	a.PutStr("http.status_code", status)
	a.PutStr("response_flags", "UT")
	a.PutStr("upstream_cluster", "fake_cluster")
	child := ss.Spans().AppendEmpty()
	child.SetName("router fake_cluster egress")
	child.SetKind(ptrace.SpanKindClient)
	child.SetParentSpanID(root.SpanID())
}

func countAll(t *testing.T, td ptrace.Traces) []Request {
	t.Helper()
	var c SpanCounter
	var got []Request
	_, counted := c.Count(td, func(r Request) { got = append(got, r) })
	if counted != len(got) {
		t.Fatalf("Count returned %d but reported %d requests", counted, len(got))
	}
	return got
}

func TestCountKongAndEnvoy(t *testing.T) {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{})
	envoyTrace(td, "503")
	got := countAll(t, td)
	want := []Request{
		{Service: "kong", Route: "/anything", Method: "POST", StatusCode: 200},
		{Namespace: "edge", Service: "front-envoy", Method: "GET", StatusCode: 503},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d requests %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRootWithRemoteParentCounts(t *testing.T) {
	td := ptrace.NewTraces()
	// A client sent a traceparent: Kong's root span has a parent that is not
	// in the export.
	kongTrace(td, pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
	if got := countAll(t, td); len(got) != 1 {
		t.Fatalf("counted %d requests, want 1: %+v", len(got), got)
	}
}

func TestNestedServerSpanNotCountedTwice(t *testing.T) {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{})
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	nested := spans.AppendEmpty()
	nested.SetKind(ptrace.SpanKindServer)
	nested.SetParentSpanID(spans.At(0).SpanID())
	nested.Attributes().PutStr("http.method", "GET")
	if got := countAll(t, td); len(got) != 1 {
		t.Fatalf("counted %d requests, want 1 (nested SERVER span skipped): %+v", len(got), got)
	}
}

func TestStableNamesWinOverOldOnes(t *testing.T) {
	attrs := pcommon.NewMap()
	attrs.PutStr("http.request.method", "PUT")
	attrs.PutStr("http.method", "GET")
	attrs.PutInt("http.response.status_code", 204)
	attrs.PutInt("http.status_code", 502) // APISIX ≤ 3.16: the upstream's status
	attrs.PutStr("http.route", "/items/{id}")
	got := requestOf(Request{Service: "gw"}, attrs)
	want := Request{Service: "gw", Route: "/items/{id}", Method: "PUT", StatusCode: 204}
	if got != want {
		t.Fatalf("requestOf = %+v, want %+v", got, want)
	}
}

func TestStatusEncodings(t *testing.T) {
	cases := []struct {
		name string
		set  func(pcommon.Value)
		want int64
	}{
		{"int", func(v pcommon.Value) { v.SetInt(404) }, 404},
		{"double from Lua", func(v pcommon.Value) { v.SetDouble(201) }, 201},
		{"fractional double", func(v pcommon.Value) { v.SetDouble(200.5) }, 0},
		{"NaN", func(v pcommon.Value) { v.SetDouble(math.NaN()) }, 0},
		{"envoy string", func(v pcommon.Value) { v.SetStr("503") }, 503},
		{"envoy no response", func(v pcommon.Value) { v.SetStr("0") }, 0},
		{"garbage", func(v pcommon.Value) { v.SetStr("2OO") }, 0},
		{"out of range", func(v pcommon.Value) { v.SetInt(1 << 40) }, 0},
		{"bool", func(v pcommon.Value) { v.SetBool(true) }, 0},
	}
	for _, c := range cases {
		v := pcommon.NewValueEmpty()
		c.set(v)
		if got := statusOf(v); got != c.want {
			t.Errorf("%s: statusOf = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestNormalizeMethod(t *testing.T) {
	cases := map[string]string{
		"GET": "GET", "get": "GET", "Patch": "PATCH", "OPTIONS": "OPTIONS",
		"PURGE": OtherMethod, "": OtherMethod, "GET\n": OtherMethod,
	}
	for in, want := range cases {
		if got := NormalizeMethod(in); got != want {
			t.Errorf("NormalizeMethod(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCountDoesNotAllocate(t *testing.T) {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{})
	envoyTrace(td, "200")
	var c SpanCounter
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		c.Count(td, func(Request) { n++ })
	})
	if allocs != 0 {
		t.Fatalf("Count allocated %.1f times per batch, want 0", allocs)
	}
}
