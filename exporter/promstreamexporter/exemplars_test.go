package promstreamexporter

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/exemplar"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

const (
	acceptText100 = "text/plain;version=1.0.0"
	traceHex      = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// testExemplar is an exemplar of kindsWithExemplars: its value, timestamp
// (unix nanos, 0: none) and the last byte of its span id (0: no span id).
type testExemplar struct {
	v    float64
	ts   int64
	span byte
}

func addTestExemplars(dst pmetric.ExemplarSlice, exs ...testExemplar) {
	var trace pcommon.TraceID
	if _, err := hex.Decode(trace[:], []byte(traceHex)); err != nil {
		panic(err)
	}
	for _, x := range exs {
		e := dst.AppendEmpty()
		e.SetDoubleValue(x.v)
		e.SetTimestamp(pcommon.Timestamp(x.ts))
		e.SetTraceID(trace)
		if x.span != 0 {
			e.SetSpanID(pcommon.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, x.span})
		}
	}
}

// kindsWithExemplars is kindsMetrics with exemplars on the counter, the
// histogram (one per bucket that has one: le 1, 2.5 and +Inf; the last
// without a timestamp) and the exponential histogram (the negative bucket
// and (2, 4]). The summary and the gauge have none (OTel has none there).
func kindsWithExemplars() pmetric.Metrics {
	md := kindsMetrics()
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	addTestExemplars(ms.At(0).Sum().DataPoints().At(0).Exemplars(), testExemplar{1, 1_700_000_000_123_000_000, 0xb7})
	addTestExemplars(ms.At(1).Histogram().DataPoints().At(0).Exemplars(),
		testExemplar{0.093, 1_700_000_000_123_000_000, 0xb7},
		testExemplar{2.5, 1_700_000_000_500_000_000, 0}, // a bound belongs to its own bucket (le)
		testExemplar{42, 0, 0xb8})
	addTestExemplars(ms.At(3).ExponentialHistogram().DataPoints().At(0).Exemplars(),
		testExemplar{-1.5, 1_700_000_003_000_000_000, 0xb9},
		testExemplar{3, 1_700_000_003_250_000_000, 0xba})
	return md
}

func scrapeWith(t *testing.T, md pmetric.Metrics, accept string) (body []byte, contentType string) {
	t.Helper()
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	rec := get(t, e, metricsPath, http.Header{"Accept": {accept}})
	return rec.Body.Bytes(), rec.Header().Get("Content-Type")
}

// parseExemplars returns every exemplar Prometheus's parser for contentType
// reads in body, as "entry name le=<le> value timestamp(ms) labels".
func parseExemplars(t *testing.T, body []byte, contentType string) (exs []string) {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{
		OpenMetricsSkipSTSeries: true, KeepClassicOnClassicAndNativeHistograms: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return exs
		}
		if err != nil {
			t.Fatalf("Prometheus's parser rejects the body: %v\n%s", err, body)
		}
		if entry != textparse.EntrySeries && entry != textparse.EntryHistogram {
			continue
		}
		var l labels.Labels
		p.Labels(&l)
		kind := "series"
		if entry == textparse.EntryHistogram {
			kind = "native"
			p.Histogram() // so that the parser goes on with its classic buckets
		}
		var ex exemplar.Exemplar
		for p.Exemplar(&ex) {
			ts := "no-ts"
			if ex.HasTs {
				ts = strconv.FormatInt(ex.Ts, 10)
			}
			exs = append(exs, kind+" "+l.Get("__name__")+" le="+l.Get("le")+" "+formatFloat(ex.Value)+" "+ts+" "+ex.Labels.String())
			ex = exemplar.Exemplar{}
		}
	}
}

func TestExemplarsGoldenOpenMetrics(t *testing.T) {
	body, ct := scrapeWith(t, kindsWithExemplars(), acceptOpenMetrics)
	checkGolden(t, "exemplars.om.txt", body)
	// The samples are those without exemplars.
	plain, _ := scrapeWith(t, kindsMetrics(), acceptOpenMetrics)
	if got, want := parseAll(t, body, ct), parseAll(t, plain, ct); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("samples with exemplars differ:\n%s\n---\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	got := parseExemplars(t, body, ct)
	want := []string{
		`series kong_http_requests_total le= 1 1700000000123 {span_id="00f067aa0ba902b7", trace_id="` + traceHex + `"}`,
		`series kong_request_latency_milliseconds_bucket le=1.0 0.093 1700000000123 {span_id="00f067aa0ba902b7", trace_id="` + traceHex + `"}`,
		`series kong_request_latency_milliseconds_bucket le=2.5 2.5 1700000000500 {trace_id="` + traceHex + `"}`,
		`series kong_request_latency_milliseconds_bucket le=+Inf 42 no-ts {span_id="00f067aa0ba902b8", trace_id="` + traceHex + `"}`,
		`series payload_size_bytes_bucket le=-1.0 -1.5 1700000003000 {span_id="00f067aa0ba902b9", trace_id="` + traceHex + `"}`,
		`series payload_size_bytes_bucket le=4.0 3 1700000003250 {span_id="00f067aa0ba902ba", trace_id="` + traceHex + `"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exemplars parsed from OpenMetrics:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestNoExemplarsInPrometheusText: text 0.0.4 and 1.0.0 are byte for byte
// what they are without exemplars.
func TestNoExemplarsInPrometheusText(t *testing.T) {
	for _, accept := range []string{acceptText004, acceptText100} {
		body, _ := scrapeWith(t, kindsWithExemplars(), accept)
		plain, _ := scrapeWith(t, kindsMetrics(), accept)
		if !bytes.Equal(body, plain) {
			t.Fatalf("%s: the body changed with exemplars:\n%s", accept, body)
		}
		if bytes.Contains(body, []byte(" # {")) || bytes.Contains(body, []byte("trace_id")) {
			t.Fatalf("%s carries exemplars:\n%s", accept, body)
		}
	}
	body, _ := scrapeWith(t, kindsWithExemplars(), acceptText004)
	checkGolden(t, "kinds.prom", body)
}

func TestExemplarsInProtobuf(t *testing.T) {
	body, ct := scrapeWith(t, kindsWithExemplars(), acceptProto)
	got := parseExemplars(t, body, ct)
	ids := func(span string) string {
		if span == "" {
			return `{trace_id="` + traceHex + `"}`
		}
		return `{span_id="00f067aa0ba902` + span + `", trace_id="` + traceHex + `"}`
	}
	want := []string{
		"series kong_http_requests_total le= 1 1700000000123 " + ids("b7"),
		"series kong_request_latency_milliseconds_bucket le=1.0 0.093 1700000000123 " + ids("b7"),
		"series kong_request_latency_milliseconds_bucket le=2.5 2.5 1700000000500 " + ids(""),
		"series kong_request_latency_milliseconds_bucket le=+Inf 42 no-ts " + ids("b8"),
		// Histogram.exemplars of the native histogram: those with a
		// timestamp, as Prometheus requires.
		"native payload_size_bytes le= -1.5 1700000003000 " + ids("b9"),
		"native payload_size_bytes le= 3 1700000003250 " + ids("ba"),
		"series payload_size_bytes_bucket le=-1.0 -1.5 1700000003000 " + ids("b9"),
		"series payload_size_bytes_bucket le=4.0 3 1700000003250 " + ids("ba"),
	}
	slices.Sort(got)
	slices.Sort(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("exemplars parsed from protobuf:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Same samples as without exemplars.
	plain, _ := scrapeWith(t, kindsMetrics(), acceptProto)
	s1, n1 := parseProto(t, body, ct)
	s0, n0 := parseProto(t, plain, ct)
	if strings.Join(s1, "\n") != strings.Join(s0, "\n") || len(n1) != len(n0) {
		t.Fatalf("protobuf samples changed with exemplars:\n%s\n---\n%s", strings.Join(s1, "\n"), strings.Join(s0, "\n"))
	}
}

// TestExemplarsLatestPerBucket: a later point's exemplar replaces the one of
// its bucket, the others stay; an older exemplar does not replace a newer
// one; new bounds re-place the exemplars held by their values.
func TestExemplarsLatestPerBucket(t *testing.T) {
	e, _ := newTestExporter(t)
	point := func(bounds []float64, exs ...testExemplar) {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("lat")
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := h.DataPoints().AppendEmpty()
		dp.ExplicitBounds().FromRaw(bounds)
		dp.BucketCounts().FromRaw(make([]uint64, len(bounds)+1))
		addTestExemplars(dp.Exemplars(), exs...)
		if err := e.consumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
	}
	scrape := func() []string {
		rec := get(t, e, metricsPath, http.Header{"Accept": {acceptOpenMetrics}})
		return parseExemplars(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
	}
	const s = 1_000_000_000
	point([]float64{1, 10}, testExemplar{0.5, 10 * s, 1}, testExemplar{5, 10 * s, 2})
	point([]float64{1, 10}, testExemplar{7, 20 * s, 3}, testExemplar{0.2, 5 * s, 4}) // 0.2 is older than 0.5
	ids := func(span string) string {
		return `{span_id="00f067aa0ba902` + span + `", trace_id="` + traceHex + `"}`
	}
	want := []string{
		"series lat_bucket le=1.0 0.5 10000 " + ids("01"),
		"series lat_bucket le=10.0 7 20000 " + ids("03"),
	}
	if got := scrape(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// New bounds: 0.5 and 7 both fall in (0, 8]: the more recent stays.
	point([]float64{0, 8})
	want = []string{"series lat_bucket le=8.0 7 20000 " + ids("03")}
	if got := scrape(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("after new bounds got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestScrapeWithExemplarsAllocatesAlmostNothing: exemplars add no
// allocation to a scrape, in either format that writes them.
func TestScrapeWithExemplarsAllocatesAlmostNothing(t *testing.T) {
	e, _ := newTestExporter(t)
	_ = e.consumeMetrics(context.Background(), kindsWithExemplars())
	for _, accept := range []string{acceptOpenMetrics, acceptProto} {
		req := newScrapeRequest(accept)
		rw := &discardRW{h: http.Header{}}
		e.handleMetrics(rw, req)
		n := testing.AllocsPerRun(50, func() { e.handleMetrics(rw, req) })
		if n > 8 {
			t.Fatalf("%s: a scrape allocated %.0f times, want a handful", accept, n)
		}
	}
}

func newScrapeRequest(accept string) *http.Request {
	req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
	req.Header.Set("Accept", accept)
	req.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	return req
}

// TestExemplarMemoryPerSeries reports the heap a histogram series holds
// with and without exemplars: a series that never gets one pays nothing
// (Series.ex is nil, and the pointer fits in Series' size class).
func TestExemplarMemoryPerSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates a few MiB")
	}
	const n = 10_000
	bounds := []float64{5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000}
	build := func(exemplars int) pmetric.Metrics {
		md := pmetric.NewMetrics()
		m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		m.SetName("latency")
		h := m.SetEmptyHistogram()
		h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for i := range n {
			dp := h.DataPoints().AppendEmpty()
			dp.Attributes().PutStr("route", "/route/"+strconv.Itoa(i))
			dp.ExplicitBounds().FromRaw(bounds)
			dp.BucketCounts().FromRaw(make([]uint64, len(bounds)+1))
			for j := range exemplars {
				addTestExemplars(dp.Exemplars(), testExemplar{float64(30 + 300*j), 1_700_000_000_000_000_000, byte(j + 1)})
			}
		}
		return md
	}
	per := map[int]float64{}
	for _, exemplars := range []int{0, 1, 4} {
		md := build(exemplars)
		before := heapAlloc()
		e, _ := newTestExporter(t)
		if err := e.consumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
		per[exemplars] = float64(heapAlloc()-before) / n
		runtime.KeepAlive(e)
		runtime.KeepAlive(md)
		t.Logf("histogram series, 13 buckets, %d exemplars: %.0f bytes/series", exemplars, per[exemplars])
	}
	if extra := per[1] - per[0]; extra > 200 {
		t.Errorf("one exemplar costs %.0f bytes per series, want about 100", extra)
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestNoExemplarOnUnknownCounter: a counter named without _total is
// OpenMetrics' unknown, which has no exemplars; protobuf keeps its exemplar.
func TestNoExemplarOnUnknownCounter(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.TranslationStrategy = underscoreEscapingWithoutSuffixes
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("hits")
	s := m.SetEmptySum()
	s.SetIsMonotonic(true)
	s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := s.DataPoints().AppendEmpty()
	dp.SetIntValue(3)
	addTestExemplars(dp.Exemplars(), testExemplar{1, 1_700_000_000_000_000_000, 1})
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	om := get(t, e, metricsPath, http.Header{"Accept": {acceptOpenMetrics}})
	if body := om.Body.String(); !strings.Contains(body, "# TYPE hits unknown") || strings.Contains(body, "trace_id") {
		t.Fatalf("OpenMetrics:\n%s", body)
	}
	pb := get(t, e, metricsPath, http.Header{"Accept": {acceptProto}})
	if got := parseExemplars(t, pb.Body.Bytes(), pb.Header().Get("Content-Type")); len(got) != 1 {
		t.Fatalf("protobuf exemplars: %q, want the counter's", got)
	}
}

// TestKongParityWithExemplars: with the kong profile's settings, exemplars
// leave the text lines exactly as Kong prints them; OpenMetrics adds them.
func TestKongParityWithExemplars(t *testing.T) {
	scrape := func(md pmetric.Metrics, accept string) string {
		e, err := newExporter(kongParityConfig(), exportertest.NewNopSettings(metadata.Type))
		if err != nil {
			t.Fatal(err)
		}
		defer e.telemetry.Shutdown()
		if err := e.consumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
		return get(t, e, metricsPath, http.Header{"Accept": {accept}}).Body.String()
	}
	md := kongShaped()
	h := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(1).Histogram().DataPoints().At(0)
	addTestExemplars(h.Exemplars(), testExemplar{1.5, 1_700_000_000_000_000_000, 1}, testExemplar{4, 1_700_000_000_000_000_000, 2})
	if got, want := scrape(md, acceptText004), scrape(kongShaped(), acceptText004); got != want {
		t.Fatalf("text 0.0.4 changed with exemplars:\n%s\nwant:\n%s", got, want)
	}
	if om := scrape(md, acceptOpenMetrics); !strings.Contains(om, `le="2.0"} 1 # {trace_id="`+traceHex+`",span_id="00f067aa0ba90201"} 1.5 1700000000.0`) {
		t.Fatalf("OpenMetrics lacks the exemplar of le=2:\n%s", om)
	}
}
