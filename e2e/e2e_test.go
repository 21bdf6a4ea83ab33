package e2e

// Black-box tests of the otelgateway distribution: gateway-shaped OTLP traces
// go in, gateway_requests_total comes out of the promstream exporter, and a
// real Prometheus must be able to scrape it.

import (
	"bytes"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
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

// e2eCollector is collector_name in the harness configs: every gateway
// series carries it as its collector label.
const e2eCollector = "e2e-0"

func (e expectedCounts) add(lbls map[string]string, n int) {
	if _, ok := lbls["collector"]; !ok {
		with := make(map[string]string, len(lbls)+1)
		for k, v := range lbls {
			with[k] = v
		}
		with["collector"] = e2eCollector
		lbls = with
	}
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
		if lbl.Name != model.MetricNameLabel {
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
