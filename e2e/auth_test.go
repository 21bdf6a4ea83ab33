package e2e

// TLS and bearer-token authentication end to end: the gateway receiver's
// HTTP and gRPC servers and the promstream exporter's /metrics, each behind
// TLS (a CA and server certificate made at test time) and its own
// bearertokenauth extension. Requests without a token or with a wrong one are
// refused (401 / Unauthenticated) and leave no trace in the exported series;
// requests with the right token are counted exactly; a real Prometheus
// scrapes over HTTPS with credentials.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	ingestToken = "ingest-2c6f0d1e9a7b"
	scrapeToken = "scrape-81d4be03f5a9"
	wrongToken  = "ingest-0000000000"
	healthName  = "gateway_upstream_target_health"
)

// ---------------------------------------------------------------------------
// Certificates

// testPKI is a CA and a server certificate for the loopback addresses.
type testPKI struct {
	caFile, certFile, keyFile string
	pool                      *x509.CertPool
}

// newTestPKI writes a self-signed ECDSA CA and a server certificate signed
// by it (SANs 127.0.0.1, ::1, localhost) as PEM files into a temp dir.
func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "otelgateway e2e CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server-key.pem"),
		pool:     x509.NewCertPool(),
	}
	p.pool.AddCert(ca)
	for path, block := range map[string]*pem.Block{
		p.caFile:   {Type: "CERTIFICATE", Bytes: caDER},
		p.certFile: {Type: "CERTIFICATE", Bytes: srvDER},
		p.keyFile:  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// clientTLS trusts the test CA only.
func (p *testPKI) clientTLS() *tls.Config {
	return &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
}

// ---------------------------------------------------------------------------
// Collector

// authCollectorConfig puts both receiver servers behind TLS and
// bearertokenauth/in, and the exporter behind TLS and bearertokenauth/scrape.
// The receiver is in a metrics pipeline, so health push is allowed.
const authCollectorConfig = `extensions:
  bearertokenauth/in:
    token: {{INGEST_TOKEN}}
  bearertokenauth/scrape:
    token: {{SCRAPE_TOKEN}}
receivers:
  gateway:
    protocols:
      http:
        endpoint: 127.0.0.1:{{P1}}
        tls:
          cert_file: {{CERT}}
          key_file: {{KEY}}
        auth:
          authenticator: bearertokenauth/in
      grpc:
        endpoint: 127.0.0.1:{{P2}}
        tls:
          cert_file: {{CERT}}
          key_file: {{KEY}}
        auth:
          authenticator: bearertokenauth/in
    flush_interval: 1s
    collector_name: e2e-0
    health:
      report_interval: 30s
      push: {}
processors:
  cumulative:
    max_stale: 5m
exporters:
  promstream:
    endpoint: 127.0.0.1:{{P3}}
    tls:
      cert_file: {{CERT}}
      key_file: {{KEY}}
    auth:
      authenticator: bearertokenauth/scrape
    metric_expiration: 5m
    without_scope_info: true
service:
  extensions: [bearertokenauth/in, bearertokenauth/scrape]
  telemetry:
    logs:
      level: info
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {{P4}}
  pipelines:
    metrics:
      receivers: [gateway]
      processors: [cumulative]
      exporters: [promstream]
`

// authCollector is a collector started on authCollectorConfig, with clients
// that trust its certificate.
type authCollector struct {
	*collector
	pki    *testPKI
	client *http.Client // HTTPS, trusts the test CA
}

func (c *authCollector) url(path string) string { return "https://" + c.httpAddr + path }
func (c *authCollector) exporterURL() string    { return "https://" + c.promAddr + "/metrics" }

func startAuthCollector(t *testing.T, pki *testPKI) *authCollector {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 4)
	cfg := strings.NewReplacer(
		"{{INGEST_TOKEN}}", ingestToken, "{{SCRAPE_TOKEN}}", scrapeToken,
		"{{CERT}}", pki.certFile, "{{KEY}}", pki.keyFile,
		"{{P1}}", strconv.Itoa(ports[0]), "{{P2}}", strconv.Itoa(ports[1]),
		"{{P3}}", strconv.Itoa(ports[2]), "{{P4}}", strconv.Itoa(ports[3]),
	).Replace(authCollectorConfig)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatalf("write collector config: %v", err)
	}
	c := &authCollector{
		collector: &collector{
			httpAddr:      hostPort(ports[0]),
			grpcAddr:      hostPort(ports[1]),
			promAddr:      hostPort(ports[2]),
			telemetryAddr: hostPort(ports[3]),
		},
		pki: pki,
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: pki.clientTLS(),
		}},
	}
	c.proc = startProcess(t, "otelcol", filepath.Join(dir, "otelcol.log"), otelcolBin, "--config", cfgPath)
	waitReady(t, c.proc, c.exporterURL()+" (with the scrape token)", func() error {
		code, _, err := c.do(http.MethodGet, c.exporterURL(), "", nil, scrapeToken)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("status %d", code)
		}
		return err
	})
	return c
}

// do sends one request over HTTPS with `Authorization: Bearer <token>`.
func (c *authCollector) do(method, url, contentType string, body []byte, token string) (int, []byte, error) {
	return doWith(c.client, method, url, contentType, body, "Bearer "+token)
}

// doWith sends one request; authorization "" sends no Authorization header.
func doWith(client *http.Client, method, url, contentType string, body []byte, authorization string) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// ---------------------------------------------------------------------------
// Payloads: every refused request carries series of its own (job "evil-…",
// upstream "evil"), so anything that leaked would show as an unexpected
// series, not only as a count off by some.

func authTracesJSON(job, route string, spans int) []byte {
	s := make([]jsonSpan, spans)
	for i := range s {
		s[i] = jsonSpan{method: "GET", route: route, status: map[string]any{"intValue": "200"}}
	}
	return otlpJSON(service(job), s...)
}

func authKongLog(route string) []byte {
	return []byte(kongHTTPLogEntry(route, "", 200, 100, 200))
}

func authHealthPush(upstream, state string) []byte {
	return fmt.Appendf(nil, `[{"gateway":"kong-auth","kind":"kong","upstream":%q,"target":"api:8080","address":"10.0.0.1:8080","state":%q}]`,
		upstream, state)
}

// otlpProtoRequest is an ExportTraceServiceRequest with spans semconv SERVER
// spans of one route, for the gRPC server.
func otlpProtoRequest(job, route string, spans int) *coltracepb.ExportTraceServiceRequest {
	str := func(k, v string) *commonpb.KeyValue {
		return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
	}
	now := time.Now()
	var out []*tracepb.Span
	for range spans {
		tid, sid := make([]byte, 16), make([]byte, 8)
		_, _ = rand.Read(tid)
		_, _ = rand.Read(sid)
		out = append(out, &tracepb.Span{
			TraceId: tid, SpanId: sid, Name: "GET " + route, Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: uint64(now.Add(-5 * time.Millisecond).UnixNano()), EndTimeUnixNano: uint64(now.UnixNano()),
			Attributes: []*commonpb.KeyValue{
				str("http.request.method", "GET"),
				{Key: "http.response.status_code", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: 200}}},
				str("http.route", route), str("url.path", route), str("url.scheme", "https"),
			},
		})
	}
	return &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   &resourcepb.Resource{Attributes: []*commonpb.KeyValue{str("service.name", job)}},
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "e2e"}, Spans: out}},
	}}}
}

// grpcExport calls TraceService/Export with `authorization` metadata ("" sends
// none) and returns the status.
func grpcExport(conn *grpc.ClientConn, authorization string, req *coltracepb.ExportTraceServiceRequest) *status.Status {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if authorization != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", authorization)
	}
	_, err := coltracepb.NewTraceServiceClient(conn).Export(ctx, req)
	return status.Convert(err)
}

// ---------------------------------------------------------------------------
// Telemetry of the refused requests

// serverStatusCounts reads the collector's own telemetry: the otelhttp
// server request counts (http_server_request_duration_count) keyed
// "port|status code", and the otelgrpc server call counts
// (rpc_server_call_duration_count) keyed by gRPC status name. otelhttp and
// otelgrpc wrap the auth check, so they see every refusal.
func serverStatusCounts(c *authCollector) (httpCodes, grpcCodes map[string]float64, err error) {
	body, contentType, err := scrape(c.telemetryURL())
	if err != nil {
		return nil, nil, err
	}
	samples, err := parseExposition(body, contentType)
	if err != nil {
		return nil, nil, err
	}
	httpCodes, grpcCodes = map[string]float64{}, map[string]float64{}
	for _, s := range samples {
		switch s.labels.Get(model.MetricNameLabel) {
		case "http_server_request_duration_count":
			httpCodes[s.labels.Get("server_port")+"|"+s.labels.Get("http_response_status_code")] += s.value
		case "rpc_server_call_duration_count":
			grpcCodes[s.labels.Get("rpc_response_status_code")] += s.value
		}
	}
	return httpCodes, grpcCodes, nil
}

// portOf is the port of a host:port.
func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// telemetryLines returns the telemetry lines naming one of the words, for a
// failure message.
func telemetryLines(c *authCollector, words ...string) string {
	body, _, err := scrape(c.telemetryURL())
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		for _, w := range words {
			if strings.Contains(l, w) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

// ---------------------------------------------------------------------------
// Observed series

// exporterSeries scrapes the exporter with the scrape token and returns the
// samples of name.
func exporterSeries(c *authCollector, name string) (seriesCounts, error) {
	code, body, err := c.do(http.MethodGet, c.exporterURL(), "", nil, scrapeToken)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics with the scrape token: status %d: %q", code, truncate(body))
	}
	samples, err := parseExposition(body, exporterContentType)
	if err != nil {
		return nil, err
	}
	return samplesOf(samples, name), nil
}

func waitAuthExporter(t *testing.T, c *authCollector, name string, want seriesCounts) {
	t.Helper()
	eventually(t, convergeTimeout, name+" on the exporter", func() (bool, string) {
		got, err := exporterSeries(c, name)
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(got, want)
		return diff == "", diff
	})
}

// healthSeries is the one-hot of a pushed Kong row: 1 for state, 0 for the
// other states of Kong's kind.
func healthSeries(want expectedCounts, upstream, state string) {
	for _, s := range []string{"healthy", "unhealthy", "dns_error", "healthchecks_off", "unknown"} {
		v := 0
		if s == state {
			v = 1
		}
		want.add(map[string]string{
			"job": "kong", "instance": "kong-auth", "gateway_upstream_name": upstream,
			"gateway_target": "api:8080", "gateway_target_address": "10.0.0.1:8080", "state": s,
		}, v)
	}
}

// ---------------------------------------------------------------------------

func TestAuthTLSBearerToken(t *testing.T) {
	pki := newTestPKI(t)
	col := startAuthCollector(t, pki)

	conn, err := grpc.NewClient(col.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(pki.clientTLS())))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	// 1. Refused: no token, a wrong token, the right token without the
	// Bearer scheme, and the scrape token (each server has its own).
	badTokens := []struct{ name, header string }{
		{"no token", ""},
		{"wrong token", "Bearer " + wrongToken},
		{"token without scheme", ingestToken},
		{"the scrape token", "Bearer " + scrapeToken},
	}
	httpPaths := []struct {
		name, path, contentType string
		body                    func(i int) []byte
	}{
		{"traces", "/v1/traces", "application/json", func(i int) []byte { return authTracesJSON("evil-http-"+strconv.Itoa(i), "/evil", 1) }},
		{"kong log", "/kong/http-log", "application/json", func(i int) []byte { return authKongLog("evil-" + strconv.Itoa(i)) }},
		{"health push", "/v1/health", "application/json", func(i int) []byte { return authHealthPush("evil-"+strconv.Itoa(i), "HEALTHY") }},
	}
	var refusedHTTP, refusedGRPC, refusedScrapes int
	for i, bt := range badTokens {
		for _, hp := range httpPaths {
			code, body, err := doWith(col.client, http.MethodPost, col.url(hp.path), hp.contentType, hp.body(i), bt.header)
			if err != nil {
				t.Fatalf("POST %s (%s): %v", hp.path, bt.name, err)
			}
			if code != http.StatusUnauthorized {
				t.Errorf("POST %s with %s: status %d, want 401; body %q", hp.path, bt.name, code, truncate(body))
			}
			refusedHTTP++
		}

		if st := grpcExport(conn, bt.header, otlpProtoRequest("evil-grpc-"+strconv.Itoa(i), "/evil", 1)); st.Code() != codes.Unauthenticated {
			t.Errorf("gRPC Export with %s: %v %s, want Unauthenticated", bt.name, st.Code(), st.Message())
		}
		refusedGRPC++

		h := bt.header
		if bt.name == "the scrape token" {
			h = "Bearer " + ingestToken // the receiver's token: the exporter's wrong one
		}
		code, body, err := doWith(col.client, http.MethodGet, col.exporterURL(), "", nil, h)
		if err != nil {
			t.Fatalf("GET /metrics (%s): %v", bt.name, err)
		}
		if code != http.StatusUnauthorized || strings.Contains(string(body), "gateway_") {
			t.Errorf("GET /metrics with %s: status %d, want 401 and no series; body %q", bt.name, code, truncate(body))
		}
		refusedScrapes++
	}

	// Plain HTTP to a TLS port, with the right token: Go's TLS server
	// answers 400 (and resets the connection) and nothing reaches the
	// receiver.
	code, body, _ := doWith(httpClient, http.MethodPost, "http://"+col.httpAddr+"/v1/traces", "application/json",
		authTracesJSON("evil-plaintext", "/evil", 1), "Bearer "+ingestToken)
	if code != http.StatusBadRequest {
		t.Errorf("plain HTTP POST to the TLS port: status %d, want 400; body %q", code, truncate(body))
	}
	// A client that does not trust the test CA never gets to send.
	_, _, err = doWith(httpClient, http.MethodPost, col.url("/v1/traces"), "application/json",
		authTracesJSON("evil-untrusted", "/evil", 1), "Bearer "+ingestToken)
	var unknownAuthority x509.UnknownAuthorityError
	if !errors.As(err, &unknownAuthority) {
		t.Errorf("POST from a client without the CA: %v, want x509.UnknownAuthorityError", err)
	}

	// The refusals in the collector's own telemetry. otelhttp wraps the
	// HTTP auth check: it counts each 401 by server port. The gateway
	// receiver's own request counter sees the HTTP refusals too, because
	// confighttp answers auth failures through the receiver's error
	// handler, which files them as "unauthenticated", and the gRPC ones,
	// which it authenticates itself on the call's headers before gRPC reads
	// the message (so otelgrpc, which sees only calls gRPC hands to the
	// server, sees none of them). The plain-HTTP and untrusting clients
	// fail the TLS handshake: only the log has them.
	recvPort, promPort := portOf(col.httpAddr), portOf(col.promAddr)
	eventually(t, convergeTimeout, "the refused requests in the collector's telemetry", func() (bool, string) {
		hc, gc, err := serverStatusCounts(col)
		if err != nil {
			return false, err.Error()
		}
		outcomes, err := receiverOutcomes(col.collector)
		if err != nil {
			return false, err.Error()
		}
		refusedOverHTTP, refusedOverGRPC, other := 0.0, 0.0, map[outcomeKey]float64{}
		for k, v := range outcomes {
			switch {
			case k.transport == "http" && k.outcome == "unauthenticated":
				refusedOverHTTP += v
			case k.transport == "grpc" && k.outcome == "unauthenticated":
				refusedOverGRPC += v
			case v != 0:
				other[k] = v
			}
		}
		ok := hc[recvPort+"|401"] == float64(refusedHTTP) && hc[promPort+"|401"] == float64(refusedScrapes) &&
			gc["UNAUTHENTICATED"] == 0 && refusedOverHTTP == float64(refusedHTTP) && refusedOverGRPC == float64(refusedGRPC) && len(other) == 0
		return ok, fmt.Sprintf("otelhttp port|code %v (want %s|401 = %d, %s|401 = %d); otelgrpc %v (want no UNAUTHENTICATED); "+
			"receiver outcomes %v (want %d unauthenticated over http, %d over grpc, nothing else)",
			hc, recvPort, refusedHTTP, promPort, refusedScrapes, gc, outcomes, refusedHTTP, refusedGRPC)
	})
	for _, line := range []string{
		"TLS handshake error from 127.0.0.1:",
		"client sent an HTTP request to an HTTPS server",
		"remote error: tls: bad certificate",
	} {
		if log, _ := os.ReadFile(col.proc.logPath); !strings.Contains(string(log), line) {
			t.Errorf("collector log lacks %q", line)
		}
	}
	t.Logf("telemetry after the refusals:\n%s", telemetryLines(col,
		"http_server_request_duration_count", "rpc_server_call_duration_count", "otelcol_receiver_gateway_requests", "otelcol_receiver_gateway_health_events"))

	// 2. Accepted: the same paths with the right token.
	want, wantHealth := expectedCounts{}, expectedCounts{}
	for _, n := range []int{1, 2} {
		code, body, err := col.do(http.MethodPost, col.url("/v1/traces"), "application/json", authTracesJSON("auth-http", "/auth/http", n), ingestToken)
		if err != nil || code != http.StatusOK {
			t.Fatalf("POST /v1/traces with the token: %d %v %q", code, err, truncate(body))
		}
	}
	want.add(map[string]string{"job": "auth-http", "http_route": "/auth/http", "http_request_method": "GET", "http_response_status_code": "200"}, 3)

	if st := grpcExport(conn, "Bearer "+ingestToken, otlpProtoRequest("auth-grpc", "/auth/grpc", 4)); st.Code() != codes.OK {
		t.Fatalf("gRPC Export with the token: %v %s", st.Code(), st.Message())
	}
	want.add(map[string]string{"job": "auth-grpc", "http_route": "/auth/grpc", "http_request_method": "GET", "http_response_status_code": "200"}, 4)

	for range 2 {
		code, body, err := col.do(http.MethodPost, col.url("/kong/http-log"), "application/json", authKongLog("orders"), ingestToken)
		if err != nil || code != http.StatusOK || string(body) != `{"accepted":1,"rejected":0}` {
			t.Fatalf("POST /kong/http-log with the token: %d %v %q", code, err, truncate(body))
		}
	}
	// An http-log entry carries no resource: no job label.
	want.add(map[string]string{"http_route": "/orders", "http_request_method": "GET", "http_response_status_code": "200"}, 2)

	code, body, err = col.do(http.MethodPost, col.url("/v1/health"), "application/json", authHealthPush("billing", "UNHEALTHY"), ingestToken)
	if err != nil || code != http.StatusOK {
		t.Fatalf("POST /v1/health with the token: %d %v %q", code, err, truncate(body))
	}
	healthSeries(wantHealth, "billing", "unhealthy")

	waitAuthExporter(t, col, metricName, want.exported())
	waitAuthExporter(t, col, healthName, wantHealth.exported())

	// The accepted requests are counted by the receiver as usual, and the
	// refusals still stand alone.
	eventually(t, convergeTimeout, "the accepted requests in the receiver's telemetry", func() (bool, string) {
		m, err := receiverOutcomes(col.collector)
		if err != nil {
			return false, err.Error()
		}
		// 2 OTLP/HTTP + 2 http-log + 1 gRPC.
		return sumOutcome(m, "accepted") == 5, fmt.Sprintf("outcomes %v, want 5 accepted", m)
	})

	// 3. A real Prometheus: one job with the scrape token and the CA, one
	// with a wrong token that must get nothing.
	scrapeJobs := fmt.Sprintf(`  - job_name: otelgateway
    honor_labels: true
    scheme: https
    authorization:
      credentials: %[1]s
    tls_config:
      ca_file: %[2]s
    static_configs:
      - targets: ['%[3]s']
  - job_name: wrong-token
    scheme: https
    authorization:
      credentials: %[4]s
    tls_config:
      ca_file: %[2]s
    static_configs:
      - targets: ['%[3]s']
`, scrapeToken, pki.caFile, col.promAddr, wrongToken)
	prom := startPrometheusWith(t, scrapeJobs)
	waitPrometheusCounts(t, prom, storedWithJob(want, col.promAddr, "otelgateway"))
	eventually(t, convergeTimeout, "Prometheus to store the pushed health", func() (bool, string) {
		v, err := promQuery(prom, healthName)
		if err != nil {
			return false, err.Error()
		}
		diff := diffCounts(vectorCounts(v), storedWithJob(wantHealth, col.promAddr, "otelgateway"))
		return diff == "", diff
	})
	eventually(t, convergeTimeout, "up = 1 for the scrape token, 0 for the wrong one, with a 401", func() (bool, string) {
		good, err1 := promScalar(prom, `up{job="otelgateway"}`)
		bad, err2 := promScalar(prom, `up{job="wrong-token"}`)
		lastErr := targetLastError(prom, "wrong-token")
		return err1 == nil && err2 == nil && good == 1 && bad == 0 && strings.Contains(lastErr, "401"),
			fmt.Sprintf("up{otelgateway} = %v (%v), up{wrong-token} = %v (%v), wrong-token lastError %q", good, err1, bad, err2, lastErr)
	})
	// Nothing of the wrong-token job was stored but Prometheus's own series.
	if v, err := promQuery(prom, `count({job="wrong-token", __name__!~"up|scrape_.*"})`); err != nil || len(v) != 0 {
		t.Errorf("series stored from the wrong-token job: %v %v", v, err)
	}
}

// storedWithJob is expectedCounts.stored for a scrape job: a series exported
// without a job label gets the job's name, as it gets the target's address
// for instance.
func storedWithJob(e expectedCounts, target, job string) seriesCounts {
	withJob := expectedCounts{}
	for _, s := range e {
		lbls := map[string]string{"job": job}
		for k, v := range s.labels {
			lbls[k] = v
		}
		withJob.add(lbls, int(s.value))
	}
	return withJob.stored(target)
}

// targetLastError is the lastError of the active target of job.
func targetLastError(p *promServer, job string) string {
	_, body, err := httpGet("http://" + p.addr + "/api/v1/targets?state=active")
	if err != nil {
		return err.Error()
	}
	var resp struct {
		Data struct {
			ActiveTargets []struct {
				ScrapePool string `json:"scrapePool"`
				LastError  string `json:"lastError"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return err.Error()
	}
	for _, t := range resp.Data.ActiveTargets {
		if t.ScrapePool == job {
			return t.LastError
		}
	}
	return "no target of job " + job
}
