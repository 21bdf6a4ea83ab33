package promstreamexporter

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/exposition"
)

var (
	scrapeOK      = attribute.NewSet(attribute.String("outcome", "ok"))
	scrapeAborted = attribute.NewSet(attribute.String("outcome", "aborted"))
)

// handleMetrics streams the table in the Prometheus text format 0.0.4.
//
// The body is written page by page as it is rendered; nothing buffers the
// whole exposition. If writing fails part-way, the handler aborts the
// connection (http.ErrAbortHandler) so the chunked body never ends cleanly: a
// scraper must see a failed scrape, never a valid-looking truncated one.
func (e *promStreamExporter) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, r.Method+" not allowed on "+metricsPath+", use GET", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", exposition.ContentTypeText004)
	if r.Method == http.MethodHead {
		return
	}
	wr := e.writers.Get().(*series.Writer)
	defer e.writers.Put(wr)
	n, err := wr.WriteTo(e.table, w)
	e.telemetry.ExporterPromstreamScrapeBytes.Add(r.Context(), n)
	if err != nil {
		e.telemetry.ExporterPromstreamScrapes.Add(r.Context(), 1, metric.WithAttributeSet(scrapeAborted))
		panic(http.ErrAbortHandler)
	}
	e.telemetry.ExporterPromstreamScrapes.Add(r.Context(), 1, metric.WithAttributeSet(scrapeOK))
}
