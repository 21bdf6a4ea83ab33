package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// Exemplars end to end: Kong spans' trace ids reach a real Prometheus
// (--enable-feature=exemplar-storage, which scrapes OpenMetrics) as the
// exemplars of the request duration buckets, through receiver, cumulative
// processor and promstream; the text 0.0.4 exposition carries none.
func TestExemplarsReachPrometheus(t *testing.T) {
	col := startCollector(t)
	prom := startPrometheusWith(t, fmt.Sprintf(plainScrapeConfig, col.promAddr), "--enable-feature=exemplar-storage")
	tp := newHTTPTracerProvider(t, col.httpAddr, kongResource("exemplar-node"))
	tracer := tp.Tracer("kong-internal")
	sent := map[string]bool{}
	for range 5 {
		_, root := tracer.Start(context.Background(), "kong", trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.method", "GET"), attribute.String("http.route", "/exemplar"), attribute.Int("http.status_code", 200)))
		time.Sleep(3 * time.Millisecond)
		sent[root.SpanContext().TraceID().String()] = true
		root.End()
	}
	shutdownProvider(t, tp)

	var got []string
	eventually(t, convergeTimeout, "exemplars with the sent trace ids in Prometheus", func() (bool, string) {
		q := url.Values{"query": {`http_server_request_duration_seconds_bucket{http_route="/exemplar"}`},
			"start": {fmt.Sprint(time.Now().Add(-5 * time.Minute).Unix())}, "end": {fmt.Sprint(time.Now().Unix())}}
		status, body, err := httpGet("http://" + prom.addr + "/api/v1/query_exemplars?" + q.Encode())
		if err != nil {
			return false, err.Error()
		}
		var resp struct {
			Data []struct {
				Exemplars []struct {
					Labels map[string]string `json:"labels"`
				} `json:"exemplars"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &resp); err != nil {
			return false, fmt.Sprintf("status %d: %v", status, err)
		}
		got = got[:0]
		for _, s := range resp.Data {
			for _, e := range s.Exemplars {
				got = append(got, e.Labels["trace_id"])
			}
		}
		for _, id := range got {
			if !sent[id] {
				return false, "exemplar trace id " + id + " was never sent"
			}
		}
		return len(got) > 0, fmt.Sprintf("exemplars %v", got)
	})
	t.Logf("Prometheus holds exemplars with sent trace ids: %v", got)

	body, ctype, err := scrape(col.metricsURL())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ctype, "text/plain") || strings.Contains(string(body), "trace_id") {
		t.Errorf("the %s exposition carries exemplars", ctype)
	}
}
