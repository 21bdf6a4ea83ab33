package promstreamexporter

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

const (
	acceptOpenMetrics = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
	acceptText004     = "text/plain;version=0.0.4"
)

// Start times of kindsMetrics' streams: OpenMetrics' _created.
const (
	counterStart   = pcommon.Timestamp(1_700_000_000_500_000_000)
	histogramStart = pcommon.Timestamp(1_700_000_001_000_000_000)
	summaryStart   = pcommon.Timestamp(1_700_000_002_250_000_000)
	expoStart      = pcommon.Timestamp(1_700_000_003_000_000_001)
)

// kindsMetrics holds one metric of every kind the exporter writes.
func kindsMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kong")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("kong-internal")
	sm.Scope().SetVersion("0.1.0")
	ms := sm.Metrics()

	c := ms.AppendEmpty()
	c.SetName("kong.http.requests")
	c.SetDescription("HTTP requests.")
	cs := c.SetEmptySum()
	cs.SetIsMonotonic(true)
	cs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := cs.DataPoints().AppendEmpty()
	dp.Attributes().PutStr("route", "r1")
	dp.SetIntValue(10)
	dp.SetStartTimestamp(counterStart)

	h := ms.AppendEmpty()
	h.SetName("kong.request.latency")
	h.SetUnit("ms")
	h.SetDescription("Request latency.")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hdp := hh.DataPoints().AppendEmpty()
	hdp.Attributes().PutStr("route", "r1")
	hdp.ExplicitBounds().FromRaw([]float64{1, 2.5, 10})
	hdp.BucketCounts().FromRaw([]uint64{3, 0, 2, 1})
	hdp.SetCount(6)
	hdp.SetSum(31.5)
	hdp.SetStartTimestamp(histogramStart)

	s := ms.AppendEmpty()
	s.SetName("rpc.duration")
	s.SetUnit("s")
	sdp := s.SetEmptySummary().DataPoints().AppendEmpty()
	sdp.SetCount(4)
	sdp.SetSum(2)
	sdp.SetStartTimestamp(summaryStart)
	for _, q := range [][2]float64{{0.5, 0.4}, {0.99, 1.2}} {
		v := sdp.QuantileValues().AppendEmpty()
		v.SetQuantile(q[0])
		v.SetValue(q[1])
	}

	x := ms.AppendEmpty()
	x.SetName("payload.size")
	x.SetUnit("By")
	xh := x.SetEmptyExponentialHistogram()
	xh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	xdp := xh.DataPoints().AppendEmpty()
	xdp.SetScale(0) // base 2
	xdp.SetZeroCount(1)
	xdp.Positive().SetOffset(1) // buckets (2,4], (4,8]
	xdp.Positive().BucketCounts().FromRaw([]uint64{2, 3})
	xdp.Negative().SetOffset(0) // bucket [-2,-1)
	xdp.Negative().BucketCounts().FromRaw([]uint64{1})
	xdp.SetCount(7)
	xdp.SetSum(20)
	xdp.SetStartTimestamp(expoStart)

	g := ms.AppendEmpty()
	g.SetName("kong.memory.workers.lua.vms")
	g.SetUnit("By")
	g.SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1.5e6)
	return md
}

func get(t *testing.T, e *promStreamExporter, target string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	e.handleMetrics(rec, req)
	return rec
}

// checkGolden compares body with testdata/golden/name byte for byte.
func checkGolden(t *testing.T, name string, body []byte) {
	t.Helper()
	golden := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(golden, body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want) {
		t.Fatalf("exposition differs from %s (regenerate with: go test ./exporter/promstreamexporter -update)\ngot:\n%s\nwant:\n%s", golden, body, want)
	}
}

// parseAll parses body with Prometheus's parser for contentType and returns
// every sample as "labels value".
func parseAll(t *testing.T, body []byte, contentType string) []string {
	t.Helper()
	// _created lines are start times, not samples (Prometheus skips them
	// too when it ingests start times).
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{OpenMetricsSkipSTSeries: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Prometheus's parser rejects the exposition: %v\n%.2000s", err, body)
		}
		if entry == textparse.EntrySeries {
			var l labels.Labels
			p.Labels(&l)
			_, _, v := p.Series()
			out = append(out, l.String()+" "+formatFloat(v))
		}
	}
}

func formatFloat(v float64) string { return string(exposition.AppendFloat(nil, v)) }

func TestGoldenFormats(t *testing.T) {
	cases := []struct {
		golden, accept, contentType string
	}{
		{"kinds.prom", acceptText004, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"},
		{"kinds.om.txt", acceptOpenMetrics, "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8"},
	}
	var samples [][]string
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			e, _ := newTestExporter(t)
			if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
				t.Fatal(err)
			}
			rec := get(t, e, metricsPath, http.Header{"Accept": {c.accept}})
			if ct := rec.Header().Get("Content-Type"); ct != c.contentType {
				t.Fatalf("Content-Type = %q, want %q", ct, c.contentType)
			}
			checkGolden(t, c.golden, rec.Body.Bytes())
			samples = append(samples, parseAll(t, rec.Body.Bytes(), c.contentType))
		})
	}
	// Both formats carry the same samples.
	if len(samples) == 2 && strings.Join(samples[0], "\n") != strings.Join(samples[1], "\n") {
		t.Errorf("text and OpenMetrics samples differ:\n%s\n---\n%s", strings.Join(samples[0], "\n"), strings.Join(samples[1], "\n"))
	}
}

func TestCompressedScrapesDecodeToTheSameBody(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	plain := get(t, e, metricsPath, nil).Body.Bytes()
	for _, enc := range []string{"gzip", "zstd"} {
		rec := get(t, e, metricsPath, http.Header{"Accept-Encoding": {enc}})
		if got := rec.Header().Get("Content-Encoding"); got != enc {
			t.Fatalf("Accept-Encoding %s: Content-Encoding = %q", enc, got)
		}
		var r io.Reader
		switch enc {
		case "gzip":
			gz, err := gzip.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			r = gz
		case "zstd":
			zr, err := zstd.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			r = zr
		}
		body, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(body, plain) {
			t.Errorf("%s body differs from the plain one", enc)
		}
	}
	if got := acceptedEncoding("gzip;q=0, zstd;q=0"); got != "" {
		t.Errorf("encodings refused with q=0 were chosen: %q", got)
	}
	if got := acceptedEncoding("deflate, gzip;q=0.5"); got != "gzip" {
		t.Errorf("acceptedEncoding = %q, want gzip", got)
	}
}
