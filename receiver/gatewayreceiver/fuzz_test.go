package gatewayreceiver

import (
	"bytes"
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
		r.http.handleTraces(rec, req)
		if rec.Code != http.StatusOK && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for body %q", rec.Code, body)
		}
	})
}
