package gatewayreceiver

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// FuzzHandleTraces feeds arbitrary bodies to the HTTP handler: it must never
// panic and must answer 200 or a 4xx, never a 5xx.
// Run: go test ./receiver/gatewayreceiver -run '^$' -fuzz FuzzHandleTraces -fuzztime 60s
func FuzzHandleTraces(f *testing.F) {
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"kind":2,"attributes":[{"key":"http.status_code","value":{"stringValue":"503"}}]}]}]}]}`), true)
	f.Add(protoBody(f, kongExport("GET", "/anything", 200)), false)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, false)
	f.Add([]byte(`{"resourceSpans": [`), true)
	r, err := newReceiver(createDefaultConfig(), receivertest.NewNopSettings(metadata.Type), consumertest.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, asJSON bool) {
		ct := pbContentType
		if asJSON {
			ct = jsonContentType
		}
		req := httptest.NewRequest(http.MethodPost, tracesURLPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		r.http.handleTraces(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for body %q", rec.Code, body)
		}
	})
}

// FuzzHandleMetrics feeds arbitrary pushed-metrics bodies to /v1/metrics
// (kong profile, so Kong's mapping and claims run too): it must never panic,
// answer 200 or a 4xx, never a 5xx, and a 200's partial success must refuse
// no more points than the body has.
// Run: go test ./receiver/gatewayreceiver -run '^$' -fuzz FuzzHandleMetrics -fuzztime 60s
func FuzzHandleMetrics(f *testing.F) {
	for _, name := range []string{"kong/kong-3.14-push.json", "envoy/cluster-stats.push.json", "envoy/names.push.json"} {
		md := fixtureMetrics(f, name)
		f.Add(metricsProto(f, md), false)
		f.Add(metricsJSON(f, md), true)
	}
	f.Add(metricsProto(f, unknownMetrics(2)), false)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, false)
	f.Add([]byte(`{"resourceMetrics": [`), true)
	cfg := createDefaultConfig()
	cfg.Profile = "kong"
	r, err := newReceiver(cfg, receivertest.NewNopSettings(metadata.Type), consumertest.NewNop())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, asJSON bool) {
		ct := pbContentType
		if asJSON {
			ct = jsonContentType
		}
		req := httptest.NewRequest(http.MethodPost, metricsURLPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		rec := httptest.NewRecorder()
		r.http.handleMetrics(rec, req)
		switch rec.Code {
		case http.StatusOK:
			resp := pmetricotlp.NewExportResponse()
			var err error
			if asJSON {
				err = resp.UnmarshalJSON(rec.Body.Bytes())
			} else {
				err = resp.UnmarshalProto(rec.Body.Bytes())
			}
			if err != nil {
				t.Fatalf("200 with an answer that does not decode: %v", err)
			}
			if n := resp.PartialSuccess().RejectedDataPoints(); n < 0 || n > int64(len(body)) {
				t.Fatalf("%d points refused of a %d-byte body", n, len(body))
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		default:
			t.Fatalf("status %d for body %q", rec.Code, body)
		}
	})
}
