package gatewayreceiver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
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
		r.handleTraces(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for body %q", rec.Code, body)
		}
	})
}

// FuzzHandlePush feeds arbitrary bodies to the health push handler: it must
// never panic, answers 400 when the body is not events or no event could be
// applied (nor was late) and one was refused, else 200, always with a JSON pushResponse. push.max_targets keeps
// the table small however many targets the fuzzer invents.
// Run: go test ./receiver/gatewayreceiver -run '^$' -fuzz FuzzHandlePush -fuzztime 20s
func FuzzHandlePush(f *testing.F) {
	f.Add([]byte(`{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"HEALTHY","timestamp":"2026-07-01T10:00:00Z"}`))
	f.Add([]byte(`[{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"UNHEALTHY","timestamp":"2026-07-01T10:00:05Z"},` +
		`{"gateway":"kong-7","upstream":"billing","target":"x:1","state":"purple"}]`))
	f.Add([]byte(`[{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"gone.internal:80","state":"DNS_ERROR"}]`))
	f.Add([]byte(`[{"gateway":"g","upstream":"u","target":"[::1]:80","address":"[::1]:80","state":"mostly_healthy"},{"gateway":"g","kind":"nginx"}]`))
	f.Add([]byte(`[{"gateway":"kong-7"}]`))
	f.Add([]byte(`<xml/>`))
	f.Add([]byte(`{"gateway":"g","upstream":"u","target":"t","address":"[]:80","state":"healthy"}`))
	hh := newHealthHarness(f, func(c *HealthConfig) { c.Push.Get().MaxTargets = 64 })
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, defaultHealthPushPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", jsonContentType)
		rec := httptest.NewRecorder()
		hh.h.handlePush(rec, req)
		var resp pushResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("answer %q is not a push response: %v", rec.Body.String(), err)
		}
		refused := resp.Error != "" || resp.Accepted+resp.OutOfOrder == 0 && len(resp.Rejected) > 0
		if want := map[bool]int{false: http.StatusOK, true: http.StatusBadRequest}[refused]; rec.Code != want {
			t.Fatalf("status %d, want %d, with %+v for body %q", rec.Code, want, resp, body)
		}
		if hh.h.table.pushed > 64 {
			t.Fatalf("%d pushed rows over max_targets 64", hh.h.table.pushed)
		}
	})
}
