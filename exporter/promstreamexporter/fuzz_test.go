package promstreamexporter

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/exporter/exportertest"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// FuzzHandler scrapes a small exporter (every kind of metric, a few gauges)
// with fuzzed query parameters (shard, shards, name[]) and headers (Accept,
// Accept-Encoding, X-Prometheus-Scrape-Timeout-Seconds). Whatever the
// input, the handler must not panic (the abort that fails a scrape past its
// deadline aside) and must answer either 200 with a body, read in full and
// decompressed, that Prometheus's parser accepts for the negotiated
// Content-Type, or a 4xx/503 with a message.
// Run: go test ./exporter/promstreamexporter -run '^$' -fuzz FuzzHandler -fuzztime 60s
func FuzzHandler(f *testing.F) {
	for _, s := range [][4]string{
		{"", "", "", ""},
		{"shard=1&shards=3", acceptOpenMetrics, "gzip", "10"},
		{"name[]=rpc_duration_seconds&name[]=kong_request_latency_milliseconds_bucket", acceptProto, "zstd", "1e10"},
		{"shard=5&shards=2", acceptText004, "", "NaN"},
		{"shard=0&shards=0", "", "", "-1"},
		{"shards=4294967296&shard=1", "", "", ""},
		{"%zz", "", "", ""},
		{"name[]=kong_http_requests&name[]=", "text/plain;version=1.0.0;escaping=allow-utf-8", "zstd;q=0, gzip;q=0.5", "+Inf"},
		{"name[]=g", "application/openmetrics-text;version=0.0.1;escaping=dots", "*", "0.000000001"},
		{";;&&==", "*/*;q=0, text/plain;q=nope", "gzip;q=x", "1e400"},
		{"shard=1&shards=2&shard=0", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;escaping=values", "br", "garbage"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	e, err := newExporter(createDefaultConfig(), exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(e.telemetry.Shutdown)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		f.Fatal(err)
	}
	if err := e.consumeMetrics(context.Background(), gauges("a", "b", "c", "d", "é", `"`)); err != nil {
		f.Fatal(err)
	}

	f.Fuzz(func(t *testing.T, query, accept, encoding, timeout string) {
		for _, v := range []string{accept, encoding, timeout} {
			if !validHeaderValue(v) {
				return // net/http refuses such a request before any handler
			}
		}
		req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
		req.URL.RawQuery = query
		for k, v := range map[string]string{"Accept": accept, "Accept-Encoding": encoding, "X-Prometheus-Scrape-Timeout-Seconds": timeout} {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		rec := httptest.NewRecorder()
		if aborted := serve(e, rec, req); aborted {
			// The only abort a recorder allows: the deadline passed. A
			// timeout the scrape of this small table could have met is a bug.
			if d, ok := scrapeTimeout(timeout); !ok || d >= time.Second {
				t.Fatalf("scrape aborted with timeout %q", timeout)
			}
			return
		}
		body, err := io.ReadAll(decoded(t, rec))
		if err != nil {
			t.Fatalf("reading the %s body: %v", rec.Header().Get("Content-Encoding"), err)
		}
		switch code := rec.Code; {
		case code == http.StatusOK:
			ct := rec.Header().Get("Content-Type")
			if err := parses(body, ct); err != nil {
				t.Fatalf("query %q, Accept %q: %s body does not parse: %v\n%.2000q", query, accept, ct, err, body)
			}
		case code >= 400 && code < 500, code == http.StatusServiceUnavailable:
			if len(bytes.TrimSpace(body)) == 0 {
				t.Fatalf("query %q: %d without a message", query, code)
			}
		default:
			t.Fatalf("query %q: status %d", query, code)
		}
	})
}

// serve calls the handler and reports whether it aborted the response (the
// panic net/http turns into a reset connection); any other panic is passed on.
func serve(e *promStreamExporter, w http.ResponseWriter, r *http.Request) (aborted bool) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			aborted = true
		}
	}()
	e.handleMetrics(w, r)
	return false
}

// decoded returns the recorded body, decompressed as its Content-Encoding says.
func decoded(t *testing.T, rec *httptest.ResponseRecorder) io.Reader {
	t.Helper()
	switch enc := rec.Header().Get("Content-Encoding"); enc {
	case "":
		return rec.Body
	case "gzip":
		r, err := gzip.NewReader(rec.Body)
		if err != nil {
			t.Fatal(err)
		}
		return r
	case "zstd":
		r, err := zstd.NewReader(rec.Body, zstd.WithDecoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		return r
	default:
		t.Fatalf("Content-Encoding %q", enc)
		return nil
	}
}

// parses reads the whole body with Prometheus's parser for contentType.
func parses(body []byte, contentType string) error {
	if contentType == "" {
		return errors.New("no Content-Type")
	}
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{KeepClassicOnClassicAndNativeHistograms: true})
	if err != nil {
		return err
	}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		var l labels.Labels
		switch entry {
		case textparse.EntrySeries, textparse.EntryHistogram:
			p.Labels(&l)
			if l.IsEmpty() {
				return errors.New("a sample without a name")
			}
		}
	}
}

// validHeaderValue is what net/http lets through as a header value: no
// control characters but tab.
func validHeaderValue(v string) bool {
	return !strings.ContainsFunc(v, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f })
}
