package gatewayreceiver

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Span attributes configured as dimensions (spanmetrics' {name, default})
// become labels of the otel profile's request families: a string as it
// is, a number as its text, the default where the span has none, no label
// where it has none and no default; the LLM families do not take them.
// Both decoders (pdata JSON and direct protobuf) read them alike.
func TestSpanAttributeDimensions(t *testing.T) {
	var cfg *Config
	runConfigCases(t, []configCase{{file: "span_dimensions.yaml", check: func(t *testing.T, c *Config) { cfg = c }}})
	if cfg == nil {
		t.FailNow()
	}
	for _, enc := range []string{pbContentType, jsonContentType} {
		sink := new(consumertest.MetricsSink)
		h := start(t, sink, func(c *Config) { c.Dimensions = cfg.Dimensions })
		with := kongExport("GET", "/dims", 200)
		a := with.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
		a.PutStr("http.flavor", "2")
		a.PutInt("tenant.id", 42)
		without := kongExport("GET", "/dims", 200)
		encode := protoBody
		if enc == jsonContentType {
			encode = jsonBody
		}
		for _, td := range []ptrace.Traces{with, without} {
			if code, msg := post(t, h.httpAddr, enc, encode(t, td)); code != http.StatusOK {
				t.Fatalf("%s: %d %s", enc, code, msg)
			}
		}
		if err := h.r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, md := range sink.AllMetrics() {
			forEachAttrs(md.ResourceMetrics().At(0), func(name string, attrs map[string]any) {
				if name == "gateway.requests" {
					got[attrString2(attrs, "http.flavor")+"|"+attrString2(attrs, "tenant.id")]++
				}
			})
		}
		if len(got) != 2 || got["2|42"] != 1 || got["1.1|<none>"] != 1 {
			t.Errorf("%s: request series by (http.flavor, tenant.id) %v, want 2|42 and 1.1|<none>", enc, got)
		}
	}
}

func attrString2(m map[string]any, k string) string {
	v, ok := m[k]
	if !ok {
		return "<none>"
	}
	switch x := v.(type) {
	case string:
		return x
	}
	return "?"
}
