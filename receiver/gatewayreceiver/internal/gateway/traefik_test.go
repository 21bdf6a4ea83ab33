package gateway

import (
	"encoding/binary"
	"os"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The Traefik fixtures are OTLP/JSON exports shaped after docs/gateways.md
// §7a: the resource, scope, span names, kinds, parent links and attribute
// sets Traefik v3.6 sends, children before their parents (the SDK's batch
// processor queues spans as they end).
//
// traefik-3.6-detailed.json (entry point and routers at traceVerbosity
// detailed, entry point, router and service metrics on): five proxied
// requests, each SERVER → Metrics → Router → Metrics → [StripPrefix] →
// Service → Metrics → ReverseProxy, request 5 through a parent router whose
// target is child routers (two Router spans), and a sixth request no router
// matched (SERVER only, 404).
//
// traefik-3.6-minimal.json (the default verbosity): three requests, SERVER
// and ReverseProxy only.

func loadTraefik(t *testing.T, name string) ptrace.Traces {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
	if err != nil {
		t.Fatal(err)
	}
	return td
}

// traefikEvent is the event of request n of a fixture: its trace and root
// span ids are the fixture's (trace 5b8eff…c60c + n, span a0 n … 01).
func traefikEvent(n int, method string, status int64, totalMS float64) Event {
	e := spanBase()
	e.Kind, e.Gateway = KindTraefik, "traefik"
	e.Method, e.StatusCode, e.TotalMS, e.RequestSize = method, status, totalMS, 0
	binary.BigEndian.PutUint64(e.TraceID[:8], 0x5b8efff798038103)
	binary.BigEndian.PutUint64(e.TraceID[8:], 0xd269b633813fc60c+uint64(n))
	e.SpanID = [8]byte{0xa0, byte(n), 7: 1}
	return e
}

func routed(e Event, router, service string) Event {
	e.Route, e.RouteName, e.ServiceName = router, router, service
	return e
}

func checkEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d:\n%+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d:\ngot  %+v\nwant %+v", i, got[i], want[i])
		}
	}
}

// traefikDetailedWant are the detailed fixture's events, in root order.
func traefikDetailedWant() []Event {
	return []Event{
		routed(traefikEvent(1, "GET", 200, 9), "shop-api@docker", "shop-api@docker"),
		routed(traefikEvent(2, "POST", 201, 9), "shop-api@docker", "shop-api@docker"),
		routed(traefikEvent(3, "GET", 200, 9), "shop-web@docker", "shop-web@docker"),
		routed(traefikEvent(4, "GET", 503, 9), "shop-api@docker", "shop-api@docker"),
		// The child router chose the service, not orders@file (whose
		// service is orders@file-muxer).
		routed(traefikEvent(5, "GET", 200, 9), "orders-v2@file", "orders-v2@file"),
		traefikEvent(6, "GET", 404, 0.2),
	}
}

// At detailed verbosity every request is counted once, by its SERVER span,
// with the router and service of its Router span wherever that sits below
// the root; pdata (OTLP/JSON, gRPC) and protobuf agree (countAll).
func TestTraefikDetailed(t *testing.T) {
	td := loadTraefik(t, "traefik-3.6-detailed.json")
	checkEvents(t, countAll(t, td), traefikDetailedWant())
	if d := differential(marshal(t, td)); d != "" {
		t.Error(d)
	}
}

// At minimal verbosity (Traefik's default) there is no Router span: each
// request is counted once, without a route.
func TestTraefikMinimal(t *testing.T) {
	td := loadTraefik(t, "traefik-3.6-minimal.json")
	checkEvents(t, countAll(t, td), []Event{
		traefikEvent(1, "GET", 200, 9), traefikEvent(2, "POST", 201, 9), traefikEvent(3, "GET", 200, 9),
	})
}

// A Router span exported apart from its SERVER span (another export, or
// another ResourceSpans of the same export) adds nothing, as a Kong
// balancer span apart from its root does: the SERVER span is counted once
// without a route, and the Router spans alone count nothing.
func TestTraefikRouterApartFromItsRoot(t *testing.T) {
	td := loadTraefik(t, "traefik-3.6-detailed.json")
	servers, rest := ptrace.NewTraces(), ptrace.NewTraces()
	td.ResourceSpans().CopyTo(servers.ResourceSpans())
	td.ResourceSpans().CopyTo(rest.ResourceSpans())
	servers.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(s ptrace.Span) bool { return s.Kind() != ptrace.SpanKindServer })
	rest.ResourceSpans().At(0).ScopeSpans().At(0).Spans().RemoveIf(func(s ptrace.Span) bool { return s.Kind() == ptrace.SpanKindServer })

	var unrouted []Event
	for _, e := range traefikDetailedWant() {
		e.Route, e.RouteName, e.ServiceName = "", "", ""
		unrouted = append(unrouted, e)
	}
	// Children first, as the SDK exports them.
	checkEvents(t, countAll(t, rest), nil)
	checkEvents(t, countAll(t, servers), unrouted)

	both := ptrace.NewTraces()
	rest.ResourceSpans().MoveAndAppendTo(both.ResourceSpans())
	servers.ResourceSpans().MoveAndAppendTo(both.ResourceSpans())
	checkEvents(t, countAll(t, both), unrouted)
}

// The walk from a Router span up to its root crosses INTERNAL spans only: a
// nested SERVER span (another request the same Traefik serves, say Traefik
// routing to itself) or a CLIENT span is a request's boundary, and a forged
// cycle of parent ids ends the walk.
func TestTraefikWalkStopsAtBoundaries(t *testing.T) {
	router := func(id, parent byte, name string) spanSpec {
		return spanSpec{name: "Router", kind: ptrace.SpanKindInternal, id: id, parent: parent, end: 1,
			attrs: map[string]any{"traefik.router.name": name, "traefik.service.name": name + "-svc", "http.route": "Path(`/`)"}}
	}
	root := spanSpec{name: "GET", kind: ptrace.SpanKindServer, id: 1, end: 2,
		attrs: map[string]any{"http.request.method": "GET", "http.response.status_code": int64(200)}}
	res := map[string]any{"service.name": "traefik"}
	want := traefikEvent(0, "GET", 200, 2)
	want.TraceID, want.SpanID, want.RequestSize = [16]byte{}, [8]byte{1}, Unknown

	t.Run("nested SERVER", func(t *testing.T) {
		// 1 SERVER → 2 ReverseProxy CLIENT → 3 SERVER (nested, not a root) → 4 Router.
		td := traceOf(res, traefikScope, root,
			spanSpec{name: "ReverseProxy", kind: ptrace.SpanKindClient, id: 2, parent: 1, end: 1},
			spanSpec{name: "GET", kind: ptrace.SpanKindServer, id: 3, parent: 2, end: 1},
			router(4, 3, "inner"))
		checkEvents(t, countAll(t, td), []Event{want})
	})
	t.Run("CLIENT", func(t *testing.T) {
		td := traceOf(res, traefikScope, root,
			spanSpec{name: "AuthRequest", kind: ptrace.SpanKindClient, id: 2, parent: 1, end: 1},
			router(3, 2, "auth"))
		checkEvents(t, countAll(t, td), []Event{want})
	})
	t.Run("cycle", func(t *testing.T) {
		td := traceOf(res, traefikScope, root,
			spanSpec{name: "Metrics", kind: ptrace.SpanKindInternal, id: 2, parent: 3, end: 1},
			router(3, 2, "loop"))
		checkEvents(t, countAll(t, td), []Event{want})
	})
	t.Run("direct child", func(t *testing.T) {
		td := traceOf(res, traefikScope, root, router(2, 1, "direct"))
		checkEvents(t, countAll(t, td), []Event{routed(want, "direct", "direct-svc")})
	})
	t.Run("unnamed router", func(t *testing.T) {
		r := router(2, 1, "")
		delete(r.attrs, "traefik.router.name")
		checkEvents(t, countAll(t, traceOf(res, traefikScope, root, r)), []Event{want})
	})
	t.Run("not Traefik's root", func(t *testing.T) {
		// A Router-named INTERNAL span below a Kong root maps nothing.
		td := traceOf(res, kongScope, root, router(2, 1, "kong"))
		got := countAll(t, td)
		if len(got) != 1 || got[0].Kind != KindKong || got[0].Route != "" || got[0].ServiceName != "" {
			t.Fatalf("got %+v, want one Kong event without route or service", got)
		}
	})
}

// Traefik's spans are detected by their scope alone; detect: traefik reads
// a Router span under any scope.
func TestTraefikDetection(t *testing.T) {
	if k, ok := ParseKind("traefik"); !ok || k != KindTraefik || k.String() != "traefik" {
		t.Fatalf("ParseKind(traefik) = %v, %v", k, ok)
	}
	td := loadTraefik(t, "traefik-3.6-detailed.json")
	td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetName("renamed-by-a-processor")
	c := SpanCounter{Detect: KindTraefik}
	var got []Event
	c.Count(td, func(e *Event) { got = append(got, *e) })
	checkEvents(t, got, traefikDetailedWant())
	var auto SpanCounter
	got = got[:0]
	auto.Count(td, func(e *Event) { got = append(got, *e) })
	if len(got) != 6 || got[0].Kind != KindSemconv || got[0].Route != "" {
		t.Fatalf("unknown scope: got %+v, want semconv events without route", got)
	}
}

// The Traefik path allocates nothing once warm, like the others.
func TestTraefikCountAllocatesNothing(t *testing.T) {
	body := marshal(t, loadTraefik(t, "traefik-3.6-detailed.json"))
	var c SpanCounter
	if _, _, err := c.CountProto(body, func(*Event) {}); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(50, func() { _, _, _ = c.CountProto(body, func(*Event) {}) }); n != 0 {
		t.Errorf("CountProto allocates %v times per Traefik export", n)
	}
}

// BenchmarkCountProtoTraefik is the protobuf path on the detailed fixture
// (six requests, 41 spans, the Router spans walked up through their
// Metrics parents). One op is one export.
func BenchmarkCountProtoTraefik(b *testing.B) {
	b2, err := os.ReadFile("testdata/traefik-3.6-detailed.json")
	if err != nil {
		b.Fatal(err)
	}
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b2)
	if err != nil {
		b.Fatal(err)
	}
	body := marshal(b, td)
	spans := td.SpanCount()
	var c SpanCounter
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.CountProto(body, func(*Event) {}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*spans), "ns/span")
}
