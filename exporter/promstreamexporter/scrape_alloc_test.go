package promstreamexporter

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// discardRW is a ResponseWriter that drops the body.
type discardRW struct{ h http.Header }

func (d *discardRW) Header() http.Header         { return d.h }
func (d *discardRW) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardRW) WriteHeader(int)             {}

// TestScrapeAllocatesAlmostNothing: a steady scrape allocates a small
// constant, whatever the table holds (net/http's own per-request work aside,
// which this in-process writer does not have).
func TestScrapeAllocatesAlmostNothing(t *testing.T) {
	e, _ := newTestExporter(t)
	_ = e.consumeMetrics(context.Background(), kindsMetrics())
	req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
	req.Header.Set("Accept", acceptOpenMetrics)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	rw := &discardRW{h: http.Header{}}
	e.handleMetrics(rw, req)
	n := testing.AllocsPerRun(50, func() { e.handleMetrics(rw, req) })
	if n > 8 {
		t.Fatalf("a scrape allocated %.0f times, want a handful", n)
	}
}
