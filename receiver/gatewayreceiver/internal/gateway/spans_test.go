package gateway

import (
	"math"
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// kongTrace builds what Kong ≥ 3.4 exports for one proxied request
// (docs/gateways.md §1a): root `kong` SERVER span with old-style HTTP
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
// (docs/gateways.md §3b), there is no http.route, and the router child span
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

// countAll maps td through pdata (Count) and through its protobuf encoding
// (CountProto), requires both to report the same events, and returns them.
func countAll(t *testing.T, td ptrace.Traces) []Event {
	t.Helper()
	var c SpanCounter
	var got []Event
	examined, counted := c.Count(td, func(e *Event) { got = append(got, *e) })
	if counted != len(got) {
		t.Fatalf("Count returned %d but reported %d events", counted, len(got))
	}
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var fromProto []Event
	pe, pc, err := c.CountProto(body, func(e *Event) { fromProto = append(fromProto, *e) })
	if err != nil {
		t.Fatalf("CountProto: %v", err)
	}
	if pe != examined || pc != counted || !slices.Equal(fromProto, got) {
		t.Fatalf("CountProto examined %d, counted %d: %+v\nCount examined %d, counted %d: %+v", pe, pc, fromProto, examined, counted, got)
	}
	return got
}

// spanBase is base() for an event read from a span: its sampling is
// unknown unless the span carries a threshold.
func spanBase() Event {
	e := base()
	e.Sampling = SamplingUnknown
	return e
}

// base is an Event with nothing known, as Reset leaves it.
func base() Event {
	var e Event
	e.Reset()
	return e
}

func TestCountKongAndEnvoy(t *testing.T) {
	td := ptrace.NewTraces()
	kongTrace(td, pcommon.SpanID{})
	envoyTrace(td, "503")
	got := countAll(t, td)
	kong := spanBase()
	kong.Kind, kong.Gateway, kong.Instance = KindKong, "kong", "9343ac04-81d6-4ac8-bb5a-c7322c823368"
	kong.Route, kong.Method, kong.StatusCode = "/anything", "POST", 200
	kong.TargetPort, kong.Source = 80, SourceUpstream
	kong.SpanID = pcommon.SpanID{1, 1, 1, 1, 1, 1, 1, 1}
	envoy := spanBase()
	envoy.Kind, envoy.Namespace, envoy.Gateway = KindEnvoy, "edge", "front-envoy"
	envoy.Method, envoy.StatusCode, envoy.Upstream, envoy.Source = "GET", 503, "fake_cluster", SourceGateway
	envoy.SpanID = pcommon.SpanID{2, 2, 2, 2, 2, 2, 2, 2}
	want := []Event{kong, envoy}
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %+v", len(got), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestRootWithRemoteParentCounts(t *testing.T) {
	td := ptrace.NewTraces()
	// A client sent a traceparent: Kong's root span has a parent that is not
	// in the export.
	kongTrace(td, pcommon.SpanID{9, 9, 9, 9, 9, 9, 9, 9})
	got := countAll(t, td)
	if len(got) != 1 || got[0].TargetPort != 80 {
		t.Fatalf("counted %+v, want 1 event completed by its balancer span", got)
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
	td := ptrace.NewTraces()
	span := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	span.SetKind(ptrace.SpanKindServer)
	attrs := span.Attributes()
	attrs.PutStr("http.request.method", "PUT")
	attrs.PutStr("http.method", "GET")
	attrs.PutInt("http.response.status_code", 204)
	attrs.PutInt("http.status_code", 502)
	attrs.PutStr("http.route", "/items/{id}")
	attrs.PutInt("http.request.body.size", 10)
	attrs.PutStr("http.response_content_length", "20")
	got := countAll(t, td)
	want := spanBase()
	want.Kind, want.Route, want.Method, want.StatusCode = KindSemconv, "/items/{id}", "PUT", 204
	want.RequestSize, want.ResponseSize = 10, 20
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v, want %+v", got, want)
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
		{"huge double", func(v pcommon.Value) { v.SetDouble(1e300) }, 0},
		{"envoy string", func(v pcommon.Value) { v.SetStr("503") }, 503},
		{"envoy no response", func(v pcommon.Value) { v.SetStr("0") }, 0},
		{"garbage", func(v pcommon.Value) { v.SetStr("2OO") }, 0},
		{"out of range", func(v pcommon.Value) { v.SetInt(1 << 40) }, 0},
		{"bool", func(v pcommon.Value) { v.SetBool(true) }, 0},
	}
	for _, c := range cases {
		v := pcommon.NewValueEmpty()
		c.set(v)
		if got := valueOf(v).status(); got != c.want {
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
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var c SpanCounter
	n := 0
	c.Count(td, func(*Event) { n++ }) // warm the scratch state
	if _, _, err := c.CountProto(body, func(*Event) { n++ }); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { c.Count(td, func(*Event) { n++ }) }); allocs != 0 {
		t.Errorf("Count allocated %.1f times per batch, want 0", allocs)
	}
	if allocs := testing.AllocsPerRun(100, func() { _, _, _ = c.CountProto(body, func(*Event) { n++ }) }); allocs != 0 {
		t.Errorf("CountProto allocated %.1f times per batch, want 0", allocs)
	}
}

// The latency a gateway added is known only when the input says it: from
// the gateway (Kong's latencies.kong, APISIX's apisix_latency), as total −
// upstream, or as the total when the gateway answered itself. An APISIX
// proxied span carries no upstream time, so its added latency is unknown,
// never the whole 800 ms (APISIX computes request − upstream; §2d).
func TestGatewayAddedLatencyOnlyWhenKnown(t *testing.T) {
	apisixRes := map[string]any{"service.name": "APISIX", "hostname": "h"}
	span := func(attrs map[string]any) ptrace.Traces {
		return traceOf(apisixRes, "opentelemetry-lua", spanSpec{name: "GET /pets", kind: ptrace.SpanKindServer, id: 1, end: 800, attrs: attrs})
	}
	cases := []struct {
		name      string
		td        ptrace.Traces
		want      float64
		wantKnown bool
	}{
		{"proxied, ≤ 3.16", span(map[string]any{"http.method": "GET", "http.status_code": int64(200)}), 0, false},
		{"proxied, ≥ 3.17", span(map[string]any{"http.method": "GET", "http.response.status_code": int64(200), "apisix.response_source": "upstream"}), 0, false},
		{"answered by APISIX", span(map[string]any{"http.method": "GET", "http.response.status_code": int64(404), "apisix.response_source": "apisix"}), 800, true},
		{"semantic conventions", traceOf(map[string]any{"service.name": "edge"}, "", spanSpec{name: "GET", kind: ptrace.SpanKindServer, id: 1, end: 800,
			attrs: map[string]any{"http.request.method": "GET", "http.response.status_code": int64(200)}}), 0, false},
	}
	for _, c := range cases {
		got := countAll(t, c.td)
		if len(got) != 1 {
			t.Fatalf("%s: %d events", c.name, len(got))
		}
		ms, ok := got[0].GatewayMS()
		if ok != c.wantKnown || ms != c.want || got[0].TotalMS != 800 {
			t.Errorf("%s: added %v (known %v), total %v; want %v (known %v)", c.name, ms, ok, got[0].TotalMS, c.want, c.wantKnown)
		}
	}
}

// Release leaves no reference into the last body in the counter's reused
// buffers (a pooled counter would otherwise pin it).
func TestReleaseDropsBorrowedStrings(t *testing.T) {
	var c SpanCounter
	td := kongExport(64, 0)
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if _, n, err := c.CountProto(body, func(*Event) {}); err != nil || n != 64 {
		t.Fatalf("counted %d, %v", n, err)
	}
	c.Release()
	for i, s := range c.spans[:cap(c.spans)] {
		if s.name != "" || s.traceState != "" {
			t.Fatalf("span record %d still holds %q", i, s.name)
		}
	}
	for i, a := range c.attrs[:cap(c.attrs)] {
		if a.str != "" {
			t.Fatalf("attribute %d still holds %q", i, a.str)
		}
	}
	for i, e := range c.events[:cap(c.events)] {
		if e.Route != "" {
			t.Fatalf("event %d still holds %q", i, e.Route)
		}
	}
}
