package gatewayreceiver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

func TestHTTPProtobufAndJSONAreCounted(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	for range 3 {
		if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, kongExport("GET", "/anything", 200))); code != http.StatusOK {
			t.Fatalf("protobuf export: %d %s", code, body)
		}
	}
	code, body := post(t, h.httpAddr, "application/json; charset=utf-8", jsonBody(t, kongExport("POST", "/anything", 201)))
	if code != http.StatusOK || body != `{"partialSuccess":{}}` {
		t.Fatalf("JSON export: %d %q, want 200 with an empty ExportTraceServiceResponse", code, body)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{
		"kong GET /anything 200":  3,
		"kong POST /anything 201": 1,
	})
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "accepted")); n != 4 {
		t.Errorf("accepted requests = %d, want 4", n)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_spans", attribute.String("outcome", "ignored")); n != 4 {
		t.Errorf("ignored spans = %d, want 4 (one balancer span per export)", n)
	}
}

func TestHTTPBadInput(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Protocols.HTTP.Get().MaxRequestBodySize = 1024 })
	cases := []struct {
		name        string
		method      string
		contentType string
		body        []byte
		wantCode    int
		wantBody    string
		outcome     string
	}{
		{"garbage protobuf", http.MethodPost, pbContentType, []byte{0xff, 0xff, 0xff}, http.StatusBadRequest, "malformed OTLP protobuf body", "malformed"},
		{"truncated JSON", http.MethodPost, jsonContentType, []byte(`{"resourceSpans": [`), http.StatusBadRequest, "malformed OTLP JSON body", "malformed"},
		{"wrong content type", http.MethodPost, "text/plain", []byte("hello"), http.StatusUnsupportedMediaType, `unsupported Content-Type \"text/plain\"`, "unsupported_media_type"},
		{"no content type", http.MethodPost, "", []byte("{}"), http.StatusUnsupportedMediaType, `unsupported Content-Type \"\"`, "unsupported_media_type"},
		{"oversized", http.MethodPost, jsonContentType, bytes.Repeat([]byte(" "), 4096), http.StatusRequestEntityTooLarge, "exceeds max_request_body_size (1024 bytes)", "too_large"},
		{"GET", http.MethodGet, "", nil, http.StatusMethodNotAllowed, "GET not allowed", "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://"+h.httpAddr+tracesURLPath, bytes.NewReader(c.body))
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.wantCode || !bytes.Contains(b, []byte(c.wantBody)) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, b, c.wantCode, c.wantBody)
			}
		})
	}
	// The receiver keeps serving, and the bad requests changed no count.
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, kongExport("GET", "/ok", 200))); code != http.StatusOK {
		t.Fatalf("valid export after bad ones: %d %s", code, body)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
	for outcome, want := range map[string]int64{"malformed": 2, "unsupported_media_type": 2, "too_large": 1, "method_not_allowed": 1, "accepted": 1} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", outcome)); n != want {
			t.Errorf("requests{outcome=%q} = %d, want %d", outcome, n, want)
		}
	}
}

func TestCorruptGzipIsRejected(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), nil)
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.httpAddr+tracesURLPath, bytes.NewReader([]byte("not gzip")))
	req.Header.Set("Content-Type", jsonContentType)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("corrupt gzip: %d, want 400", resp.StatusCode)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "malformed")); n != 1 {
		t.Errorf("malformed = %d, want 1", n)
	}
}
