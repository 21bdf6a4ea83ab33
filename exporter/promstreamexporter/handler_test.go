package promstreamexporter

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
	"github.com/otelgateway/otelgateway/internal/testutil"
)

// gauges builds one gauge "g" with a point per value of attribute "k".
func gauges(values ...string) pmetric.Metrics {
	md := pmetric.NewMetrics()
	g := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("g")
	dps := g.SetEmptyGauge().DataPoints()
	for i, v := range values {
		dp := dps.AppendEmpty()
		dp.Attributes().PutStr("k", v)
		dp.SetIntValue(int64(i))
	}
	return md
}

func sampleLines(body string) []string {
	var out []string
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

func TestShardsPartitionTheSeries(t *testing.T) {
	e, _ := newTestExporter(t)
	var values []string
	for i := range 1000 {
		values = append(values, strconv.Itoa(i))
	}
	if err := e.consumeMetrics(context.Background(), gauges(values...)); err != nil {
		t.Fatal(err)
	}
	all := sampleLines(get(t, e, metricsPath, nil).Body.String())
	var union []string
	for i := range 3 {
		rec := get(t, e, metricsPath+"?shard="+strconv.Itoa(i)+"&shards=3", nil)
		part := sampleLines(rec.Body.String())
		if len(part) < 250 || len(part) > 420 {
			t.Errorf("shard %d holds %d of 1000 series: not a fair split", i, len(part))
		}
		union = append(union, part...)
	}
	sort.Strings(all)
	sort.Strings(union)
	if strings.Join(all, "\n") != strings.Join(union, "\n") {
		t.Fatalf("the shards together hold %d lines, the whole table %d: not a partition", len(union), len(all))
	}
}

func TestBadShardQueryIs400(t *testing.T) {
	e, tel := newTestExporter(t)
	for _, q := range []string{"?shard=3&shards=3", "?shard=0&shards=0", "?shards=2", "?shard=x&shards=2"} {
		if rec := get(t, e, metricsPath+q, nil); rec.Code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, rec.Code)
		}
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_scrapes", attribute.String("outcome", "bad_request")); n != 4 {
		t.Errorf("bad_request scrapes = %d, want 4", n)
	}
}

func TestNameFilter(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	body := get(t, e, metricsPath+"?name[]=rpc_duration_seconds&name[]=kong_request_latency_milliseconds_bucket", nil).Body.String()
	var families []string
	for line := range strings.SplitSeq(body, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			families = append(families, strings.Fields(name)[0])
		}
	}
	if strings.Join(families, ",") != "kong_request_latency_milliseconds,rpc_duration_seconds" {
		t.Fatalf("families served: %v", families)
	}
}

func TestConcurrentScrapeLimit(t *testing.T) {
	e, tel := newTestExporter(t)
	var taken []*scrapeSlot
	for range cap(e.slots.free) {
		taken = append(taken, e.slots.take()) // every slot taken by a scrape in progress
	}
	rec := get(t, e, metricsPath, nil)
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("scrape over the limit: %d Retry-After=%q, want 503 and 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	e.slots.put(taken[0])
	if rec := get(t, e, metricsPath, nil); rec.Code != http.StatusOK {
		t.Fatalf("scrape with a free slot: %d", rec.Code)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_scrapes", attribute.String("outcome", "rejected")); n != 1 {
		t.Errorf("rejected scrapes = %d, want 1", n)
	}
}

// TestSequentialScrapesShareOneSlot: scrapes that never overlap reuse one
// slot's buffers and compressor; with a FIFO of slots each of
// max_concurrent_scrapes slots grew its own (a gzip writer and a page buffer
// of up to ~1.3 MiB each).
func TestSequentialScrapesShareOneSlot(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), gatewayMetrics()); err != nil {
		t.Fatal(err)
	}
	if n := cap(e.slots.free); n < 2 {
		t.Fatalf("max_concurrent_scrapes %d: the test needs at least 2 slots", n)
	}
	for range 2 * cap(e.slots.free) {
		if rec := get(t, e, metricsPath, http.Header{"Accept-Encoding": {"gzip"}}); rec.Code != http.StatusOK {
			t.Fatalf("scrape: %d", rec.Code)
		}
	}
	warm := 0
	for _, s := range e.slots.free {
		if s.writer.GzipWarm() {
			warm++
		}
	}
	if len(e.slots.free) != cap(e.slots.free) || warm != 1 {
		t.Errorf("after sequential gzip scrapes: %d of %d slots free, %d with a gzip writer; want all free and 1",
			len(e.slots.free), cap(e.slots.free), warm)
	}
}

func TestScrapeTimeoutAborts(t *testing.T) {
	e, tel := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), gatewayMetrics()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Fatalf("recovered %v, want http.ErrAbortHandler", r)
		}
		if n := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_scrapes", attribute.String("outcome", "timeout")); n != 1 {
			t.Errorf("timeout scrapes = %d, want 1", n)
		}
	}()
	// A deadline that has passed before the first page is rendered.
	get(t, e, metricsPath, http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {"0.000000001"}})
}

func TestMaxSeries(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	cfg := createDefaultConfig()
	cfg.Limits.MaxSeries = 2
	core, logs := observer.New(zap.InfoLevel)
	set.Logger = zap.New(core)
	e, err := newExporter(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	if err := e.consumeMetrics(context.Background(), gauges("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	// Existing series keep updating; only the third is refused.
	if err := e.consumeMetrics(context.Background(), gauges("a", "b", "c")); err != nil {
		t.Fatal(err)
	}
	if got := sampleLines(get(t, e, metricsPath, nil).Body.String()); strings.Join(got, "|") != `g{k="a"} 0|g{k="b"} 1` {
		t.Fatalf("served %q", got)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_dropped_points", attribute.String("reason", "max_series")); n != 2 {
		t.Errorf("max_series drops = %d, want 2", n)
	}
	// Said in the log at the first refusal (then at most every few
	// minutes), and at shutdown what was refused since.
	if err := e.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	l := logs.FilterMessageSnippet("limits.max_series").All()
	if len(l) != 2 || l[0].ContextMap()["limits.max_series"] != int64(2) || l[0].ContextMap()["points_folded"] != int64(1) ||
		l[1].ContextMap()["points_folded_since_last_log"] != int64(1) ||
		l[0].Message != "limits.max_series reached: points of new series are dropped (not exposed) until series go 5m0s (metric_expiration) without a point; raise limits.max_series to keep them apart" {
		t.Errorf("fold log %v, want the first refusal's and shutdown's", l)
	}
}

func TestNoRecordedValueRemovesTheSeries(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), gauges("a", "b")); err != nil {
		t.Fatal(err)
	}
	md := gauges("a")
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Gauge().DataPoints().At(0).
		SetFlags(pmetric.DefaultDataPointFlags.WithNoRecordedValue(true))
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if got := sampleLines(get(t, e, metricsPath, nil).Body.String()); strings.Join(got, "|") != `g{k="b"} 1` {
		t.Fatalf("served %q, want only b", got)
	}
}

func TestAttributesThatTranslateAlikeShareOneSeries(t *testing.T) {
	e, _ := newTestExporter(t)
	md := pmetric.NewMetrics()
	g := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("g")
	dps := g.SetEmptyGauge().DataPoints()
	for i, k := range []string{"http.route", "http_route"} {
		dp := dps.AppendEmpty()
		dp.Attributes().PutStr(k, "/a")
		dp.SetIntValue(int64(i + 1))
	}
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	// One Prometheus series; the last write wins. Never a duplicate line.
	if got := sampleLines(get(t, e, metricsPath, nil).Body.String()); strings.Join(got, "|") != `g{http_route="/a"} 2` {
		t.Fatalf("served %q", got)
	}
}

func TestNamingOptions(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.Namespace = "edge"
	cfg.ConstLabels = map[string]string{"region": "eu-1"}
	cfg.ResourceToTelemetryConversion.Enabled = true
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kong")
	rm.Resource().Attributes().PutStr("service.instance.id", "n1")
	rm.Resource().Attributes().PutStr("k8s.pod.name", "kong-0")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("s")
	sm.Scope().Attributes().PutStr("team", "edge")
	g := sm.Metrics().AppendEmpty()
	g.SetName("up")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	want := `# HELP edge_target_info Target metadata
# TYPE edge_target_info gauge
edge_target_info{instance="n1",job="kong",k8s_pod_name="kong-0"} 1
# TYPE edge_up gauge
edge_up{instance="n1",job="kong",k8s_pod_name="kong-0",otel_scope_name="s",otel_scope_team="edge",region="eu-1",service_instance_id="n1",service_name="kong"} 1
`
	if got := get(t, e, metricsPath, nil).Body.String(); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestUTF8NamesFollowTheNegotiatedEscaping(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.TranslationStrategy = noUTF8EscapingWithSuffixes
	cfg.WithoutScopeInfo = true
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	md := pmetric.NewMetrics()
	g := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("http.server.active")
	dp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	dp.Attributes().PutStr("http.route", "/a")
	dp.SetIntValue(3)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ accept, want string }{
		{"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8", "# TYPE \"http.server.active\" gauge\n{\"http.server.active\",\"http.route\"=\"/a\"} 3\n# EOF\n"},
		{"text/plain;version=1.0.0;escaping=allow-utf-8", "# TYPE \"http.server.active\" gauge\n{\"http.server.active\",\"http.route\"=\"/a\"} 3\n"},
		{"text/plain;version=0.0.4", "# TYPE http_server_active gauge\nhttp_server_active{http_route=\"/a\"} 3\n"},
		{"text/plain;version=1.0.0;escaping=dots", "# TYPE http_dot_server_dot_active gauge\nhttp_dot_server_dot_active{http_dot_route=\"/a\"} 3\n"},
		{"text/plain;version=1.0.0;escaping=values", "# TYPE U__http_2e_server_2e_active gauge\nU__http_2e_server_2e_active{U__http_2e_route=\"/a\"} 3\n"},
	}
	for _, c := range cases {
		rec := get(t, e, metricsPath, http.Header{"Accept": {c.accept}})
		if got := rec.Body.String(); got != c.want {
			t.Errorf("Accept %s:\ngot:\n%s\nwant:\n%s", c.accept, got, c.want)
		}
		parseAll(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
	}
}

func TestHostileLabelValuesParse(t *testing.T) {
	e, _ := newTestExporter(t)
	hostile := []string{
		"quote\" back\\slash new\nline",
		"invalid utf-8: \xff\xfe",
		strings.Repeat("x", 64<<10),
		"} 1\nfake_metric 2",
	}
	if err := e.consumeMetrics(context.Background(), gauges(hostile...)); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{acceptText004, acceptOpenMetrics, acceptProto, "text/plain;version=1.0.0;escaping=allow-utf-8"} {
		rec := get(t, e, metricsPath, http.Header{"Accept": {accept}})
		var got []string
		if accept == acceptProto {
			got, _ = parseProto(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
		} else {
			got = parseAll(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
		}
		if len(got) != len(hostile) {
			t.Fatalf("Accept %s: parsed %d series, want %d", accept, len(got), len(hostile))
		}
		for _, s := range got {
			if strings.Contains(s, "fake_metric") && !strings.Contains(s, "k=") {
				t.Fatalf("a label value escaped into a sample: %q", s)
			}
		}
		// Every value comes back exactly (invalid UTF-8 as U+FFFD).
		for _, want := range []string{`k="quote\" back\\slash new\nline"`, "k=\"invalid utf-8: \uFFFD\"", `k="} 1\nfake_metric 2"`} {
			if !slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, want) }) {
				t.Errorf("Accept %s: no series with %s in %.300q", accept, want, got)
			}
		}
	}
}

// TestConcurrentIngestAndScrape runs scrapes while counters are updated; the
// final scrape must show every counter's exact last value.
func TestConcurrentIngestAndScrape(t *testing.T) {
	e, _ := newTestExporter(t)
	const rounds = 200
	counter := func(round int) pmetric.Metrics {
		md := pmetric.NewMetrics()
		c := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
		c.SetName("c")
		s := c.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for k := range 300 {
			dp := s.DataPoints().AppendEmpty()
			dp.Attributes().PutInt("k", int64(k))
			dp.SetIntValue(int64(round))
		}
		return md
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := 1; r <= rounds; r++ {
			if err := e.consumeMetrics(context.Background(), counter(r)); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for range 50 {
			if rec := get(t, e, metricsPath, nil); rec.Code != http.StatusOK {
				t.Errorf("scrape: %d", rec.Code)
			}
		}
	})
	wg.Wait()
	lines := sampleLines(get(t, e, metricsPath, nil).Body.String())
	if len(lines) != 300 {
		t.Fatalf("%d series, want 300", len(lines))
	}
	for _, l := range lines {
		if !strings.HasSuffix(l, " "+strconv.Itoa(rounds)) {
			t.Fatalf("series %q does not hold the last value %d", l, rounds)
		}
	}
}

// startOneSlot starts an exporter with max_concurrent_scrapes 1 (mutate
// may change more) holding n gauges whose label values are pad bytes long,
// stopped when the test ends, and returns its config.
func startOneSlot(t *testing.T, n, pad int, mutate func(*Config)) *Config {
	t.Helper()
	cfg := createDefaultConfig()
	cfg.ServerConfig.NetAddr.Endpoint = testutil.FreeAddr(t)
	cfg.Limits.MaxConcurrentScrapes = 1
	cfg.ShutdownGrace = 0 // no scrape here reads a whole body: do not wait for one at shutdown
	if mutate != nil {
		mutate(cfg)
	}
	exp, err := NewFactory().CreateMetrics(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = exp.Shutdown(context.Background()) })
	values := make([]string, 0, n)
	for i := range n {
		values = append(values, strconv.Itoa(i)+strings.Repeat("v", pad))
	}
	if err := exp.ConsumeMetrics(context.Background(), gauges(values...)); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestClientDisconnectReleasesTheScrape: a scraper that hangs up mid-body
// frees its slot at once (the deferred release runs, no goroutine lingers:
// goleak checks at exit).
func TestClientDisconnectReleasesTheScrape(t *testing.T) {
	cfg := startOneSlot(t, 50_000, 40, nil)
	conn, err := net.Dial("tcp", cfg.ServerConfig.NetAddr.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil { // the status line: the scrape is running
		t.Fatal(err)
	}
	_ = conn.Close()
	// With max_concurrent_scrapes 1, the next scrape succeeds only once the
	// abandoned one released its slot.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get("http://" + cfg.ServerConfig.NetAddr.Endpoint + metricsPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the abandoned scrape never released its slot")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSteadyIngestDoesNotAllocatePerPoint: once its series exist, a batch is
// stored without allocating per point (counters, histograms, summaries).
func TestSteadyIngestDoesNotAllocatePerPoint(t *testing.T) {
	e, _ := newTestExporter(t)
	md := kindsMetrics()
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	sum := ms.At(0).Sum().DataPoints()
	hist := ms.At(1).Histogram().DataPoints()
	for i := range 200 {
		sum.At(0).CopyTo(sum.AppendEmpty())
		sum.At(sum.Len()-1).Attributes().PutStr("route", "r"+strconv.Itoa(i+2))
		hist.At(0).CopyTo(hist.AppendEmpty())
		hist.At(hist.Len()-1).Attributes().PutStr("route", "r"+strconv.Itoa(i+2))
	}
	ctx := context.Background()
	if err := e.consumeMetrics(ctx, md); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() { _ = e.consumeMetrics(ctx, md) })
	// A few allocations per batch (telemetry, the race detector's own) are
	// fine; one per point is not.
	if points := 2*201 + 3; allocs > float64(points)/20 {
		t.Fatalf("a batch of %d known points allocated %.0f times, want far fewer than one per point", points, allocs)
	}
}

func TestScrapeTimeoutHeader(t *testing.T) {
	for _, c := range []struct {
		header string
		want   time.Duration // 0: no deadline
	}{
		{"10", 10 * time.Second},
		{"0.5", 500 * time.Millisecond},
		{"1e-12", time.Nanosecond}, // still a deadline, already passed
		{"3600", time.Hour},
		{"86400", time.Hour}, // capped
		{"1e10", time.Hour},  // overflowed time.Duration: every scrape was aborted
		{"1e400", time.Hour}, // out of float64's range
		{"+Inf", time.Hour},
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"-Inf", 0},
		{"NaN", 0},
		{"ten", 0},
		{"10s", 0},                  // seconds are a bare number
		{" 10", 0},                  // no trimming: Prometheus sends "10"
		{"0x1p4", 16 * time.Second}, // ParseFloat's hex syntax, harmless
		{"9223372036.854775807", time.Hour},
	} {
		got, ok := scrapeTimeout(c.header)
		if ok != (c.want != 0) || got != c.want {
			t.Errorf("scrapeTimeout(%q) = %v, %v; want %v", c.header, got, ok, c.want)
		}
	}
}

// TestHugeScrapeTimeoutServesTheScrape: a scraper asking for a timeout
// beyond time.Duration's range gets the whole exposition.
func TestHugeScrapeTimeoutServesTheScrape(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), gauges("a", "b")); err != nil {
		t.Fatal(err)
	}
	want := scrape(t, e)
	for _, v := range []string{"1e10", "1e400", "+Inf", "NaN", "-1", "garbage"} {
		rec := get(t, e, metricsPath, http.Header{"X-Prometheus-Scrape-Timeout-Seconds": {v}})
		if rec.Code != http.StatusOK || rec.Body.String() != want {
			t.Errorf("timeout %q: %d %q, want 200 %q", v, rec.Code, rec.Body, want)
		}
	}
}

// TestStalledScraperLosesItsSlot: a scraper that stops reading (its
// connection open, its receive window full) is cut off once no write has
// progressed for scrapeStallTimeout, freeing its slot for the next scrape;
// it once held it for the whole write_timeout (30 s), and four such clients
// made every other scrape a 503.
func TestStalledScraperLosesItsSlot(t *testing.T) {
	// ~20 MB of exposition: far more than the socket buffers hold. Only the
	// stall guard can free the slot in time.
	cfg := startOneSlot(t, 200_000, 60, func(c *Config) { c.ServerConfig.WriteTimeout = time.Minute })
	conn, err := net.Dial("tcp", cfg.ServerConfig.NetAddr.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 10)
	}
	_, _ = conn.Write([]byte("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"))
	if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil { // the scrape is running; read no more
		t.Fatal(err)
	}
	start := time.Now()
	for {
		resp, err := http.Get("http://" + cfg.ServerConfig.NetAddr.Endpoint + metricsPath)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Since(start) > scrapeStallTimeout+10*time.Second {
			t.Fatal("the stalled scrape still holds its slot")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if waited := time.Since(start); waited < scrapeStallTimeout/2 {
		t.Errorf("the slot was free after %v: the stalled scrape should have held it until it stalled", waited)
	}
}
