package promstreamexporter

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

const acceptProto = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;q=0.5"

// parseProto parses a delimited protobuf body with Prometheus's parser and
// returns the float samples ("labels value") and the native histograms by
// series.
func parseProto(t *testing.T, body []byte, contentType string) ([]string, map[string]*histogram.Histogram) {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{KeepClassicOnClassicAndNativeHistograms: true})
	if err != nil {
		t.Fatal(err)
	}
	var samples []string
	natives := map[string]*histogram.Histogram{}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return samples, natives
		}
		if err != nil {
			t.Fatalf("Prometheus's protobuf parser rejects the body: %v", err)
		}
		var l labels.Labels
		switch entry {
		case textparse.EntrySeries:
			p.Labels(&l)
			_, _, v := p.Series()
			samples = append(samples, l.String()+" "+formatFloat(v))
		case textparse.EntryHistogram:
			p.Labels(&l)
			_, _, h, _ := p.Histogram()
			natives[l.String()] = h
		}
	}
}

func TestProtobufCarriesTheSameSamplesAndNativeHistograms(t *testing.T) {
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), kindsMetrics()); err != nil {
		t.Fatal(err)
	}
	rec := get(t, e, metricsPath, http.Header{"Accept": {acceptProto}})
	ct := rec.Header().Get("Content-Type")
	if ct != "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited; escaping=underscores" {
		t.Fatalf("Content-Type = %q", ct)
	}
	samples, natives := parseProto(t, rec.Body.Bytes(), ct)
	text := get(t, e, metricsPath, http.Header{"Accept": {acceptText004}})
	want := parseAll(t, text.Body.Bytes(), text.Header().Get("Content-Type"))
	// The one intended difference: protobuf keeps the _sum of a histogram
	// with negative buckets (native histograms allow it; OpenMetrics does
	// not, so the text formats leave it out).
	sum := `{__name__="payload_size_bytes_sum", job="kong", otel_scope_name="kong-internal", otel_scope_version="0.1.0"} 20`
	if i := slices.Index(samples, sum); i >= 0 {
		samples = slices.Delete(samples, i, i+1)
	} else {
		t.Errorf("protobuf lacks %s", sum)
	}
	slices.Sort(samples)
	slices.Sort(want)
	if strings.Join(samples, "\n") != strings.Join(want, "\n") {
		t.Fatalf("protobuf samples differ from text:\n%s\n---\n%s", strings.Join(samples, "\n"), strings.Join(want, "\n"))
	}
	h := natives[`{__name__="payload_size_bytes", job="kong", otel_scope_name="kong-internal", otel_scope_version="0.1.0"}`]
	if h == nil {
		t.Fatalf("no native histogram for payload_size_bytes; got %v", natives)
	}
	wantH := &histogram.Histogram{
		Schema: 0, Count: 7, Sum: 20, ZeroCount: 1, ZeroThreshold: 0,
		PositiveSpans: []histogram.Span{{Offset: 2, Length: 2}}, PositiveBuckets: []int64{2, 1},
		NegativeSpans: []histogram.Span{{Offset: 1, Length: 1}}, NegativeBuckets: []int64{1},
	}
	if h.String() != wantH.String() {
		t.Fatalf("native histogram = %s, want %s", h, wantH)
	}
}

func TestNativeHistogramDownscalesToSchema8(t *testing.T) {
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("fine")
	xh := m.SetEmptyExponentialHistogram()
	xh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := xh.DataPoints().AppendEmpty()
	dp.SetScale(10) // 4 OTel buckets merge into one at schema 8
	dp.Positive().SetOffset(-3)
	dp.Positive().BucketCounts().FromRaw([]uint64{1, 1, 1, 1, 1, 1}) // indexes -3..2
	dp.SetCount(6)
	e, _ := newTestExporter(t)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	rec := get(t, e, metricsPath, http.Header{"Accept": {acceptProto}})
	_, natives := parseProto(t, rec.Body.Bytes(), rec.Header().Get("Content-Type"))
	h := natives[`{__name__="fine"}`]
	if h == nil {
		t.Fatalf("no native histogram: %v", natives)
	}
	// -3..-1 → index -1 (3 observations), 0..2 → index 0 (3); +1 for
	// Prometheus's index convention.
	want := &histogram.Histogram{Schema: 8, Count: 6, PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []int64{3, 0}}
	if h.String() != want.String() {
		t.Fatalf("native histogram = %s, want %s", h, want)
	}
}
