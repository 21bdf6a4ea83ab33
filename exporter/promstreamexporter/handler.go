package promstreamexporter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
)

// Scrape outcomes: the bounded `outcome` attribute of
// otelcol_exporter_promstream_scrapes.
const (
	outcomeOK         = "ok"
	outcomeAborted    = "aborted" // write failed or the client left part-way
	outcomeTimeout    = "timeout" // X-Prometheus-Scrape-Timeout-Seconds passed
	outcomeRejected   = "rejected"
	outcomeBadRequest = "bad_request"
)

// scrapeAttrs holds one measurement option per (format, outcome), indexed
// by format, for every registered format: making the option per scrape
// would allocate. Built per exporter, after every format has registered.
type scrapeAttrs []map[string]metric.MeasurementOption

func newScrapeAttrs() scrapeAttrs {
	formats := exposition.Formats()
	m := make(scrapeAttrs, len(formats))
	for _, f := range formats {
		m[f] = make(map[string]metric.MeasurementOption)
		for _, o := range []string{outcomeOK, outcomeAborted, outcomeTimeout, outcomeRejected, outcomeBadRequest} {
			m[f][o] = metric.WithAttributeSet(attribute.NewSet(attribute.String("format", f.String()), attribute.String("outcome", o)))
		}
	}
	return m
}

// handleMetrics streams the table in the negotiated format.
//
// The body is written page by page as it is rendered; nothing buffers the
// whole exposition. If writing fails part-way, or the scrape's deadline
// passes, the handler aborts the connection (http.ErrAbortHandler) so the
// body never ends cleanly: a scraper must see a failed scrape, never a
// valid-looking truncated one.
func (e *promStreamExporter) handleMetrics(w http.ResponseWriter, r *http.Request) {
	neg := e.negotiator.Negotiate(r.Header)
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, r.Method+" not allowed on "+metricsPath+", use GET", http.StatusMethodNotAllowed)
		return
	}
	q, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		e.countScrape(r.Context(), neg.Format, outcomeBadRequest)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	slot := e.slots.take()
	if slot != nil {
		defer e.slots.put(slot)
	} else {
		// Over max_concurrent_scrapes: refuse at once rather than queue, so
		// a burst of scrapers cannot pile up goroutines and buffers.
		e.countScrape(r.Context(), neg.Format, outcomeRejected)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many concurrent scrapes (max_concurrent_scrapes)", http.StatusServiceUnavailable)
		return
	}
	q.Format, q.Escaping = neg.Format, neg.Escaping
	// A shared, never-mutated slice: Header().Set would allocate one per
	// scrape.
	w.Header()["Content-Type"] = contentTypes(neg.ContentType)
	if r.Method == http.MethodHead {
		return
	}
	ctx := r.Context()
	q.Deadline = scrapeDeadline(r)
	start := time.Now()
	q.Began = start.UnixNano()
	gen := e.generation.Load() // every batch up to gen is in the table
	n, err := e.writeScrape(ctx, w, r, &q, slot)
	e.telemetry.ExporterPromstreamScrapeBytes.Add(r.Context(), n)
	outcome := outcomeOK
	switch {
	case errors.Is(err, series.ErrDeadline):
		outcome = outcomeTimeout
	case err != nil:
		outcome = outcomeAborted
	}
	e.telemetry.ExporterPromstreamScrapeDuration.Record(r.Context(), time.Since(start).Seconds(),
		e.scrapeAttrs[neg.Format][outcome])
	e.countScrape(r.Context(), neg.Format, outcome)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if q.Shards <= 1 && q.Names == nil && slot.writer.Held() == 0 {
		// A whole scrape: it read everything stored by gen (unless it left
		// out a series created too recently for it, which the next one
		// writes).
		e.scrapers.completed(r.RemoteAddr, gen, start)
		e.scrapeCompleted(gen)
	}
}

func (e *promStreamExporter) countScrape(ctx context.Context, f exposition.Format, outcome string) {
	e.telemetry.ExporterPromstreamScrapes.Add(ctx, 1, e.scrapeAttrs[f][outcome])
}

// scrapeSlot is the reusable working memory of one concurrent scrape.
type scrapeSlot struct {
	writer series.Writer
	zstd   *zstd.Encoder
	guard  stallGuard
}

// scrapeStallTimeout is how long a scrape may wait for its client to take
// more of the body: a scraper that stops reading (or never reads) loses its
// connection after it, and frees its max_concurrent_scrapes slot, instead
// of holding it for the whole write_timeout. Four such clients held every
// slot for 30 s and made every other scrape a 503.
const scrapeStallTimeout = 5 * time.Second

// stallGuard renews the connection's write deadline before every write, so
// only a write that makes no progress for scrapeStallTimeout fails: a slow
// but reading scraper is never cut, however long its scrape.
type stallGuard struct {
	w        io.Writer
	deadline interface{ SetWriteDeadline(time.Time) error }
}

func (g *stallGuard) Write(p []byte) (int, error) {
	if g.deadline != nil {
		_ = g.deadline.SetWriteDeadline(time.Now().Add(scrapeStallTimeout))
	}
	return g.w.Write(p)
}

// writeDeadliner is w's SetWriteDeadline (http.ResponseController's
// lookup, through wrappers that Unwrap), or nil.
func writeDeadliner(w http.ResponseWriter) interface{ SetWriteDeadline(time.Time) error } {
	for {
		switch t := w.(type) {
		case interface{ SetWriteDeadline(time.Time) error }:
			return t
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return nil
		}
	}
}

// slotPool hands out the scrape slots, last returned first out: scrapes
// one after another (Prometheus's, every scrape_interval) reuse the one
// slot whose buffers and compressor are warm, and the others are only ever
// filled by scrapes that really overlap. A FIFO (a channel) rotated every
// sequential scrape through all max_concurrent_scrapes slots, so each grew
// its own page buffer and gzip state: ~4 MiB held at 22k series that one
// slot does with ~1.
type slotPool struct {
	mu   sync.Mutex
	free []*scrapeSlot
}

// take returns a free slot, or nil when every slot is in use.
func (p *slotPool) take() *scrapeSlot {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.free)
	if n == 0 {
		return nil
	}
	s := p.free[n-1]
	p.free[n-1] = nil
	p.free = p.free[:n-1]
	return s
}

// put returns a slot taken from p.
func (p *slotPool) put(s *scrapeSlot) {
	p.mu.Lock()
	p.free = append(p.free, s)
	p.mu.Unlock()
}

// writeScrape renders the table into w, compressed when the scraper accepts
// it, and returns the uncompressed size.
func (e *promStreamExporter) writeScrape(ctx context.Context, w http.ResponseWriter, r *http.Request, q *series.Query, slot *scrapeSlot) (int64, error) {
	slot.guard = stallGuard{w: w, deadline: writeDeadliner(w)}
	defer func() { slot.guard = stallGuard{} }()
	out := &slot.guard
	switch acceptedEncoding(r.Header.Get("Accept-Encoding")) {
	case "zstd":
		if slot.zstd == nil {
			slot.zstd, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
		}
		slot.zstd.Reset(out)
		w.Header().Set("Content-Encoding", "zstd")
		n, err := slot.writer.WriteTo(ctx, e.table, slot.zstd, q)
		return n, errors.Join(err, slot.zstd.Close())
	case "gzip":
		// The writer compresses (BestSpeed) and splices in the pages that
		// did not change since an earlier gzip scrape compressed them
		// (series/gzip.go): on kong10k that halves a gzip scrape.
		w.Header().Set("Content-Encoding", "gzip")
		q.Gzip = true
		return slot.writer.WriteTo(ctx, e.table, out, q)
	}
	return slot.writer.WriteTo(ctx, e.table, out, q)
}

// acceptedEncoding picks zstd, then gzip, when Accept-Encoding offers them
// with a non-zero weight; "" means identity.
func acceptedEncoding(header string) string {
	gz := false
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if q, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if v, err := strconv.ParseFloat(q, 64); err == nil && v == 0 {
				continue
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "zstd":
			return "zstd"
		case "gzip", "*":
			gz = true
		}
	}
	if gz {
		return "gzip"
	}
	return ""
}

// scrapeDeadline reads X-Prometheus-Scrape-Timeout-Seconds, which
// Prometheus sends with every scrape: past it, Prometheus has given up and any
// more work is waste. Zero means none. (A deadline checked between pages,
// rather than a derived context, costs no allocation.)
func scrapeDeadline(r *http.Request) time.Time {
	if d, ok := scrapeTimeout(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds")); ok {
		return time.Now().Add(d)
	}
	return time.Time{}
}

// maxScrapeTimeout caps the scrape timeout a scraper may ask for. Prometheus
// sends its scrape_timeout (seconds, at most the scrape interval); an hour is
// beyond any real one, and keeps the arithmetic in range: 1e10 seconds once
// overflowed time.Duration into a deadline in the past, and every such scrape
// was aborted before its first byte.
const maxScrapeTimeout = time.Hour

// scrapeTimeout parses an X-Prometheus-Scrape-Timeout-Seconds value. The
// rule: a number of seconds greater than zero is the timeout, capped at
// maxScrapeTimeout (so 1e10, 1e400 and +Inf are an hour); anything else
// (empty, garbage, zero, negative, NaN) is ignored, and the scrape has no
// deadline.
func scrapeTimeout(v string) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	// Out of range is still a number: ParseFloat returns ±Inf for it.
	secs, err := strconv.ParseFloat(v, 64)
	if (err != nil && !errors.Is(err, strconv.ErrRange)) || !(secs > 0) {
		return 0, false
	}
	if secs >= maxScrapeTimeout.Seconds() {
		return maxScrapeTimeout, true
	}
	// Below an hour, so the product fits; at least 1ns, so a tiny timeout
	// is still a deadline.
	return max(time.Duration(secs*float64(time.Second)), time.Nanosecond), true
}

// contentTypes interns the one-element header value of each Content-Type.
var contentTypeValues sync.Map // string → []string

func contentTypes(ct string) []string {
	if v, ok := contentTypeValues.Load(ct); ok {
		return v.([]string)
	}
	v := []string{ct}
	contentTypeValues.Store(ct, v)
	return v
}

// parseQuery reads ?shard=I&shards=N and ?name[]=F.
func parseQuery(raw string) (series.Query, error) {
	var q series.Query
	if raw == "" {
		return q, nil // the usual scrape: no map to build
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return q, errors.New("malformed query: " + err.Error())
	}
	if names := v["name[]"]; len(names) > 0 {
		q.Names = make(map[string]struct{}, len(names))
		for _, n := range names {
			q.Names[n] = struct{}{}
		}
	}
	shard, shards := v.Get("shard"), v.Get("shards")
	if shard == "" && shards == "" {
		return q, nil
	}
	n, err := strconv.ParseUint(shards, 10, 32)
	if err != nil || n == 0 {
		return q, errors.New("shards must be a positive integer, got " + strconv.Quote(shards))
	}
	i, err := strconv.ParseUint(shard, 10, 32)
	if err != nil || i >= n {
		return q, errors.New("shard must be an integer in [0, shards), got " + strconv.Quote(shard))
	}
	q.Shard, q.Shards = i, n
	return q, nil
}
