package e2e

// Black-box tests of the otelgateway distribution: gateway-shaped OTLP traces
// go in, gateway_requests_total comes out of the promstream exporter, and a
// real Prometheus must be able to scrape it.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

const (
	metricName = "gateway_requests_total"
	// telemetryName is the receiver's request counter as the collector's
	// internal Prometheus reader (v0.165) exposes it: without type or unit
	// suffixes.
	telemetryName = "otelcol_receiver_gateway_requests"
	// exporterContentType is what the promstream exporter promises to serve.
	exporterContentType = "text/plain; version=0.0.4"
)

// gatewayRequest describes count identical requests proxied by a gateway.
type gatewayRequest struct {
	method       string
	route        string // http.route; empty means the attribute is absent
	path         string
	status       int
	count        int
	flags        string // Envoy response_flags
	remoteParent bool   // root span continues an incoming traceparent
}

// kongRequests are sent in two waves; see TestEndToEnd.
var kongRequests = []gatewayRequest{
	{method: "GET", route: "/anything", path: "/anything?x=1", status: 200, count: 12},
	{method: "POST", route: "/anything", path: "/anything", status: 201, count: 7},
	{method: "GET", route: "/status", path: "/status/503", status: 503, count: 5},
}

// kongRemoteParent is one request whose root span has a remote parent, as
// when the client sent a traceparent header. It is still a gateway root.
var kongRemoteParent = gatewayRequest{
	method: "DELETE", route: "/anything", path: "/anything/42", status: 204, count: 1, remoteParent: true,
}

// envoyRequests carry no http.route: Envoy never sets one.
var envoyRequests = []gatewayRequest{
	{method: "GET", path: "/api/test", status: 200, count: 6, flags: "-"},
	{method: "GET", path: "/api/test", status: 503, count: 4, flags: "UT"},
}

// TestEndToEnd sends Kong (OTLP/HTTP protobuf), Envoy (OTLP/gRPC) and plain
// semconv (OTLP/HTTP JSON) traces and checks the counts both in a real
// Prometheus and in the exporter's own exposition.
func TestEndToEnd(t *testing.T) {
	col := startCollector(t)
	prom := startPrometheus(t, col.promAddr)
	want := expectedCounts{}

	// Two Kong nodes of one cluster report to the collector: their requests
	// must sum into one series per label tuple, carrying the collector's
	// identity (the scrape target), not a node's service.instance.id.
	nodeA := newHTTPTracerProvider(t, col.httpAddr, kongResource(newUUID(t)))
	kongA := nodeA.Tracer("kong-internal", trace.WithInstrumentationVersion("0.1.0"))

	// Wave 1, then wait until it is exported: wave 2 then necessarily lands
	// in a later flush, so the final totals prove delta→cumulative summing
	// across flush intervals, not just within one.
	for _, r := range kongRequests {
		emitKong(kongA, withCount(r, r.count/2), want)
	}
	forceFlush(t, nodeA)
	waitExporterCounts(t, col, want.exported(), "Kong wave 1 on the exporter")

	nodeB := newHTTPTracerProvider(t, col.httpAddr, kongResource(newUUID(t)))
	kongB := nodeB.Tracer("kong-internal", trace.WithInstrumentationVersion("0.1.0"))
	for _, r := range kongRequests {
		emitKong(kongB, withCount(r, r.count-r.count/2), want)
	}
	emitKong(kongA, kongRemoteParent, want)
	shutdownProvider(t, nodeA)
	shutdownProvider(t, nodeB)

	sendEnvoy(t, col.grpcAddr, want)
	sendSemconvJSON(t, col.tracesURL(), want)

	waitPrometheusCounts(t, prom, want.stored(col.promAddr))
	checkKongInstance(t, prom, col.promAddr)
	checkExporterExposition(t, col, want.exported())
}

// TestBadInput checks that malformed, mistyped and oversized OTLP/HTTP
// requests are rejected with the right status, that the collector keeps
// working afterwards, and that internal telemetry counts every outcome.
func TestBadInput(t *testing.T) {
	col := startCollector(t)
	for _, tc := range badRequests() {
		t.Run(tc.name, func(t *testing.T) {
			status, body := httpPost(t, col.tracesURL(), tc.contentType, tc.body)
			if status != tc.wantStatus {
				t.Fatalf("POST %s: status %d, want %d; body: %q", tc.contentType, status, tc.wantStatus, truncate(body))
			}
			if tc.wantMessage && len(bytes.TrimSpace(body)) == 0 {
				t.Fatalf("POST %s: status %d with an empty body, want an error message", tc.contentType, status)
			}
		})
	}

	// The collector must still accept and count a valid request.
	want := expectedCounts{}
	survivor := jsonSpan{method: "GET", route: "/after-bad-input", status: map[string]any{"intValue": "200"}}
	postJSON(t, col.tracesURL(), otlpJSON(service("bad-input-survivor"), survivor))
	want.add(map[string]string{
		"job": "bad-input-survivor", "http_route": "/after-bad-input",
		"http_request_method": "GET", "http_response_status_code": "200",
	}, 1)
	waitExporterCounts(t, col, want.exported(), "the request sent after bad input")

	waitTelemetryOutcomes(t, col)
}

// badRequest is one rejected POST /v1/traces.
type badRequest struct {
	name        string
	contentType string
	body        []byte
	wantStatus  int
	wantMessage bool
}

func badRequests() []badRequest {
	return []badRequest{
		// Field 1 (resource_spans) claims a huge length: cannot decode.
		{"garbage protobuf", "application/x-protobuf", []byte("\x0a\xff\xff\xff\xff\x0fnot a protobuf"), http.StatusBadRequest, true},
		{"truncated JSON", "application/json", []byte(`{"resourceSpans": [`), http.StatusBadRequest, true},
		{"text/plain", "text/plain", otlpJSON(service("wrong-content-type"), jsonSpan{method: "GET", status: map[string]any{"intValue": "200"}}), http.StatusUnsupportedMediaType, false},
		{"2 MiB body", "application/json", oversizedJSON(2 << 20), http.StatusRequestEntityTooLarge, false},
	}
}

// ---------------------------------------------------------------------------
// Expected and observed series

// seriesCounts maps a label set (without __name__, rendered by
// labels.Labels.String, so sorted) to its counter value.
type seriesCounts map[string]float64

// expectedCounts accumulates what the test sent, per exported label set.
type expectedCounts map[string]*expectedSeries

type expectedSeries struct {
	labels map[string]string
	value  float64
}

func (e expectedCounts) add(lbls map[string]string, n int) {
	key := labelKey(labels.FromMap(lbls))
	if s, ok := e[key]; ok {
		s.value += float64(n)
		return
	}
	e[key] = &expectedSeries{labels: lbls, value: float64(n)}
}

// exported is the expectation for the exporter's own /metrics.
func (e expectedCounts) exported() seriesCounts {
	out := seriesCounts{}
	for k, s := range e {
		out[k] = s.value
	}
	return out
}

// stored is the expectation inside Prometheus: with honor_labels, a series
// exported without an instance label gets the scrape target's address.
func (e expectedCounts) stored(target string) seriesCounts {
	out := seriesCounts{}
	for _, s := range e {
		lbls := make(map[string]string, len(s.labels)+1)
		for k, v := range s.labels {
			lbls[k] = v
		}
		if _, ok := lbls["instance"]; !ok {
			lbls["instance"] = target
		}
		out[labelKey(labels.FromMap(lbls))] = s.value
	}
	return out
}

// labelKey renders a sorted label set without the metric name. Labels with
// an empty value are kept on purpose: the contract says "absent", so an
// exporter writing e.g. http_route="" must show up in the diff.
func labelKey(l labels.Labels) string {
	var parts []string
	l.Range(func(lbl labels.Label) {
		if lbl.Name != labels.MetricName {
			parts = append(parts, lbl.Name+"="+strconv.Quote(lbl.Value))
		}
	})
	return "{" + strings.Join(parts, ", ") + "}"
}

// diffCounts describes how got differs from want, or returns "" if equal.
func diffCounts(got, want seriesCounts) string {
	var lines []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			lines = append(lines, fmt.Sprintf("missing    %s want %v", k, w))
		case g != w:
			lines = append(lines, fmt.Sprintf("mismatch   %s got %v want %v", k, g, w))
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			lines = append(lines, fmt.Sprintf("unexpected %s got %v", k, g))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

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

// ---------------------------------------------------------------------------
// Prometheus server checks

// promQueryResponse is the /api/v1/query envelope for an instant vector.
type promQueryResponse struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Data   struct {
		ResultType string       `json:"resultType"`
		Result     model.Vector `json:"result"`
	} `json:"data"`
}

// promQuery runs an instant query and returns the vector result.
func promQuery(p *promServer, query string) (model.Vector, error) {
	status, body, err := httpGet("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(query))
	if err != nil {
		return nil, err
	}
	var resp promQueryResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return nil, fmt.Errorf("status %d, decode %q: %w", status, truncate(body), err)
	}
	if resp.Status != "success" || resp.Data.ResultType != "vector" {
		return nil, fmt.Errorf("status %d, query %q: %s (%s)", status, query, resp.Error, resp.Data.ResultType)
	}
	return resp.Data.Result, nil
}

// vectorCounts keys a query result the same way as seriesCounts.
func vectorCounts(v model.Vector) seriesCounts {
	out := seriesCounts{}
	for _, s := range v {
		m := make(map[string]string, len(s.Metric))
		for k, val := range s.Metric {
			m[string(k)] = string(val)
		}
		out[labelKey(labels.FromMap(m))] = float64(s.Value)
	}
	return out
}

// waitPrometheusCounts polls Prometheus until the stored series equal want
// exactly: same label sets, same values, nothing extra.
func waitPrometheusCounts(t *testing.T, p *promServer, want seriesCounts) {
	t.Helper()
	eventually(t, convergeTimeout, "Prometheus to store the expected "+metricName, func() (bool, string) {
		v, err := promQuery(p, metricName)
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(vectorCounts(v), want)
		return diff == "", diff
	})
}

// checkKongInstance asserts that every Kong series carries one instance, the
// collector's scrape target, whichever Kong node reported the requests.
func checkKongInstance(t *testing.T, p *promServer, instanceID string) {
	t.Helper()
	v, err := promQuery(p, `count by (instance) (`+metricName+`{job="kong"})`)
	if err != nil {
		t.Fatalf("query Kong instances: %v", err)
	}
	if len(v) != 1 || string(v[0].Metric["instance"]) != instanceID {
		t.Fatalf("Kong series instances = %v, want exactly instance=%q", v, instanceID)
	}
}

// ---------------------------------------------------------------------------
// Exporter exposition checks

// scrape fetches a /metrics endpoint and returns its body and Content-Type.
func scrape(u string) ([]byte, string, error) {
	resp, err := httpClient.Get(u)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, "", err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("GET %s: status %d: %q", u, resp.StatusCode, truncate(body))
	}
	return body, resp.Header.Get("Content-Type"), nil
}

// parsedSample is one float sample from an exposition.
type parsedSample struct {
	labels labels.Labels // includes __name__
	value  float64
}

// parseExposition runs textparse over the whole body, every entry up to
// io.EOF, so that any syntax error anywhere fails the check.
func parseExposition(body []byte, contentType string) ([]parsedSample, error) {
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{})
	if p == nil {
		return nil, fmt.Errorf("no parser for Content-Type %q: %v", contentType, err)
	}
	if err != nil {
		return nil, fmt.Errorf("textparse.New(%q): %w", contentType, err)
	}
	var out []parsedSample
	for {
		entry, err := p.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parse exposition after %d samples: %w", len(out), err)
		}
		switch entry {
		case textparse.EntrySeries:
			var l labels.Labels
			p.Labels(&l)
			_, _, v := p.Series()
			out = append(out, parsedSample{labels: l, value: v})
		case textparse.EntryHistogram:
			return nil, fmt.Errorf("unexpected native histogram in text exposition")
		}
	}
}

// samplesOf keys the samples of one metric name like seriesCounts.
func samplesOf(samples []parsedSample, name string) seriesCounts {
	out := seriesCounts{}
	for _, s := range samples {
		if s.labels.Get(labels.MetricName) == name {
			out[labelKey(s.labels)] = s.value
		}
	}
	return out
}

// exporterCounts scrapes and parses the promstream exporter.
func exporterCounts(col *collector) (seriesCounts, error) {
	body, _, err := scrape(col.metricsURL())
	if err != nil {
		return nil, err
	}
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		return nil, err
	}
	return samplesOf(samples, metricName), nil
}

// waitExporterCounts polls the exporter until its gateway_requests_total
// series equal want exactly.
func waitExporterCounts(t *testing.T, col *collector, want seriesCounts, what string) {
	t.Helper()
	eventually(t, convergeTimeout, what, func() (bool, string) {
		got, err := exporterCounts(col)
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(got, want)
		return diff == "", diff
	})
}

// checkExporterExposition validates one scrape of the exporter: the media
// type, promtool's linter, a full textparse pass, and the exact counts.
func checkExporterExposition(t *testing.T, col *collector, want seriesCounts) {
	t.Helper()
	body, contentType, err := scrape(col.metricsURL())
	if err != nil {
		t.Fatalf("scrape exporter: %v", err)
	}
	checkContentType(t, contentType)
	runPromtool(t, body)
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		t.Fatalf("exporter exposition does not parse: %v\nbody:\n%s", err, truncate(body))
	}
	if diff := diffCounts(samplesOf(samples, metricName), want); diff != "" {
		t.Fatalf("exporter %s differs from what was sent:\n%s", metricName, diff)
	}
}

// checkContentType requires the Prometheus text format 0.0.4 media type for
// a client that sends no Accept header.
func checkContentType(t *testing.T, contentType string) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "text/plain" || (params["version"] != "" && params["version"] != "0.0.4") {
		t.Errorf("exporter Content-Type = %q, want %q", contentType, exporterContentType)
	}
}

// runPromtool pipes the body (kept in a temp file for post-mortems) into
// `promtool check metrics`. Lint problems make promtool exit non-zero.
func runPromtool(t *testing.T, body []byte) {
	t.Helper()
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found in PATH: %v", err)
	}
	path := filepath.Join(t.TempDir(), "exporter-metrics.txt")
	if err := os.WriteFile(path, body, 0o600); err != nil {
		t.Fatalf("write exposition: %v", err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open exposition: %v", err)
	}
	defer f.Close()
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = f
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("promtool check metrics failed (%v):\n%s", err, out)
	}
}

// ---------------------------------------------------------------------------
// Internal telemetry

// outcomeKey identifies a receiver request counter by the labels we match on.
type outcomeKey struct{ outcome, transport string }

// receiverOutcomes sums otelcol_receiver_gateway_requests by outcome
// and transport, ignoring any other labels (scope, component id, ...).
func receiverOutcomes(col *collector) (map[outcomeKey]float64, error) {
	body, contentType, err := scrape(col.telemetryURL())
	if err != nil {
		return nil, err
	}
	samples, err := parseExposition(body, contentType)
	if err != nil {
		return nil, err
	}
	out := map[outcomeKey]float64{}
	for _, s := range samples {
		if s.labels.Get(labels.MetricName) == telemetryName {
			out[outcomeKey{s.labels.Get("outcome"), s.labels.Get("transport")}] += s.value
		}
	}
	return out, nil
}

// sumOutcome adds up one outcome over all transports.
func sumOutcome(m map[outcomeKey]float64, outcome string) float64 {
	var total float64
	for k, v := range m {
		if k.outcome == outcome {
			total += v
		}
	}
	return total
}

// waitTelemetryOutcomes checks the counters for the requests TestBadInput
// sent. Polled because the telemetry pipeline need not be synchronous.
func waitTelemetryOutcomes(t *testing.T, col *collector) {
	t.Helper()
	eventually(t, convergeTimeout, telemetryName+" outcomes", func() (bool, string) {
		m, err := receiverOutcomes(col)
		if err != nil {
			return false, err.Error()
		}
		var problems []string
		check := func(ok bool, format string, args ...any) {
			if !ok {
				problems = append(problems, fmt.Sprintf(format, args...))
			}
		}
		check(sumOutcome(m, "malformed") >= 2, "malformed (all transports) = %v, want >= 2", sumOutcome(m, "malformed"))
		check(m[outcomeKey{"malformed", "http"}] == 2, "malformed{transport=http} = %v, want 2", m[outcomeKey{"malformed", "http"}])
		check(sumOutcome(m, "unsupported_media_type") == 1, "unsupported_media_type = %v, want 1", sumOutcome(m, "unsupported_media_type"))
		check(sumOutcome(m, "too_large") == 1, "too_large = %v, want 1", sumOutcome(m, "too_large"))
		check(sumOutcome(m, "accepted") == 1, "accepted = %v, want 1", sumOutcome(m, "accepted"))
		return len(problems) == 0, fmt.Sprintf("%s\nall (outcome, transport) values: %v", strings.Join(problems, "\n"), m)
	})
}

// ---------------------------------------------------------------------------
// Small utilities

// randomHex returns n random bytes hex-encoded (OTLP/JSON IDs, request ids).
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b)
}

// newUUIDString returns a random (version 4) UUID.
func newUUIDString() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

func newUUID(t *testing.T) string {
	t.Helper()
	id := newUUIDString()
	t.Logf("Kong service.instance.id = %s", id)
	return id
}

// truncate keeps error messages readable when a body is large.
func truncate(b []byte) string {
	const max = 2048
	if len(b) > max {
		return string(b[:max]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}
