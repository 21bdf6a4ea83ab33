package gatewayreceiver

import (
	"context"
	"slices"
	"testing"

	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// emitted returns the names of the metrics in sink, each once, sorted, and
// the number of exemplars on their points.
func emitted(sink *consumertest.MetricsSink) (names []string, exemplars int) {
	for _, md := range sink.AllMetrics() {
		for r := 0; r < md.ResourceMetrics().Len(); r++ {
			sms := md.ResourceMetrics().At(r).ScopeMetrics()
			for s := 0; s < sms.Len(); s++ {
				ms := sms.At(s).Metrics()
				for i := 0; i < ms.Len(); i++ {
					m := ms.At(i)
					if !slices.Contains(names, m.Name()) {
						names = append(names, m.Name())
					}
					if m.Type() == pmetric.MetricTypeHistogram {
						for p := 0; p < m.Histogram().DataPoints().Len(); p++ {
							exemplars += m.Histogram().DataPoints().At(p).Exemplars().Len()
						}
					}
				}
			}
		}
	}
	slices.Sort(names)
	return names, exemplars
}

// A metric turned off in `metrics` is not emitted and the others are, and
// with exemplars off no histogram point carries one; the same traced
// request through the defaults emits every family with exemplars.
func TestMetricsAndExemplarsOff(t *testing.T) {
	for _, tc := range []struct {
		name          string
		mutate        func(*Config)
		want          []string
		wantExemplars bool
	}{
		{name: "defaults", want: []string{"gateway.added.duration", "gateway.bandwidth", "gateway.requests",
			"gateway.upstream.duration", "http.server.request.duration"}, wantExemplars: true},
		{name: "spanmetrics-like", mutate: func(c *Config) {
			off := false
			c.Metrics = map[string]MetricConfig{"gateway.upstream.duration": {Enabled: &off},
				"gateway.added.duration": {Enabled: &off}, "gateway.bandwidth": {Enabled: &off}}
			c.Exemplars.Enabled = false
		}, want: []string{"gateway.requests", "http.server.request.duration"}},
		{name: "kong", mutate: func(c *Config) {
			off, on := false, true
			c.Profile = traffic.ProfileKong
			c.Metrics = map[string]MetricConfig{"kong_kong_latency_ms": {Enabled: &off}, "kong_http_requests_total": {Enabled: &on}}
		}, want: []string{"kong_bandwidth_bytes", "kong_http_requests_total", "kong_request_latency_ms", "kong_upstream_latency_ms"},
			wantExemplars: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := new(consumertest.MetricsSink)
			h := start(t, sink, tc.mutate)
			td := kongExport("GET", "/traced", 200)
			root := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
			root.SetStartTimestamp(1_700_000_000_000_000_000)
			root.SetEndTimestamp(1_700_000_000_042_000_000) // 42 ms
			root.Attributes().PutInt("http.request.body.size", 120)
			root.Attributes().PutInt("http.response.body.size", 2048)
			child := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1)
			child.SetStartTimestamp(1_700_000_000_005_000_000)
			child.SetEndTimestamp(1_700_000_000_035_000_000) // 30 ms upstream
			ctx := context.Background()
			if err := h.r.ingest.traces(ctx, td); err != nil {
				t.Fatal(err)
			}
			if err := h.r.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			names, exemplars := emitted(sink)
			if !slices.Equal(names, tc.want) {
				t.Errorf("emitted %q, want %q", names, tc.want)
			}
			if (exemplars > 0) != tc.wantExemplars {
				t.Errorf("%d exemplars, want some: %v", exemplars, tc.wantExemplars)
			}
		})
	}
}
