package e2e

// Traefik v3.6 sending its own OTLP traces (docs/gateways.md §7): the span
// tree its tracing middlewares build, exported as its otlptracehttp exporter
// does (protobuf, gzip), through the built collector to a real Prometheus.

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
)

// traefikRequest is count requests through one router (router "" : none
// matched, the entry point's 404) at one verbosity.
type traefikRequest struct {
	router, service, rule string
	method                string
	status, count         int
	detailed              bool
}

var traefikRequests = []traefikRequest{
	{router: "shop-api@docker", service: "shop-api@docker", rule: "Host(`shop.example.com`) && PathPrefix(`/api`)", method: "GET", status: 200, count: 17, detailed: true},
	{router: "shop-api@docker", service: "shop-api@docker", rule: "Host(`shop.example.com`) && PathPrefix(`/api`)", method: "POST", status: 201, count: 5, detailed: true},
	{router: "shop-api@docker", service: "shop-api@docker", rule: "Host(`shop.example.com`) && PathPrefix(`/api`)", method: "GET", status: 503, count: 3, detailed: true},
	{router: "shop-web@docker", service: "shop-web@docker", rule: "Host(`shop.example.com`)", method: "GET", status: 200, count: 11, detailed: true},
	// A router left at minimal verbosity: no Router span, no route.
	{router: "legacy@file", service: "legacy@file", rule: "Host(`old.example.com`)", method: "GET", status: 200, count: 4},
	// No router matched: the entry point's default handler.
	{method: "GET", status: 404, count: 2, detailed: true},
}

// emitTraefik records one request the way Traefik v3.6's middlewares do
// (pkg/middlewares/observability/entrypoint.go, router.go, service.go,
// middleware.go, pkg/proxy/httputil/observability.go): the entry point's
// SERVER span named after the method; at detailed verbosity the INTERNAL
// Metrics (entry point) → Router → Metrics (router) → Service → Metrics
// (service) chain; the ReverseProxy CLIENT span at every verbosity.
func emitTraefik(tracer trace.Tracer, r traefikRequest, i int) {
	path := "/api/cart/" + strconv.Itoa(i) // raw paths: never a label
	ctx, root := tracer.Start(context.Background(), r.method, trace.WithSpanKind(trace.SpanKindServer))
	root.SetAttributes(attribute.String("entry_point", "web"))
	root.SetAttributes(
		attribute.String("http.request.method", r.method),
		attribute.String("network.protocol.version", "1.1"),
		attribute.Int("http.request.body.size", 0),
		attribute.String("url.path", path),
		attribute.String("url.query", ""),
		attribute.String("url.scheme", ""),
		attribute.String("user_agent.original", "curl/8.14.1"),
		attribute.String("server.address", "shop.example.com"),
		attribute.String("network.peer.address", "10.42.0.17"),
		attribute.String("client.address", "10.42.0.17"),
		attribute.Int("client.port", 40000+i),
		attribute.Int("network.peer.port", 40000+i),
	)
	if r.router != "" {
		var spans []trace.Span
		start := func(name string, kv ...attribute.KeyValue) {
			var s trace.Span
			ctx, s = tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal))
			s.SetAttributes(kv...)
			spans = append(spans, s)
		}
		if r.detailed {
			start("Metrics", attribute.String("traefik.middleware.name", "metrics-entrypoint"))
			start("Router", attribute.String("traefik.service.name", r.service),
				attribute.String("traefik.router.name", r.router), attribute.String("http.route", r.rule))
			start("Metrics", attribute.String("traefik.middleware.name", "metrics-router"))
			start("Service", attribute.String("traefik.service.name", r.service))
			start("Metrics", attribute.String("traefik.middleware.name", "metrics-service"))
		}
		_, proxy := tracer.Start(ctx, "ReverseProxy", trace.WithSpanKind(trace.SpanKindClient))
		proxy.SetAttributes(
			attribute.String("http.request.method", r.method),
			attribute.String("network.protocol.version", "1.1"),
			attribute.String("url.full", "http://10.42.1.5:8080"+path),
			attribute.String("url.scheme", "http"),
			attribute.String("user_agent.original", "curl/8.14.1"),
			attribute.String("network.peer.address", "10.42.1.5"),
			attribute.Int("network.peer.port", 8080),
			attribute.String("server.address", "10.42.1.5"),
			attribute.Int("server.port", 8080),
			attribute.Int("http.response.status_code", r.status),
		)
		if r.status >= 400 {
			proxy.SetStatus(codes.Error, "")
		}
		proxy.End()
		for k := len(spans) - 1; k >= 0; k-- {
			spans[k].End()
		}
	}
	if r.status >= 500 {
		root.SetStatus(codes.Error, "")
	}
	root.SetAttributes(attribute.Int("http.response.status_code", r.status))
	root.End()
}

// TestTraefik: per-router request counts in Prometheus equal what Traefik's
// traefik_router_requests_total{router,service} would count, for routers
// at detailed verbosity; minimal-verbosity and unmatched requests are
// counted once, without a route.
func TestTraefik(t *testing.T) {
	cfg := strings.Replace(collectorConfig, "    flush_interval: 1s\n", "    flush_interval: 1s\n    dimensions: [service]\n", 1)
	col := startCollectorWith(t, cfg, 4)
	prom := startPrometheus(t, col.promAddr)

	want := expectedCounts{}
	sendTraefik(t, col.httpAddr, want)

	waitPrometheusCounts(t, prom, want.stored(col.promAddr))
	checkExporterExposition(t, col, want.exported())
}

// sendTraefik sends traefikRequests as Traefik v3.6 does (OTLP/HTTP, gzip)
// and adds them to want: per router at detailed verbosity, without a route
// otherwise.
func sendTraefik(t *testing.T, httpAddr string, want expectedCounts) {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpoint(httpAddr), otlptracehttp.WithInsecure(),
		otlptracehttp.WithCompression(otlptracehttp.GzipCompression)) // as pkg/observability/types/tracing.go sets up
	if err != nil {
		t.Fatal(err)
	}
	tp := newTracerProvider(t, exp, resource.NewSchemaless(
		attribute.String("service.name", "traefik"), attribute.String("service.version", "3.6.24"),
		attribute.String("host.name", "traefik-7d9f8b6c5-x2k4q"), attribute.String("telemetry.sdk.language", "go")))
	tracer := tp.Tracer("github.com/traefik/traefik")

	i := 0
	for _, r := range traefikRequests {
		for range r.count {
			emitTraefik(tracer, r, i)
			i++
		}
		lbls := map[string]string{"job": "traefik", "http_request_method": r.method, "http_response_status_code": strconv.Itoa(r.status)}
		if r.detailed && r.router != "" {
			lbls["http_route"], lbls["gateway_service"] = r.router, r.service
		}
		want.add(lbls, r.count)
	}
	shutdownProvider(t, tp)
}
