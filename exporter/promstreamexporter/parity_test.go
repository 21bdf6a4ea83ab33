package promstreamexporter

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// kongParityConfig is what the gateway receiver's README prescribes for the
// kong profile: Kong's own names, label order, empty labels and le texts.
func kongParityConfig() *Config {
	cfg := createDefaultConfig()
	cfg.TranslationStrategy = underscoreEscapingWithoutSuffixes
	cfg.WithoutScopeInfo = true
	cfg.LabelOrder = labelOrderAsReceived
	cfg.KeepEmptyLabels = true
	cfg.TextBucketFormat = bucketFormatShortest
	return cfg
}

// kongShaped builds the Kong plugin's request counter (attributes in Kong's
// label order, twice: the second time in another order) and its latency
// histogram, as the receiver's kong profile emits them.
func kongShaped() pmetric.Metrics {
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	c := ms.AppendEmpty()
	c.SetName("kong_http_requests_total")
	s := c.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := s.DataPoints().AppendEmpty()
	for _, kv := range [][2]string{{"service", ""}, {"route", "serverless"}, {"code", "200"}, {"source", "kong"}, {"workspace", "default"}, {"consumer", ""}} {
		dp.Attributes().PutStr(kv[0], kv[1])
	}
	dp.SetIntValue(1)
	h := ms.AppendEmpty()
	h.SetName("kong_kong_latency_ms")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hdp := hh.DataPoints().AppendEmpty()
	for _, kv := range [][2]string{{"service", "mock-service"}, {"route", "http-route"}, {"workspace", "default"}} {
		hdp.Attributes().PutStr(kv[0], kv[1])
	}
	hdp.ExplicitBounds().FromRaw([]float64{1, 2, 5})
	hdp.BucketCounts().FromRaw([]uint64{0, 1, 1, 0})
	hdp.SetCount(2)
	hdp.SetSum(7)
	return md
}

func TestKongParityLines(t *testing.T) {
	e, err := newExporter(kongParityConfig(), exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	if err := e.consumeMetrics(context.Background(), kongShaped()); err != nil {
		t.Fatal(err)
	}
	// The same label set in another attribute order is the same series.
	again := kongShaped()
	dp := again.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	dp.Attributes().Clear()
	for _, kv := range [][2]string{{"consumer", ""}, {"workspace", "default"}, {"code", "200"}, {"route", "serverless"}, {"source", "kong"}, {"service", ""}} {
		dp.Attributes().PutStr(kv[0], kv[1])
	}
	dp.SetIntValue(2)
	if err := e.consumeMetrics(context.Background(), again); err != nil {
		t.Fatal(err)
	}
	got := get(t, e, metricsPath, http.Header{"Accept": {acceptText004}}).Body.String()
	// The counter line is the spec-verified Kong line (docs/gateways.md
	// §1c), value aside.
	want := []string{
		`kong_http_requests_total{service="",route="serverless",code="200",source="kong",workspace="default",consumer=""} 2`,
		`kong_kong_latency_ms_bucket{service="mock-service",route="http-route",workspace="default",le="1"} 0`,
		`kong_kong_latency_ms_bucket{service="mock-service",route="http-route",workspace="default",le="2"} 1`,
		`kong_kong_latency_ms_bucket{service="mock-service",route="http-route",workspace="default",le="5"} 2`,
		`kong_kong_latency_ms_bucket{service="mock-service",route="http-route",workspace="default",le="+Inf"} 2`,
		`kong_kong_latency_ms_sum{service="mock-service",route="http-route",workspace="default"} 7`,
		`kong_kong_latency_ms_count{service="mock-service",route="http-route",workspace="default"} 2`,
	}
	if lines := sampleLines(got); strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	parseAll(t, []byte(got), "text/plain; version=0.0.4")
	// OpenMetrics keeps its canonical le.
	om := get(t, e, metricsPath, http.Header{"Accept": {acceptOpenMetrics}}).Body.String()
	if !strings.Contains(om, `le="5.0"} 2`) {
		t.Fatalf("OpenMetrics bucket not canonical:\n%s", om)
	}
	parseAll(t, []byte(om), "application/openmetrics-text; version=1.0.0")
}
