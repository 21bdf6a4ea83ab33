package gatewayreceiver

import (
	"context"
	"net/http"
	"os"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Traefik's own OTLP traces (docs/gateways.md §7), as its otlptracehttp
// exporter sends them (protobuf) and as OTLP/JSON: at detailed verbosity
// every request counts once under its router (http.route) and the router's
// service (gateway.service); at minimal verbosity once, without a route.
func TestTraefikSpansArePerRouter(t *testing.T) {
	load := func(name string) ptrace.Traces {
		b, err := os.ReadFile("internal/gateway/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(b)
		if err != nil {
			t.Fatal(err)
		}
		return td
	}
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Dimensions = []Dimension{{Name: "service"}} })
	detailed, minimal := load("traefik-3.6-detailed.json"), load("traefik-3.6-minimal.json")
	for _, send := range []struct {
		contentType string
		body        []byte
	}{
		{pbContentType, protoBody(t, detailed)},
		{"application/json", jsonBody(t, detailed)},
		{pbContentType, protoBody(t, minimal)},
	} {
		if code, body := post(t, h.httpAddr, send.contentType, send.body); code != http.StatusOK {
			t.Fatalf("%s export: %d %s", send.contentType, code, body)
		}
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, md := range sink.AllMetrics() {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			svc := attrString(rm.Resource().Attributes(), "service.name")
			ms := rm.ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				m := ms.At(j)
				if m.Name() != metricRequests || m.Type() != pmetric.MetricTypeSum {
					continue
				}
				for k := 0; k < m.Sum().DataPoints().Len(); k++ {
					a := m.Sum().DataPoints().At(k).Attributes()
					key := svc + " " + attrString(a, attrRoute) + " " + attrString(a, "gateway.service") + " " +
						attrString(a, attrMethod) + " " + attrString(a, attrStatusCode)
					got[key] += m.Sum().DataPoints().At(k).IntValue()
				}
			}
		}
	}
	assertCounts(t, got, map[string]int64{
		// Detailed, twice (protobuf and JSON).
		"traefik shop-api@docker shop-api@docker GET 200":  2,
		"traefik shop-api@docker shop-api@docker POST 201": 2,
		"traefik shop-api@docker shop-api@docker GET 503":  2,
		"traefik shop-web@docker shop-web@docker GET 200":  2,
		"traefik orders-v2@file orders-v2@file GET 200":    2,
		"traefik   GET 404": 2,
		// Minimal: no Router span, no route.
		"traefik   GET 200":  2,
		"traefik   POST 201": 1,
	})
}
