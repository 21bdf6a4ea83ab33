package e2e

// Naming profiles end to end: Kong-shaped spans (OpenTelemetry Go SDK) and
// Kong http-log JSON into a receiver with the kong profile, APISIX
// http-logger JSON and APISIX/Envoy-shaped spans into one with the apisix
// profile; exact counts read back from a real Prometheus, and the exporter's
// kong lines compared line for line.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	"go.opentelemetry.io/otel/trace"
)

// profileConfig is collectorConfig with a receiver profile and the
// exporter's compatibility preset of the same name (kong, apisix).
func profileConfig(profile string) string {
	return strings.NewReplacer(
		"    flush_interval: 1s\n", "    flush_interval: 1s\n    profile: "+profile+"\n",
		"    without_scope_info: true\n", "    compatibility: "+profile+"\n",
	).Replace(collectorConfig)
}

// kongHTTPLogEntry is one http-log entry shaped like Kong 3.8's sample
// (docs/gateways.md §1d).
func kongHTTPLogEntry(route, consumer string, status, reqSize, respSize int) string {
	c := "null"
	if consumer != "" {
		c = fmt.Sprintf(`{"id":"c-%s","username":%q}`, consumer, consumer)
	}
	return fmt.Sprintf(`{"request":{"method":"GET","size":%d,"uri":"/x","headers":{"accept":"*/*"}},
"response":{"status":%d,"size":%d,"headers":{"content-length":"10"}},
"route":{"id":"id-%s","name":%q,"paths":["/%s"]},"service":{"name":"example_service","host":"httpbin.konghq.com","id":"s1"},
"consumer":%s,"workspace_name":"default","tries":[{"ip":"34.237.204.224","port":80,"balancer_latency":0}],
"source":"upstream","upstream_status":"%d","latencies":{"kong":1,"proxy":171,"request":173,"receive":1}}`,
		reqSize, status, respSize, route, route, route, c, status)
}

func queryVector(t *testing.T, p *promServer, q string, want map[string]float64, key func(m map[string]string) string) {
	t.Helper()
	eventually(t, convergeTimeout, "Prometheus: "+q, func() (bool, string) {
		v, err := promQuery(p, q)
		if err != nil {
			return false, err.Error()
		}
		got := map[string]float64{}
		for _, s := range v {
			m := map[string]string{}
			for k, val := range s.Metric {
				m[string(k)] = string(val)
			}
			got[key(m)] = float64(s.Value)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return false, fmt.Sprintf("got %v, want %v", got, want)
		}
		return true, ""
	})
}

func TestKongProfile(t *testing.T) {
	// per_consumer, as Kong's plugin: the consumer label is the username.
	col := startCollectorWith(t, strings.Replace(profileConfig("kong"), "    profile: kong\n", "    profile: kong\n    per_consumer: true\n", 1), 4)
	prom := startPrometheus(t, col.promAddr)

	sendKongSample(t, col.httpAddr)

	key := func(m map[string]string) string {
		return m["service"] + "|" + m["route"] + "|" + m["code"] + "|" + m["source"] + "|" + m["workspace"] + "|" + m["consumer"]
	}
	queryVector(t, prom, "kong_http_requests_total", map[string]float64{
		"example_service|orders|200|service|default|alice":  2,
		"example_service|orders|503|service|default|":       1,
		"httpbin.konghq.com|/anything|200|service|default|": 4,
	}, key)
	queryVector(t, prom, `sum by (direction) (kong_bandwidth_bytes)`, map[string]float64{"ingress": 378, "egress": 20014},
		func(m map[string]string) string { return m["direction"] })
	queryVector(t, prom, `kong_upstream_latency_ms_count{route="orders"}`, map[string]float64{"example_service|orders": 3},
		func(m map[string]string) string { return m["service"] + "|" + m["route"] })
	queryVector(t, prom, `kong_upstream_latency_ms_bucket{route="orders",le="100.0"}`, map[string]float64{"orders": 0},
		func(m map[string]string) string { return m["route"] })
	queryVector(t, prom, `kong_kong_latency_ms_bucket{route="orders",le="1.0"}`, map[string]float64{"orders": 3},
		func(m map[string]string) string { return m["route"] })

	// The exporter's lines for these series, exactly.
	exposition, _, err := scrape(col.metricsURL())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(exposition), "\n") {
		if strings.HasPrefix(line, "kong_http_requests_total") || strings.HasPrefix(line, "kong_bandwidth_bytes{") && strings.Contains(line, `route="orders"`) {
			got = append(got, line)
		}
	}
	sort.Strings(got)
	// Kong's own format (docs/gateways.md §1c): its label order, empty
	// labels written; then the collector's identity.
	want := []string{
		`kong_bandwidth_bytes{service="example_service",route="orders",direction="egress",workspace="default",consumer="",collector="e2e-0"} 50`,
		`kong_bandwidth_bytes{service="example_service",route="orders",direction="egress",workspace="default",consumer="alice",collector="e2e-0"} 19964`,
		`kong_bandwidth_bytes{service="example_service",route="orders",direction="ingress",workspace="default",consumer="",collector="e2e-0"} 100`,
		`kong_bandwidth_bytes{service="example_service",route="orders",direction="ingress",workspace="default",consumer="alice",collector="e2e-0"} 278`,
		`kong_http_requests_total{service="example_service",route="orders",code="200",source="service",workspace="default",consumer="alice",collector="e2e-0"} 2`,
		`kong_http_requests_total{service="example_service",route="orders",code="503",source="service",workspace="default",consumer="",collector="e2e-0"} 1`,
		`kong_http_requests_total{service="httpbin.konghq.com",route="/anything",code="200",source="service",workspace="default",consumer="",collector="e2e-0"} 4`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("kong lines:\n%s\nwant:\n%s\nexposition:\n%.3000s", strings.Join(got, "\n"), strings.Join(want, "\n"), exposition)
	}
}

func TestAPISIXProfile(t *testing.T) {
	col := startCollectorWith(t, profileConfig("apisix"), 4)
	prom := startPrometheus(t, col.promAddr)

	sendAPISIXSample(t, col.httpAddr)

	key := func(m map[string]string) string {
		return m["code"] + "|" + m["route"] + "|" + m["matched_uri"] + "|" + m["matched_host"] + "|" + m["node"] + "|" + m["request_type"] + "|" + m["response_source"]
	}
	queryVector(t, prom, "apisix_http_status", map[string]float64{
		"200|http-logger-route|||3.213.1.197|traditional_http|upstream": 2,
		"502|http-logger-route|||3.213.1.197|traditional_http|upstream": 1,
		// matched_host is the route's host pattern, which spans do not
		// carry; the span's net.host.name (the Host header) is not used.
		"200|api|/api/*|||traditional_http|upstream": 5,
	}, key)
	queryVector(t, prom, `apisix_bandwidth{route="http-logger-route"}`, map[string]float64{"ingress": 255, "egress": 1851},
		func(m map[string]string) string { return m["type"] })
	queryVector(t, prom, `apisix_http_latency_bucket{route="http-logger-route",le="2000.0"}`, map[string]float64{"request": 3, "upstream": 3, "apisix": 3},
		func(m map[string]string) string { return m["type"] })
	queryVector(t, prom, `apisix_http_latency_bucket{route="http-logger-route",le="1000.0"}`, map[string]float64{"request": 0, "upstream": 0, "apisix": 3},
		func(m map[string]string) string { return m["type"] })
}

// sendKongSample sends Kong's http-log (one entry alone, the default batch
// size, then a batch of three with a broken entry that only rejects itself)
// and five Kong spans over OTLP/HTTP, four counted: service
// example_service, route orders: two 200 (consumer alice), one 503
// (no consumer); service httpbin.konghq.com, route /anything: four 200.
// Request sizes 139, 139, 100; response sizes 9982, 9982, 50.
func sendKongSample(t *testing.T, httpAddr string) {
	t.Helper()
	status, body := httpPost(t, "http://"+httpAddr+"/kong/http-log", "application/json", []byte(kongHTTPLogEntry("orders", "alice", 200, 139, 9982)))
	if status != 200 || string(body) != `{"accepted":1,"rejected":0}` {
		t.Fatalf("http-log: %d %s", status, body)
	}
	batch := "[" + kongHTTPLogEntry("orders", "alice", 200, 139, 9982) + "," + kongHTTPLogEntry("orders", "", 503, 100, 50) +
		`,{"response":{"status":"oops"}}]`
	status, body = httpPost(t, "http://"+httpAddr+"/kong/http-log", "application/json", []byte(batch))
	if status != 200 || string(body) != `{"accepted":2,"rejected":1,"errors":["entry 2: want a number, got \"oops\""]}` {
		t.Fatalf("http-log batch: %d %s", status, body)
	}

	// Spans (Kong ≥ 3.4 shape, as in TestEndToEnd): route = http.route,
	// service = the balancer's net.peer.name, workspace default.
	tp := newHTTPTracerProvider(t, httpAddr, kongResource(newUUID(t)))
	tracer := tp.Tracer("kong-internal", trace.WithInstrumentationVersion("0.1.0"))
	for range 4 {
		emitKongTrace(tracer, gatewayRequest{method: "GET", route: "/anything", path: "/anything", status: 200})
	}
	emitKongTrace(tracer, gatewayRequest{method: "GET", route: "", path: "/nowhere", status: 404}) // no route: not counted, as in Kong
	shutdownProvider(t, tp)
}

// sendAPISIXSample sends APISIX's http-logger (three entries, route
// http-logger-route, node 3.213.1.197: two 200, one 502; 85 bytes in and
// 617 out each; latency 1200 ms, upstream 1133) and five APISIX root spans
// (route api, /api/*, 200) over OTLP/HTTP.
func sendAPISIXSample(t *testing.T, httpAddr string) {
	t.Helper()
	// http-logger NDJSON (concat_method new_line), APISIX 3.9 shape.
	entry := func(status int) string {
		return fmt.Sprintf(`{"upstream":"3.213.1.197:80","server":{"hostname":"7d8d831179d4","version":"3.9.0"},"start_time":1718291190508,"client_ip":"192.168.65.1","response":{"status":%d,"headers":{"server":"APISIX/3.9.0"},"size":617},"latency":1200.0000476837,"upstream_latency":1133,"apisix_latency":67.000047683716,"request":{"url":"http://127.0.0.1:9080/anything","querystring":{},"method":"GET","uri":"/anything","headers":{"host":"127.0.0.1:9080"},"size":85},"service_id":"","route_id":"http-logger-route"}`, status)
	}
	status, body := httpPost(t, "http://"+httpAddr+"/apisix/http-logger", "text/plain", []byte(entry(200)+"\n"+entry(200)+"\n"+entry(502)))
	if status != 200 || string(body) != `{"accepted":3,"rejected":0}` {
		t.Fatalf("http-logger: %d %s", status, body)
	}

	// APISIX 3.17 root spans via the SDK (scope opentelemetry-lua).
	tp := newHTTPTracerProvider(t, httpAddr, apisixResource())
	tracer := tp.Tracer("opentelemetry-lua")
	for range 5 {
		_, span := tracer.Start(context.Background(), "GET /api/*", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.method", "GET"), attribute.String("http.request.method", "GET"),
			attribute.String("apisix.route_id", "api"), attribute.String("apisix.route_name", "api-route"),
			attribute.String("http.route", "/api/*"), attribute.String("net.host.name", "example.com"),
			attribute.Int("http.status_code", 200), attribute.Int("http.response.status_code", 200),
			attribute.String("apisix.response_source", "upstream")))
		span.End()
	}
	shutdownProvider(t, tp)
}

// apisixResource is APISIX's default resource (docs/gateways.md §2a).
func apisixResource() *resource.Resource {
	return resource.NewSchemaless(
		attribute.String("service.name", "APISIX"),
		attribute.String("hostname", "RC"),
		attribute.String("telemetry.sdk.language", "lua"),
	)
}
