package gateway

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Fixtures per gateway and version, shaped after docs/gateways.md: the
// attribute names, types and span names each version really sends.

const t0 = pcommon.Timestamp(1_700_000_000_000_000_000)

func ms(n float64) pcommon.Timestamp { return pcommon.Timestamp(n * 1e6) }

type spanSpec struct {
	name       string
	kind       ptrace.SpanKind
	id, parent byte
	start, end float64 // ms after t0
	failed     bool
	attrs      map[string]any
}

func traceOf(res map[string]any, scope string, specs ...spanSpec) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	_ = rs.Resource().Attributes().FromRaw(res)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(scope)
	for _, sp := range specs {
		s := ss.Spans().AppendEmpty()
		s.SetName(sp.name)
		s.SetKind(sp.kind)
		s.SetSpanID(pcommon.SpanID{sp.id})
		if sp.parent != 0 {
			s.SetParentSpanID(pcommon.SpanID{sp.parent})
		}
		s.SetStartTimestamp(t0 + ms(sp.start))
		s.SetEndTimestamp(t0 + ms(sp.end))
		if sp.failed {
			s.Status().SetCode(ptrace.StatusCodeError)
		}
		_ = s.Attributes().FromRaw(sp.attrs)
	}
	return td
}

func TestSpanFixtures(t *testing.T) {
	kongRes := map[string]any{"service.name": "kong-dev", "service.instance.id": "9343ac04-81d6-4ac8-bb5a-c7322c823368", "service.version": "3.14.0.0"}
	cases := []struct {
		name string
		td   ptrace.Traces
		want func(e *Event)
	}{{
		// §1a, the 3.14 debug dump: a DNS span, then the balancer try.
		name: "kong 3.14 (kong, kong.balancer, doubles)",
		td: traceOf(kongRes, "kong-internal",
			spanSpec{name: "kong", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 173, attrs: map[string]any{
				"http.route": "/anything", "http.host": "localhost", "http.scheme": "http", "http.client_ip": "192.168.107.1",
				"kong.request.id": "319d1e4e7862095f704a7d6c60e63260", "net.peer.ip": "192.168.107.1", "http.status_code": int64(200),
				"http.method": "POST", "http.url": "http://localhost/anything", "http.flavor": "1.1"}},
			spanSpec{name: "kong.router", kind: ptrace.SpanKindInternal, id: 2, parent: 1, start: 0, end: 1},
			spanSpec{name: "kong.dns", kind: ptrace.SpanKindClient, id: 3, parent: 1, start: 1, end: 2, attrs: map[string]any{
				"dns.record.domain": "httpbin.konghq.com", "dns.record.port": 80.0, "dns.record.ip": "37.16.15.184"}},
			spanSpec{name: "kong.balancer", kind: ptrace.SpanKindClient, id: 5, parent: 1, start: 2, end: 173, attrs: map[string]any{
				"net.peer.ip": "37.16.15.184", "net.peer.port": 80.0, "net.peer.name": "httpbin.konghq.com",
				"peer.service": "example-service", "try_count": 1.0}},
		),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Instance = KindKong, "kong-dev", "9343ac04-81d6-4ac8-bb5a-c7322c823368"
			e.Route, e.Method, e.StatusCode, e.Source = "/anything", "POST", 200, SourceUpstream
			e.ServiceName, e.Upstream, e.Target, e.TargetPort = "example-service", "httpbin.konghq.com", "37.16.15.184", 80
			e.TotalMS, e.UpstreamMS = 173, 171
		},
	}, {
		// A failed first try (status ERROR, http.status_code = try.code),
		// then a good second one: the last try answers.
		name: "kong 3.4 retry",
		td: traceOf(map[string]any{"service.name": "kong"}, "kong-internal",
			spanSpec{name: "kong", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 100, attrs: map[string]any{
				"http.method": "GET", "http.route": "/r", "http.status_code": int64(200)}},
			spanSpec{name: "kong.balancer", kind: ptrace.SpanKindClient, id: 2, parent: 1, start: 1, end: 30, failed: true, attrs: map[string]any{
				"net.peer.ip": "10.0.0.1", "net.peer.port": 8080.0, "try_count": 1.0, "http.status_code": int64(502)}},
			spanSpec{name: "kong.balancer", kind: ptrace.SpanKindClient, id: 3, parent: 1, start: 30, end: 90, attrs: map[string]any{
				"net.peer.ip": "10.0.0.2", "net.peer.port": 8080.0, "try_count": 2.0}},
		),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Route, e.Method, e.StatusCode, e.Source = KindKong, "kong", "/r", "GET", 200, SourceUpstream
			e.Target, e.TargetPort, e.TotalMS, e.UpstreamMS = "10.0.0.2", 8080, 100, 60
		},
	}, {
		// Kong 3.0–3.2: root named "<METHOD> <path>" (never used: a raw
		// path), no http.route, `balancer try #N`.
		name: "kong 3.1 (old span names)",
		td: traceOf(map[string]any{"service.name": "kong"}, "kong-internal",
			spanSpec{name: "GET /users/42", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 50, attrs: map[string]any{
				"http.method": "GET", "http.url": "http://api/users/42", "http.status_code": int64(404)}},
			spanSpec{name: "balancer try #1", kind: ptrace.SpanKindClient, id: 2, parent: 1, start: 5, end: 45, attrs: map[string]any{
				"net.peer.ip": "10.0.0.9", "net.peer.port": 80.0}},
		),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Method, e.StatusCode, e.Source = KindKong, "kong", "GET", 404, SourceUpstream
			e.Target, e.TargetPort, e.TotalMS, e.UpstreamMS = "10.0.0.9", 80, 50, 40
		},
	}, {
		// Kong answered itself (no balancer span): source kong.
		name: "kong plugin exit",
		td: traceOf(map[string]any{"service.name": "kong"}, "kong-internal",
			spanSpec{name: "kong", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 2, attrs: map[string]any{
				"http.method": "GET", "http.route": "/r", "http.status_code": int64(401)}}),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Route, e.Method, e.StatusCode, e.Source, e.TotalMS = KindKong, "kong", "/r", "GET", 401, SourceGateway, 2
		},
	}, {
		// §2a, the 3.16 doc output: both name sets; http.status_code is
		// still the upstream's status and there is no response source.
		name: "apisix 3.16",
		td: traceOf(map[string]any{"service.name": "APISIX", "hostname": "RC", "telemetry.sdk.language": "lua"}, "opentelemetry-lua",
			spanSpec{name: "GET /anything", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 12.5, attrs: map[string]any{
				"net.host.name": "localhost", "http.method": "GET", "http.scheme": "http", "http.target": "/anything?x=1",
				"http.user_agent": "curl/7.81.0", "http.request.method": "GET", "url.scheme": "http", "url.path": "/anything",
				"user_agent.original": "curl/7.81.0", "apisix.route_id": "otel-tracing-route", "apisix.route_name": "",
				"http.route": "/anything", "http.status_code": int64(200), "http.response.status_code": int64(200)}}),
		want: func(e *Event) {
			// matched_host is the route's host pattern, which spans do not carry:
			// net.host.name (the Host header) is not used (§2c).
			e.Kind, e.Gateway, e.Instance = KindAPISIX, "APISIX", "RC"
			e.Route, e.RouteID, e.Method, e.StatusCode, e.Source, e.TotalMS = "/anything", "otel-tracing-route", "GET", 200, SourceUpstream, 12.5
		},
	}, {
		// 3.7–3.15 with nothing proxied: no status at all (it was the
		// upstream's), so status and source stay unknown, never guessed.
		name: "apisix 3.13 no upstream",
		td: traceOf(map[string]any{"service.name": "APISIX"}, "opentelemetry-lua",
			spanSpec{name: "GET /anything", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 1, attrs: map[string]any{
				"http.method": "GET", "apisix.route_id": "1", "apisix.route_name": "r1", "apisix.service_id": "s1",
				"apisix.service_name": "svc", "http.route": "/anything"}}),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Route, e.RouteID, e.RouteName, e.ServiceID, e.ServiceName = KindAPISIX, "APISIX", "/anything", "1", "r1", "s1", "svc"
			e.Method, e.TotalMS = "GET", 1
		},
	}, {
		// 3.17+: the client-facing status and apisix.response_source ("nginx":
		// proxied, no upstream response).
		name: "apisix 3.17 gateway error",
		td: traceOf(map[string]any{"service.name": "APISIX"}, "opentelemetry-lua",
			spanSpec{name: "POST /api/*", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 3, failed: true, attrs: map[string]any{
				"http.request.method": "POST", "http.route": "/api/*", "apisix.route_id": "7",
				"http.status_code": int64(502), "http.response.status_code": int64(502), "apisix.response_source": "nginx"}}),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Route, e.RouteID, e.Method, e.StatusCode, e.Source, e.TotalMS = KindAPISIX, "APISIX", "/api/*", "7", "POST", 502, SourceProxy, 3
		},
	}, {
		// §3b: every tag a string, the router child span gives the target
		// and the upstream time.
		name: "envoy with router span",
		td: traceOf(map[string]any{"service.name": "unknown_service:envoy"}, "",
			spanSpec{name: "ingress api", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 40, attrs: map[string]any{
				"http.url": "http://api/test", "http.method": "GET", "user_agent": "agent", "http.protocol": "HTTP/1.1",
				"downstream_cluster": "-", "request_size": "10", "peer.address": "10.0.0.100", "http.status_code": "200",
				"response_size": "100", "response_flags": "-", "component": "proxy", "upstream_cluster": "fake_cluster",
				"upstream_cluster.name": "observability_name"}},
			spanSpec{name: "router observability_name egress", kind: ptrace.SpanKindClient, id: 2, parent: 1, start: 2, end: 38, attrs: map[string]any{
				"component": "proxy", "upstream_address": "10.0.0.5:9211", "peer.address": "10.0.0.5:9211",
				"upstream_cluster": "fake_cluster", "http.status_code": "200", "response_flags": "-"}},
		),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Method, e.StatusCode, e.Source = KindEnvoy, "unknown_service:envoy", "GET", 200, SourceUpstream
			e.Upstream, e.Target, e.RequestSize, e.ResponseSize, e.TotalMS, e.UpstreamMS = "fake_cluster", "10.0.0.5:9211", 10, 100, 40, 36
		},
	}, {
		// An AI gateway following the semantic conventions.
		name: "semconv with GenAI",
		td: traceOf(map[string]any{"service.name": "ai-gw"}, "my-gateway",
			spanSpec{name: "POST /v1/chat", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 900, attrs: map[string]any{
				"http.request.method": "POST", "http.route": "/v1/chat", "http.response.status_code": int64(200),
				"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
				"gen_ai.usage.input_tokens": int64(12), "gen_ai.usage.output_tokens": int64(30)}}),
		want: func(e *Event) {
			e.Kind, e.Gateway, e.Route, e.Method, e.StatusCode, e.TotalMS = KindSemconv, "ai-gw", "/v1/chat", "POST", 200, 900
			e.GenAI = GenAI{Provider: "openai", RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024-08-06", InputTokens: 12, OutputTokens: 30, TotalTokens: Unknown, Cost: Unknown, FirstTokenMS: Unknown, ProviderMS: Unknown}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := countAll(t, c.td)
			want := spanBase()
			want.SpanID = [8]byte{1} // every fixture's root span is id 1
			c.want(&want)
			if len(got) != 1 || got[0] != want {
				t.Fatalf("got  %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestDetectOverride(t *testing.T) {
	// An Envoy fleet exporting under a scope name auto-detection does not
	// know: forcing kind envoy still reads its tags.
	td := traceOf(map[string]any{}, "custom", spanSpec{name: "ingress", kind: ptrace.SpanKindServer, id: 1, start: 0, end: 1,
		attrs: map[string]any{"http.method": "GET", "http.status_code": "504", "response_flags": "UT"}})
	c := SpanCounter{Detect: KindEnvoy}
	var got []Event
	c.Count(td, func(e *Event) { got = append(got, *e) })
	if len(got) != 1 || got[0].Kind != KindEnvoy || got[0].Source != SourceGateway || got[0].StatusCode != 504 {
		t.Fatalf("got %+v, want one envoy event, status 504 from the gateway", got)
	}
}
