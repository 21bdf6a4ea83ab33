package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// collectorConfigExponential is the contract config with the receiver's
// duration histograms exponential (histogram.exponential, max_size 160).
var collectorConfigExponential = strings.Replace(collectorConfig,
	"    flush_interval: 1s\n", "    flush_interval: 1s\n    histogram:\n      exponential:\n        max_size: 160\n", 1)

// Exponential histograms end to end: with histogram.exponential the request
// durations of Kong spans reach a real Prometheus (--enable-feature=
// native-histograms, which scrapes protobuf) as a native histogram whose
// count and sum are what was sent, through receiver, cumulative processor
// and promstream; a text scrape serves the same histogram as classic
// buckets.
func TestExponentialHistogramsAreNativeInPrometheus(t *testing.T) {
	col := startCollectorWith(t, collectorConfigExponential, 4)
	prom := startPrometheusWith(t, fmt.Sprintf(plainScrapeConfig, col.promAddr), "--enable-feature=native-histograms")
	tp := newHTTPTracerProvider(t, col.httpAddr, kongResource("native-node"))
	tracer := tp.Tracer("kong-internal")
	const n = 20
	for i := range n {
		start := time.Now()
		_, root := tracer.Start(context.Background(), "kong", trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(start),
			trace.WithAttributes(attribute.String("http.method", "GET"), attribute.String("http.route", "/native"), attribute.Int("http.status_code", 200)))
		// 1 ms … 20 ms, and one of 2 s: a wide range the buckets rescale to.
		d := time.Duration(i+1) * time.Millisecond
		if i == n-1 {
			d = 2 * time.Second
		}
		root.End(trace.WithTimestamp(start.Add(d)))
	}
	shutdownProvider(t, tp)

	const sel = `http_server_request_duration_seconds{http_route="/native"}`
	eventually(t, convergeTimeout, "the native histogram's count and sum in Prometheus", func() (bool, string) {
		count, err := promQuery(prom, "histogram_count("+sel+")")
		if err != nil {
			return false, err.Error()
		}
		sum, err := promQuery(prom, "histogram_sum("+sel+")")
		if err != nil {
			return false, err.Error()
		}
		// 1+…+19 ms + 2 s.
		const wantSum = 0.190 + 2
		ok := len(count) == 1 && len(sum) == 1 && count[0].Value == n && float64(sum[0].Value) > wantSum-1e-6 && float64(sum[0].Value) < wantSum+1e-6
		return ok, fmt.Sprintf("histogram_count %v, histogram_sum %v; want %d and %.3f", count, sum, n, wantSum)
	})
	q, err := promQuery(prom, "histogram_quantile(0.5, "+sel+")")
	if err != nil || len(q) != 1 || q[0].Value < 0.008 || q[0].Value > 0.013 {
		t.Errorf("median from the native histogram %v (%v), want about 10 ms", q, err)
	}

	body, ctype, err := scrape(col.metricsURL())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ctype, "text/plain") || !strings.Contains(string(body), `http_server_request_duration_seconds_count{`) ||
		!strings.Contains(string(body), `http_server_request_duration_seconds_bucket{`) {
		t.Errorf("the %s exposition has no classic form of the histogram:\n%s", ctype, truncate(body))
	}
}
