package e2e

// Gateway-shaped traffic: Kong, Envoy and semconv spans, sent the way each
// gateway sends them.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// ---------------------------------------------------------------------------
// Kong: OTLP/HTTP protobuf, shaped like Kong ≥3.5 core tracing instrumentation

func kongResource(instanceID string) *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.name", "kong"),
		attribute.String("service.instance.id", instanceID),
		attribute.String("service.version", "3.9.1"),
	)
}

// emitKong records r.count Kong traces and adds them to want.
func emitKong(tracer trace.Tracer, r gatewayRequest, want expectedCounts) {
	for range r.count {
		emitKongTrace(tracer, r)
	}
	want.add(map[string]string{
		"job": "kong", "http_route": r.route,
		"http_request_method": r.method, "http_response_status_code": strconv.Itoa(r.status),
	}, r.count)
}

// emitKongTrace records one request: root `kong` (SERVER) with children
// `kong.router` (INTERNAL) and `kong.balancer` (CLIENT). Only the root counts.
func emitKongTrace(tracer trace.Tracer, r gatewayRequest) {
	ctx := context.Background()
	if r.remoteParent {
		ctx = trace.ContextWithRemoteSpanContext(ctx, remoteParent())
	}
	ctx, root := tracer.Start(ctx, "kong", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.method", r.method),
		attribute.String("http.url", "http://localhost"+r.path),
		attribute.String("http.host", "localhost"),
		attribute.String("http.scheme", "http"),
		attribute.String("http.flavor", "1.1"),
		attribute.String("http.client_ip", "192.168.107.1"),
		attribute.String("net.peer.ip", "192.168.107.1"),
		attribute.String("kong.request.id", randomHex(16)),
	))
	_, router := tracer.Start(ctx, "kong.router")
	router.End()
	// Kong encodes Lua numbers as doubles: try_count and net.peer.port.
	_, balancer := tracer.Start(ctx, "kong.balancer", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.Float64("try_count", 1),
		attribute.String("net.peer.ip", "37.16.15.184"),
		attribute.Float64("net.peer.port", 80),
		attribute.String("net.peer.name", "httpbin.konghq.com"),
	))
	if r.status >= 500 {
		// A failed try carries a status code too; a CLIENT span must not count.
		balancer.SetAttributes(attribute.Int("http.status_code", r.status))
		balancer.SetStatus(codes.Error, "")
	}
	balancer.End()
	// Kong adds these in runloop_before_header_filter; status is an int.
	root.SetAttributes(attribute.Int("http.status_code", r.status), attribute.String("http.route", r.route))
	root.End()
}

// remoteParent is a sampled span context from "the client": the SDK's
// default parent-based sampler would drop the span if it were not sampled.
func remoteParent() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	_, _ = rand.Read(tid[:])
	_, _ = rand.Read(sid[:])
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
	})
}

// ---------------------------------------------------------------------------
// Envoy: OTLP/gRPC, every tag a string attribute

// sendEnvoy exports envoyRequests over gRPC and adds them to want.
func sendEnvoy(t *testing.T, grpcAddr string, want expectedCounts) {
	t.Helper()
	tp := newGRPCTracerProvider(t, grpcAddr,
		resource.NewSchemaless(attribute.String("service.name", "front-envoy")))
	tracer := tp.Tracer("envoy")
	for _, r := range envoyRequests {
		for range r.count {
			emitEnvoyTrace(tracer, r)
		}
		// No http.route and no service.instance.id: both labels absent.
		want.add(map[string]string{
			"job": "front-envoy", "http_request_method": r.method,
			"http_response_status_code": strconv.Itoa(r.status),
		}, r.count)
	}
	shutdownProvider(t, tp)
}

// emitEnvoyTrace records an `ingress` SERVER span with the HCM tags and a
// `router fake_cluster egress` CLIENT child, as with spawn_upstream_span.
func emitEnvoyTrace(tracer trace.Tracer, r gatewayRequest) {
	status := strconv.Itoa(r.status)
	attrs := []attribute.KeyValue{
		attribute.String("node_id", "front-envoy-0"),
		attribute.String("guid:x-request-id", newUUIDString()),
		attribute.String("http.url", "http://api"+r.path),
		attribute.String("http.method", r.method),
		attribute.String("downstream_cluster", "-"),
		attribute.String("user_agent", "curl/8.5.0"),
		attribute.String("http.protocol", "HTTP/1.1"),
		attribute.String("peer.address", "10.0.0.100"),
		attribute.String("request_size", "10"),
		attribute.String("response_size", "100"),
		attribute.String("component", "proxy"),
		attribute.String("upstream_cluster", "fake_cluster"),
		attribute.String("upstream_cluster.name", "fake_cluster"),
		attribute.String("http.status_code", status),
		attribute.String("response_flags", r.flags),
	}
	if r.status >= 500 {
		attrs = append(attrs, attribute.String("error", "true"))
	}
	ctx, root := tracer.Start(context.Background(), "ingress",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	_, child := tracer.Start(ctx, "router fake_cluster egress", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("component", "proxy"),
			attribute.String("http.protocol", "HTTP/1.1"),
			attribute.String("upstream_address", "10.0.0.5:9211"),
			attribute.String("peer.address", "10.0.0.5:9211"),
			attribute.String("upstream_cluster", "fake_cluster"),
			attribute.String("upstream_cluster.name", "fake_cluster"),
			attribute.String("http.status_code", status),
			attribute.String("response_flags", r.flags),
		))
	child.End()
	root.End()
}

// ---------------------------------------------------------------------------
// Generic semconv span: raw OTLP/JSON, as a user would curl it

// jsonSpan is a SERVER span for otlpJSON; status is an OTLP AnyValue.
type jsonSpan struct {
	method string
	route  string
	status map[string]any
}

// sendSemconvJSON posts stable-semconv spans as OTLP/JSON and adds them to
// want. The first span is the README's curl example; the second checks the
// _OTHER method and a double status code; the last request checks that
// service.namespace joins the job and that the sender's service.instance.id
// does not become the instance (the collector's scrape target does).
func sendSemconvJSON(t *testing.T, tracesURL string, want expectedCounts) {
	t.Helper()
	postJSON(t, tracesURL, otlpJSON(service("gw-semconv"),
		jsonSpan{method: "PUT", route: "/items/{id}", status: map[string]any{"intValue": "204"}},
		jsonSpan{method: "PURGE", route: "/cache", status: map[string]any{"doubleValue": 404.0}},
	))
	want.add(map[string]string{
		"job": "gw-semconv", "http_route": "/items/{id}",
		"http_request_method": "PUT", "http_response_status_code": "204",
	}, 1)
	want.add(map[string]string{
		"job": "gw-semconv", "http_route": "/cache",
		"http_request_method": "_OTHER", "http_response_status_code": "404",
	}, 1)

	namespaced := map[string]string{
		"service.namespace": "edge", "service.name": "gw-semconv", "service.instance.id": "gw-semconv-1",
	}
	postJSON(t, tracesURL, otlpJSON(namespaced,
		jsonSpan{method: "GET", route: "/health", status: map[string]any{"intValue": "200"}}))
	want.add(map[string]string{
		"job": "edge/gw-semconv", "http_route": "/health",
		"http_request_method": "GET", "http_response_status_code": "200",
	}, 1)
}

// postJSON posts an OTLP/JSON body that must be accepted.
func postJSON(t *testing.T, tracesURL string, body []byte) {
	t.Helper()
	status, resp := httpPost(t, tracesURL, "application/json", body)
	if status != http.StatusOK {
		t.Fatalf("POST OTLP/JSON: status %d, want 200; body: %q", status, truncate(resp))
	}
}

// service is a resource with only service.name.
func service(name string) map[string]string {
	return map[string]string{"service.name": name}
}

// otlpJSON builds an ExportTraceServiceRequest in OTLP/JSON with one resource
// (string attributes res) and one trace per span. Field names, hex ids and
// string-encoded int64s follow the OTLP/JSON encoding.
func otlpJSON(res map[string]string, spans ...jsonSpan) []byte {
	now := time.Now()
	var out []map[string]any
	for _, s := range spans {
		attrs := []map[string]any{
			{"key": "http.request.method", "value": map[string]any{"stringValue": s.method}},
			{"key": "http.response.status_code", "value": s.status},
			{"key": "url.path", "value": map[string]any{"stringValue": "/items/1"}},
			{"key": "url.scheme", "value": map[string]any{"stringValue": "http"}},
		}
		name := s.method
		if s.route != "" {
			attrs = append(attrs, map[string]any{"key": "http.route", "value": map[string]any{"stringValue": s.route}})
			name += " " + s.route
		}
		out = append(out, map[string]any{
			"traceId":           randomHex(16),
			"spanId":            randomHex(8),
			"name":              name,
			"kind":              2, // SPAN_KIND_SERVER
			"startTimeUnixNano": strconv.FormatInt(now.Add(-5*time.Millisecond).UnixNano(), 10),
			"endTimeUnixNano":   strconv.FormatInt(now.UnixNano(), 10),
			"attributes":        attrs,
		})
	}
	req := map[string]any{"resourceSpans": []any{map[string]any{
		"resource":   map[string]any{"attributes": stringAttrs(res)},
		"scopeSpans": []any{map[string]any{"scope": map[string]any{"name": "e2e"}, "spans": out}},
	}}}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err) // only plain maps and strings: cannot fail
	}
	return b
}

// stringAttrs renders m as OTLP/JSON KeyValues, sorted for stable output.
func stringAttrs(m map[string]string) []map[string]any {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, map[string]any{"key": k, "value": map[string]any{"stringValue": m[k]}})
	}
	return out
}

// oversizedJSON is a syntactically valid OTLP/JSON request of at least size
// bytes, so only the size limit can reject it.
func oversizedJSON(size int) []byte {
	pad := strings.Repeat("a", size)
	return fmt.Appendf(nil,
		`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"big"}},`+
			`{"key":"padding","value":{"stringValue":"%s"}}]},"scopeSpans":[]}]}`, pad)
}

// ---------------------------------------------------------------------------
// OTel SDK plumbing

// newHTTPTracerProvider exports OTLP/HTTP protobuf to endpoint (host:port).
func newHTTPTracerProvider(t *testing.T, endpoint string, res *resource.Resource) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpoint(endpoint), otlptracehttp.WithInsecure())
	if err != nil {
		t.Fatalf("otlptracehttp.New: %v", err)
	}
	return newTracerProvider(t, exp, res)
}

// newGRPCTracerProvider exports OTLP/gRPC to endpoint (host:port).
func newGRPCTracerProvider(t *testing.T, endpoint string, res *resource.Resource) *sdktrace.TracerProvider {
	t.Helper()
	exp, err := otlptracegrpc.New(context.Background(),
		otlptracegrpc.WithEndpoint(endpoint), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatalf("otlptracegrpc.New: %v", err)
	}
	return newTracerProvider(t, exp, res)
}

// newTracerProvider batches spans; the batch holds whole traces here, so each
// export contains the root together with its children. Shutdown is also
// registered as a cleanup so an early failure does not leak the exporter.
func newTracerProvider(t *testing.T, exp sdktrace.SpanExporter, res *resource.Resource) *sdktrace.TracerProvider {
	t.Helper()
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())),
		sdktrace.WithBatcher(exp),
	)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

func forceFlush(t *testing.T, tp *sdktrace.TracerProvider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatalf("flush spans: %v", err)
	}
}

// shutdownProvider flushes and stops the exporter; an export error (e.g. a
// rejected request) surfaces here.
func shutdownProvider(t *testing.T, tp *sdktrace.TracerProvider) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("flush and shut down tracer provider: %v", err)
	}
}

// withCount returns a copy of r with another count.
func withCount(r gatewayRequest, n int) gatewayRequest {
	r.count = n
	return r
}
