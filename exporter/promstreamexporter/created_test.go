package promstreamexporter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// startTimes parses body with Prometheus's own parser for its Content-Type
// and returns the start timestamp (ms; what Prometheus reads from
// OpenMetrics' _created and protobuf's created_timestamp) of every series
// that has one, by its labels.
func startTimes(t *testing.T, body []byte, contentType string) map[string]int64 {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{OpenMetricsSkipSTSeries: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Prometheus's parser rejects the body: %v\n%s", err, body)
		}
		if entry != textparse.EntrySeries && entry != textparse.EntryHistogram {
			continue
		}
		var l labels.Labels
		p.Labels(&l)
		if st := p.StartTimestamp(); st != 0 {
			out[l.String()] = st
		}
	}
}

const (
	requestsSeries = `{__name__="kong_http_requests_total", job="kong", otel_scope_name="kong-internal", otel_scope_version="0.1.0", route="r1"}`
	latencyCount   = `{__name__="kong_request_latency_milliseconds_count", job="kong", otel_scope_name="kong-internal", otel_scope_version="0.1.0", route="r1"}`
	durationCount  = `{__name__="rpc_duration_seconds_count", job="kong", otel_scope_name="kong-internal", otel_scope_version="0.1.0"}`
)

// restarted is kindsMetrics after the counter's and the histogram's
// streams restarted at start (a gateway restart: new start time, values
// from zero).
func restarted(start pcommon.Timestamp) pmetric.Metrics {
	md := kindsMetrics()
	ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
	c := ms.At(0).Sum().DataPoints().At(0)
	c.SetStartTimestamp(start)
	c.SetIntValue(3)
	h := ms.At(1).Histogram().DataPoints().At(0)
	h.SetStartTimestamp(start)
	return md
}

// TestCreatedFollowsTheStreamStart: OpenMetrics and protobuf scrapes carry
// each counter's, histogram's and summary's start time, as Prometheus reads
// it; a restarted stream (new start time) shows the new one; the
// Prometheus text formats never have _created lines.
func TestCreatedFollowsTheStreamStart(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	ms := func(ts pcommon.Timestamp) int64 { return int64(ts) / 1e6 }
	check := func(accept string, want map[string]int64) {
		t.Helper()
		rec := get(t, e, metricsPath, http.Header{"Accept": {accept}})
		got := startTimes(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
		for series, st := range want {
			if got[series] != st {
				t.Errorf("%s: start time of %s = %d, want %d (all: %v)", accept, series, got[series], st, got)
			}
		}
	}
	first := map[string]int64{requestsSeries: ms(counterStart), latencyCount: ms(histogramStart), durationCount: ms(summaryStart)}
	check(acceptOpenMetrics, first)
	check(acceptProto, first)

	const restart = pcommon.Timestamp(1_700_000_600_125_000_000)
	if err := e.consumeMetrics(context.Background(), restarted(restart)); err != nil {
		t.Fatal(err)
	}
	second := map[string]int64{requestsSeries: ms(restart), latencyCount: ms(restart), durationCount: ms(summaryStart)}
	check(acceptOpenMetrics, second)
	check(acceptProto, second)
	om := get(t, e, metricsPath, http.Header{"Accept": {acceptOpenMetrics}}).Body.String()
	if want := `kong_http_requests_created{job="kong",otel_scope_name="kong-internal",otel_scope_version="0.1.0",route="r1"} 1700000600.125` + "\n"; !strings.Contains(om, want) {
		t.Errorf("OpenMetrics lacks %q:\n%s", want, om)
	}

	for _, accept := range []string{acceptText004, "text/plain;version=1.0.0;escaping=allow-utf-8"} {
		if body := get(t, e, metricsPath, http.Header{"Accept": {accept}}).Body.String(); strings.Contains(body, "_created") {
			t.Errorf("%s has _created lines:\n%s", accept, body)
		}
	}
}

// TestCreatedIsLeftOutWithoutAStartTime: a point without a start time has
// no _created line and no created_timestamp.
func TestCreatedIsLeftOutWithoutAStartTime(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), restarted(0)); err != nil {
		t.Fatal(err)
	}
	for _, accept := range []string{acceptOpenMetrics, acceptProto} {
		rec := get(t, e, metricsPath, http.Header{"Accept": {accept}})
		got := startTimes(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
		if st, ok := got[requestsSeries]; ok {
			t.Errorf("%s: counter without a start time has start time %d", accept, st)
		}
		if _, ok := got[durationCount]; !ok {
			t.Errorf("%s: the summary lost its start time", accept)
		}
	}
	if om := get(t, e, metricsPath, http.Header{"Accept": {acceptOpenMetrics}}).Body.String(); strings.Contains(om, "kong_http_requests_created") {
		t.Errorf("a _created line without a start time:\n%s", om)
	}
}

// TestCreatedNameTakenByAGauge: a gauge named like a counter's _created
// keeps its name; the counter's _created lines are left out, so the
// exposition never writes one name twice.
func TestCreatedNameTakenByAGauge(t *testing.T) {
	for _, gaugeFirst := range []bool{false, true} {
		e, _ := newTestExporter(t)
		md := pmetric.NewMetrics()
		ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
		gauge := func() {
			g := ms.AppendEmpty()
			g.SetName("jobs_created")
			g.SetEmptyGauge().DataPoints().AppendEmpty().SetIntValue(7)
		}
		if gaugeFirst {
			gauge()
		}
		c := ms.AppendEmpty()
		c.SetName("jobs")
		sum := c.SetEmptySum()
		sum.SetIsMonotonic(true)
		sum.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		dp := sum.DataPoints().AppendEmpty()
		dp.SetIntValue(3)
		dp.SetStartTimestamp(counterStart)
		if !gaugeFirst {
			gauge()
		}
		if err := e.consumeMetrics(context.Background(), md); err != nil {
			t.Fatal(err)
		}
		rec := get(t, e, metricsPath, http.Header{"Accept": {acceptOpenMetrics}})
		body := rec.Body.String()
		if n := strings.Count(body, "\njobs_created"); n != 1 {
			t.Fatalf("gauge first %v: %d jobs_created lines, want the gauge's alone:\n%s", gaugeFirst, n, body)
		}
		parseAll(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
	}
}
