package promstreamexporter

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/metadatacheck"
	"github.com/otelgateway/otelgateway/internal/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden expositions in testdata/golden")

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func newTestExporter(t *testing.T) (*promStreamExporter, *componenttest.Telemetry) {
	t.Helper()
	return newTestExporterWith(t, createDefaultConfig())
}

// newTestExporterWith is newTestExporter with the configuration cfg.
func newTestExporterWith(t *testing.T, cfg *Config) (*promStreamExporter, *componenttest.Telemetry) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	e, err := newExporter(cfg, set)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever the test recorded must agree with metadata.yaml.
		metadatacheck.Attributes(t, metadatacheck.Read(t, "metadata.yaml"), tel)
		e.telemetry.Shutdown()
		_ = tel.Shutdown(context.Background())
	})
	return e, tel
}

func scrape(t *testing.T, e *promStreamExporter) string {
	t.Helper()
	rec := httptest.NewRecorder()
	e.handleMetrics(rec, httptest.NewRequest(http.MethodGet, metricsPath, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8; escaping=underscores" {
		t.Fatalf("Content-Type = %q", ct)
	}
	return rec.Body.String()
}

// gatewayMetrics is what the receiver and the cumulative processor produce,
// plus the shapes a general pipeline brings: gauges, non-monotonic sums,
// namespaced services, hostile label values.
func gatewayMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kong")
	rm.Resource().Attributes().PutStr("service.instance.id", "node-1")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()

	req := ms.AppendEmpty()
	req.SetName("gateway.requests")
	req.SetUnit("{request}")
	req.SetDescription("Requests proxied by the gateway.")
	sum := req.SetEmptySum()
	sum.SetIsMonotonic(true)
	sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for _, p := range []struct {
		route, method string
		code, n       int64
	}{{"/anything", "GET", 200, 41}, {"/anything", "POST", 201, 2}, {"/status", "GET", 503, 1}} {
		dp := sum.DataPoints().AppendEmpty()
		dp.Attributes().PutStr("http.route", p.route)
		dp.Attributes().PutStr("http.request.method", p.method)
		dp.Attributes().PutInt("http.response.status_code", p.code)
		dp.SetIntValue(p.n)
	}

	conns := ms.AppendEmpty()
	conns.SetName("gateway.connections.active")
	conns.SetDescription("Open connections.\nPer worker, \"roughly\".")
	ns := conns.SetEmptySum()
	ns.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	ns.DataPoints().AppendEmpty().SetIntValue(17)

	rm2 := md.ResourceMetrics().AppendEmpty()
	rm2.Resource().Attributes().PutStr("service.name", "envoy")
	rm2.Resource().Attributes().PutStr("service.namespace", "edge")
	g := rm2.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("upstream.load")
	g.SetUnit("1")
	gdps := g.SetEmptyGauge().DataPoints()
	dp := gdps.AppendEmpty()
	dp.Attributes().PutStr("upstream_cluster", "fake \"cluster\"\nwith\\escapes")
	dp.Attributes().PutStr("upstream.cluster", "dup")
	dp.SetDoubleValue(0.25)
	nan := gdps.AppendEmpty()
	nan.Attributes().PutStr("upstream_cluster", "idle")
	nan.SetDoubleValue(math.Inf(1))
	return md
}

func TestGoldenExposition(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), gatewayMetrics()); err != nil {
		t.Fatal(err)
	}
	// A second round updates values in place: same series, same order.
	md := gatewayMetrics()
	md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).SetIntValue(42)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	got := scrape(t, e)
	golden := filepath.Join("testdata", "golden", "gateway.prom")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("exposition differs from %s (regenerate with: go test ./exporter/promstreamexporter -run TestGoldenExposition -update)\ngot:\n%s\nwant:\n%s", golden, got, want)
	}
	assertParses(t, []byte(got))
}

// assertParses runs the exposition through Prometheus's own text parser and
// checks that no series appears twice.
func assertParses(t *testing.T, body []byte) {
	t.Helper()
	p, err := textparse.New(body, "text/plain; version=0.0.4", labels.NewSymbolTable(), textparse.ParserOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Prometheus's parser rejects the exposition: %v", err)
		}
		if entry != textparse.EntrySeries {
			continue
		}
		var lset labels.Labels
		p.Labels(&lset)
		if seen[lset.String()] {
			t.Fatalf("series %s appears twice", lset)
		}
		seen[lset.String()] = true
	}
	if len(seen) == 0 {
		t.Fatal("no series parsed")
	}
}

func TestPointsThatCannotBeExposedAreCounted(t *testing.T) {
	e, tel := newTestExporter(t)
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	delta := ms.AppendEmpty()
	delta.SetName("delta.requests")
	ds := delta.SetEmptySum()
	ds.SetIsMonotonic(true)
	ds.SetAggregationTemporality(pmetric.AggregationTemporalityDelta)
	ds.DataPoints().AppendEmpty().SetIntValue(1)
	ds.DataPoints().AppendEmpty().SetIntValue(2)
	hist := ms.AppendEmpty()
	hist.SetName("latency")
	hist.SetEmptyHistogram().DataPoints().AppendEmpty().SetCount(3) // delta by default
	// "x" as a gauge; then "x.total", a counter written x_total, whose
	// OpenMetrics family name would be "x" too: refused (type_conflict); then
	// "x_total" as a gauge, which nothing else claims.
	g := ms.AppendEmpty()
	g.SetName("x")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(1)
	c := ms.AppendEmpty()
	c.SetName("x.total")
	cs := c.SetEmptySum()
	cs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cs.SetIsMonotonic(true)
	cs.DataPoints().AppendEmpty().SetIntValue(5)
	clash := ms.AppendEmpty()
	clash.SetName("x_total") // also translates to x_total, as a gauge
	clash.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(9)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	want := "# TYPE x gauge\nx 1\n# TYPE x_total gauge\nx_total 9\n"
	if got := scrape(t, e); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	for reason, n := range map[string]int64{"delta_temporality": 3, "type_conflict": 1} {
		if got := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_dropped_points", attribute.String("reason", reason)); got != n {
			t.Errorf("dropped{reason=%q} = %d, want %d", reason, got, n)
		}
	}
}

func TestHashCollisionKeepsSeriesApart(t *testing.T) {
	e, _ := newTestExporter(t)
	f, _ := e.table.Family("g", "", exposition.TypeGauge)
	ctx := &series.Context{}
	// Both keys under one hash: the table must compare the real keys.
	for i, v := range []string{"a", "b"} {
		key := series.Key{Context: ctx, Attrs: pcommon.NewMap()}
		key.Attrs.PutStr("k", v)
		s, err := f.Series(99, &key, 1, fixedLabels{{Name: "k", Value: v}})
		if err != nil {
			t.Fatal(err)
		}
		s.SetValue(float64(i+1), 1)
	}
	want := "# TYPE g gauge\ng{k=\"a\"} 1\ng{k=\"b\"} 2\n"
	if got := scrape(t, e); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

type fixedLabels []exposition.Label

func (l fixedLabels) Labels() []exposition.Label { return l }

func TestExpiryRemovesIdleSeries(t *testing.T) {
	e, tel := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), gatewayMetrics()); err != nil {
		t.Fatal(err)
	}
	e.expire(time.Now()) // nothing is idle yet
	// 6 series and the target_info of the resource with job and instance.
	if got := testutil.Int64Gauge(t, tel, "otelcol_exporter_promstream_series"); got != 7 {
		t.Fatalf("series = %d, want 7", got)
	}
	e.expire(time.Now().Add(e.cfg.MetricExpiration + time.Second))
	if got := scrape(t, e); got != "" {
		t.Fatalf("after expiry the exposition is %q, want empty", got)
	}
	if got := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_expired_series"); got != 7 {
		t.Errorf("expired series = %d, want 7", got)
	}
}

// brokenConn fails every write, as a scraper that hung up does.
type brokenConn struct{ httptest.ResponseRecorder }

func (b *brokenConn) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }

func TestFailedWriteAbortsTheConnection(t *testing.T) {
	e, tel := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), gatewayMetrics()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r != http.ErrAbortHandler {
			t.Fatalf("handler recovered %v, want http.ErrAbortHandler", r)
		}
		if got := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_scrapes", attribute.String("outcome", "aborted")); got != 1 {
			t.Errorf("aborted scrapes = %d, want 1", got)
		}
	}()
	e.handleMetrics(&brokenConn{*httptest.NewRecorder()}, httptest.NewRequest(http.MethodGet, metricsPath, nil))
}

func TestServesOverHTTP(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.ServerConfig.NetAddr.Endpoint = testutil.FreeAddr(t)
	exp, err := NewFactory().CreateMetrics(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := exp.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	if err := exp.ConsumeMetrics(context.Background(), gatewayMetrics()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + cfg.ServerConfig.NetAddr.Endpoint + metricsPath)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("\n# HELP gateway_requests_total")) {
		t.Fatalf("GET /metrics: %d %q", resp.StatusCode, body)
	}
	assertParses(t, body)

	resp, err = http.Post("http://"+cfg.ServerConfig.NetAddr.Endpoint+metricsPath, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /metrics: %d, want 405", resp.StatusCode)
	}
}

// TestStartShutdownTwice: the second start on the same port fails if the first
// shutdown leaked the listener or the expiry goroutine (goleak).
func TestStartShutdownTwice(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.ServerConfig.NetAddr.Endpoint = testutil.FreeAddr(t)
	for range 2 {
		exp, err := NewFactory().CreateMetrics(context.Background(), exportertest.NewNopSettings(metadata.Type), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := exp.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if err := exp.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}
