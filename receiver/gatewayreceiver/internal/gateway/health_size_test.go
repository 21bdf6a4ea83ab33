package gateway

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// The default bounds on admin API answers (kongMaxResponseBody,
// apisixMaxResponseBody, envoyMaxResponseBody) are sized from the largest
// answers each API gives at the seeds' scale (10k upstreams, 20k targets).
// The bodies below are built in each API's own shape, with every field the
// API writes (docs/gateways.md §1b, §2b, §3a), so their sizes are what a
// real answer weighs to within a few percent; each must decode completely
// and leave the bound at least twice its size. The one-document answers
// (APISIX, Envoy) grow linearly with their checkers and clusters: a tenth
// of the scale is built and decoded, and its size scaled by ten.

// kongUpstreamEntity is one upstream of GET /upstreams as Kong 3.x writes
// it: every field of the upstream schema with its default health checks.
const kongUpstreamEntity = `{"id":"0a6c0a4e-5c1f-4d47-9d0b-2f3c1b7{ID}","name":"upstream-{ID}.internal","algorithm":"round-robin",` +
	`"hash_on":"none","hash_fallback":"none","hash_on_header":null,"hash_fallback_header":null,"hash_on_cookie":null,` +
	`"hash_on_cookie_path":"/","hash_on_query_arg":null,"hash_fallback_query_arg":null,"hash_on_uri_capture":null,` +
	`"hash_fallback_uri_capture":null,"slots":10000,"healthchecks":{"active":{"type":"http","timeout":1,"concurrency":10,` +
	`"http_path":"/","https_verify_certificate":true,"https_sni":null,"headers":null,"healthy":{"interval":0,"successes":0,` +
	`"http_statuses":[200,302]},"unhealthy":{"interval":0,"http_failures":0,"tcp_failures":0,"timeouts":0,` +
	`"http_statuses":[429,404,500,501,502,503,504,505]}},"passive":{"type":"http","healthy":{"successes":0,` +
	`"http_statuses":[200,201,202,203,204,205,206,207,208,226,300,301,302,303,304,305,306,307,308]},` +
	`"unhealthy":{"http_failures":0,"tcp_failures":0,"timeouts":0,"http_statuses":[429,500,503]}},"threshold":0},` +
	`"tags":["team-payments","env-production"],"host_header":null,"client_certificate":null,"use_srv_name":false,` +
	`"created_at":1700000000,"updated_at":1700000000}`

func kongUpstreamPage(n int) []byte {
	b := []byte(`{"data":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		id := strconv.Itoa(100000 + i)[1:] // 00000, 00001, …
		b = append(b, strings.ReplaceAll(kongUpstreamEntity, "{ID}", id)...)
	}
	return append(b, `],"offset":"WyIwYTZjMGE0ZS01YzFmLTRkNDctOWQwYi0yZjNjMWI3YThlOTk5Il0","next":"/upstreams?offset=WyIwYTZjMGE0ZS01YzFmLTRkNDctOWQwYi0yZjNjMWI3YThlOTk5Il0&size=1000"}`...)
}

// kongTargetPage is a page of GET /upstreams/{id}/health: n targets of
// addrs addresses each (a DNS name resolving to many A records).
func kongTargetPage(n, addrs int) []byte {
	b := []byte(`{"data":[`)
	for i := range n {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":"5a8b2c1d-3e4f-4a5b-8c6d-7e8f9a0b1c2d","target":"backend-`+strconv.Itoa(i)+`.svc.cluster.local:8080","weight":100,`+
			`"health":"HEALTHY","created_at":1700000000.123,"updated_at":1700000000.123,"upstream":{"id":"0a6c0a4e-5c1f-4d47-9d0b-2f3c1b7a8e00"},"tags":null,`+
			`"data":{"host":"backend-`+strconv.Itoa(i)+`.svc.cluster.local","port":8080,"dns":"A","nodeWeight":100,`+
			`"weight":{"total":`+strconv.Itoa(100*addrs)+`,"unavailable":0,"available":`+strconv.Itoa(100*addrs)+`},"addresses":[`...)
		for j := range addrs {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"ip":"10.`+strconv.Itoa(i%250)+`.`+strconv.Itoa(j/250)+`.`+strconv.Itoa(j%250)+`","port":8080,"weight":100,"health":"HEALTHY"}`...)
		}
		b = append(b, `]}}`...)
	}
	return append(b, `],"next":null,"node_id":"cbb297c0-14a9-46bc-ad91-1d0ef9b42df9"}`...)
}

// apisixHealthcheck is /v1/healthcheck with checkers of perChecker nodes.
func apisixHealthcheck(checkers, perChecker int) []byte {
	b := []byte(`[`)
	for c := range checkers {
		if c > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":"/apisix/upstreams/`+strconv.Itoa(c)+`","type":"http","nodes":[`...)
		for n := range perChecker {
			if n > 0 {
				b = append(b, ',')
			}
			ip := "10." + strconv.Itoa(c>>8&255) + "." + strconv.Itoa(c&255) + "." + strconv.Itoa(n)
			b = append(b, `{"ip":"`+ip+`","port":8080,"hostname":"backend-`+strconv.Itoa(c)+`.svc.cluster.local","status":"healthy",`+
				`"counter":{"success":0,"http_failure":0,"tcp_failure":0,"timeout_failure":0}}`...)
		}
		b = append(b, `]}`...)
	}
	return append(b, ']')
}

// envoyClustersBody is /clusters?format=json as Envoy pretty-prints it (one
// space of indent per level): clusters of perCluster hosts, each host with
// its eight stats, health status, weight, hostname and locality, each
// cluster with its circuit breakers.
func envoyClustersBody(clusters, perCluster int) []byte {
	var b bytes.Buffer
	b.WriteString("{\n \"cluster_statuses\": [\n")
	for c := range clusters {
		if c > 0 {
			b.WriteString(",\n")
		}
		name := "outbound|8080||backend-" + strconv.Itoa(c) + ".default.svc.cluster.local"
		b.WriteString("  {\n   \"name\": \"" + name + "\",\n   \"host_statuses\": [\n")
		for h := range perCluster {
			if h > 0 {
				b.WriteString(",\n")
			}
			ip := "10." + strconv.Itoa(c>>8&255) + "." + strconv.Itoa(c&255) + "." + strconv.Itoa(h)
			b.WriteString("    {\n     \"address\": {\n      \"socket_address\": {\n       \"address\": \"" + ip +
				"\",\n       \"port_value\": 8080\n      }\n     },\n     \"stats\": [\n")
			for i, st := range []string{"cx_connect_fail", "cx_total", "rq_error", "rq_success", "rq_timeout", "rq_total", "cx_active", "rq_active"} {
				if i > 0 {
					b.WriteString(",\n")
				}
				b.WriteString("      {\n       \"value\": \"1234567\",\n")
				if i >= 6 {
					b.WriteString("       \"type\": \"GAUGE\",\n")
				}
				b.WriteString("       \"name\": \"" + st + "\"\n      }")
			}
			b.WriteString("\n     ],\n     \"health_status\": {\n      \"eds_health_status\": \"HEALTHY\"\n     },\n" +
				"     \"weight\": 1,\n     \"hostname\": \"backend-" + strconv.Itoa(c) + ".default.svc.cluster.local\",\n" +
				"     \"locality\": {\n      \"region\": \"eu-west-1\",\n      \"zone\": \"eu-west-1a\"\n     }\n    }")
		}
		b.WriteString("\n   ],\n   \"circuit_breakers\": {\n    \"thresholds\": [\n     {\n      \"max_connections\": 1024,\n" +
			"      \"max_pending_requests\": 1024,\n      \"max_requests\": 1024,\n      \"max_retries\": 3\n     },\n     {\n" +
			"      \"priority\": \"HIGH\",\n      \"max_connections\": 1024,\n      \"max_pending_requests\": 1024,\n" +
			"      \"max_requests\": 1024,\n      \"max_retries\": 3\n     }\n    ]\n   },\n   \"observability_name\": \"" + name + "\",\n" +
			"   \"eds_service_name\": \"" + name + "\"\n  }")
	}
	b.WriteString("\n ]\n}\n")
	return b.Bytes()
}

func TestDefaultResponseBoundsFitTheSeedsScale(t *testing.T) {
	cases := []struct {
		name   string
		body   []byte
		bound  int64
		decode func([]byte) (int, error)
		rows   int
		scale  int64 // the body is 1/scale of the answer measured
	}{
		{"kong: a page of 1,000 upstreams", kongUpstreamPage(1000), kongMaxResponseBody, func(b []byte) (int, error) {
			p, err := DecodeKongUpstreams(b)
			return len(p.Upstreams), err
		}, 1000, 1},
		{"kong: a page of 1,000 targets of 50 addresses", kongTargetPage(1000, 50), kongMaxResponseBody, func(b []byte) (int, error) {
			obs, _, err := DecodeKongHealth(nil, "u", b)
			return len(obs), err
		}, 50_000, 1},
		{"apisix: 10,000 checkers of 2 nodes", apisixHealthcheck(1_000, 2), apisixMaxResponseBody, func(b []byte) (int, error) {
			obs, err := DecodeAPISIXHealth(nil, b)
			return len(obs), err
		}, 2_000, 10},
		{"envoy: 10,000 clusters of 2 hosts", envoyClustersBody(1_000, 2), envoyMaxResponseBody, func(b []byte) (int, error) {
			obs, err := DecodeEnvoyClusters(nil, b)
			return len(obs), err
		}, 2_000, 10},
	}
	for _, c := range cases {
		n, err := c.decode(c.body)
		if err != nil || n != c.rows {
			t.Errorf("%s: decoded %d rows (%v), want %d", c.name, n, err, c.rows)
		}
		size := int64(len(c.body)) * c.scale
		t.Logf("%s: %.1f MB, bound %d MiB (%.1f×)", c.name, float64(size)/1e6, c.bound>>20, float64(c.bound)/float64(size))
		if size*2 > c.bound {
			t.Errorf("%s: %d bytes leave less than twice its size under the default bound of %d", c.name, size, c.bound)
		}
	}
}
