package health

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.uber.org/zap"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// testNaming writes one point per row, its state as an attribute.
var testNaming = Naming{
	Target: Metric{Name: "test.health"},
	WriteTarget: func(dps pmetric.NumberDataPointSlice, r *Row, ts pcommon.Timestamp) {
		a := Point(dps, ts, r.Removed, 1, 2)
		a.PutStr("target", r.Target())
		a.PutStr("state", r.State.String())
	},
}

// newTestHealth builds a Health that sends to a no-op consumer.
func newTestHealth(tb testing.TB, cfg *Config) *Health {
	tb.Helper()
	tt := componenttest.NewTelemetry()
	tb.Cleanup(func() { _ = tt.Shutdown(context.Background()) })
	tel, err := metadata.NewTelemetryBuilder(tt.NewTelemetrySettings())
	if err != nil {
		tb.Fatal(err)
	}
	h, err := New(Settings{Config: cfg, Naming: &testNaming, Next: consumertest.NewNop(), Telemetry: tel,
		TelemetrySettings: tt.NewTelemetrySettings(), Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// FuzzHandlePush feeds arbitrary bodies to the health push handler: it must
// never panic, answers 400 when the body is not events or no event could be
// applied (nor was late) and one was refused, else 200, always with a JSON pushResponse. push.max_targets keeps
// the table small however many targets the fuzzer invents.
// Run: go test ./receiver/gatewayreceiver/internal/health -run '^$' -fuzz FuzzHandlePush -fuzztime 20s
func FuzzHandlePush(f *testing.F) {
	f.Add([]byte(`{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"HEALTHY","timestamp":"2026-07-01T10:00:00Z"}`))
	f.Add([]byte(`[{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"api:8080","address":"10.0.0.1:8080","state":"UNHEALTHY","timestamp":"2026-07-01T10:00:05Z"},` +
		`{"gateway":"kong-7","upstream":"billing","target":"x:1","state":"purple"}]`))
	f.Add([]byte(`[{"gateway":"kong-7","kind":"kong","upstream":"billing","target":"gone.internal:80","state":"DNS_ERROR"}]`))
	f.Add([]byte(`[{"gateway":"g","upstream":"u","target":"[::1]:80","address":"[::1]:80","state":"mostly_healthy"},{"gateway":"g","kind":"nginx"}]`))
	f.Add([]byte(`[{"gateway":"kong-7"}]`))
	f.Add([]byte(`<xml/>`))
	f.Add([]byte(`{"gateway":"g","upstream":"u","target":"t","state":"healthy","timestamp":"9999-12-31T23:59:59Z"}`))
	f.Add([]byte(`{"gateway":"g","upstream":"u","target":"t","address":"[]:80","state":"healthy"}`))
	cfg := DefaultConfig()
	cfg.Push.Get().MaxTargets = 64
	h := newTestHealth(f, &cfg)
	f.Fuzz(func(t *testing.T, body []byte) {
		req := httptest.NewRequest(http.MethodPost, DefaultPushPath, bytes.NewReader(body))
		req.Header.Set("Content-Type", jsonContentType)
		rec := httptest.NewRecorder()
		h.PushHandler().ServeHTTP(rec, req)
		var resp pushResponse
		if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
			t.Fatalf("answer %q is not a push response: %v", rec.Body.String(), err)
		}
		refused := resp.Error != "" || resp.Accepted+resp.OutOfOrder == 0 && len(resp.Rejected) > 0
		if want := map[bool]int{false: http.StatusOK, true: http.StatusBadRequest}[refused]; rec.Code != want {
			t.Fatalf("status %d, want %d, with %+v for body %q", rec.Code, want, resp, body)
		}
		if n := h.table.pushed; n > 64 {
			t.Fatalf("%d pushed rows over max_targets 64", n)
		}
	})
}
