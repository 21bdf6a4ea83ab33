package promstreamexporter

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
)

// hostileKeys are point attributes whose keys collide with what the
// exporter writes, or with each other once translated.
func hostileKeys(m pcommon.Map) {
	for k, v := range map[string]string{
		"__name__": "a", "le": "b", "quantile": "c", "__x": "d", "": "e", "job": "f", "instance": "g",
		"otel_scope_name": "h", "a.b": "i", "a_b": "j", "exported_le": "k", "route": "/ok",
	} {
		m.PutStr(k, v)
	}
}

// hostileMetrics holds a histogram, a summary, a gauge and a counter whose
// one point each has hostileKeys, from a resource with job, instance and a
// resource attribute "le" (copied by resource_constant_labels in
// TestReservedAndCollidingAttributeKeys).
func hostileMetrics() pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "kong")
	rm.Resource().Attributes().PutStr("service.instance.id", "n1")
	rm.Resource().Attributes().PutStr("le", "r")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("s")
	ms := sm.Metrics()
	h := ms.AppendEmpty()
	h.SetName("latency")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	hdp := hh.DataPoints().AppendEmpty()
	hostileKeys(hdp.Attributes())
	hdp.ExplicitBounds().FromRaw([]float64{0.1, 1})
	hdp.BucketCounts().FromRaw([]uint64{1, 2, 3})
	hdp.SetCount(6)
	hdp.SetSum(4)
	s := ms.AppendEmpty()
	s.SetName("size")
	sdp := s.SetEmptySummary().DataPoints().AppendEmpty()
	hostileKeys(sdp.Attributes())
	q := sdp.QuantileValues().AppendEmpty()
	q.SetQuantile(0.5)
	q.SetValue(7)
	sdp.SetCount(2)
	sdp.SetSum(9)
	g := ms.AppendEmpty()
	g.SetName("temperature")
	gdp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	hostileKeys(gdp.Attributes())
	gdp.SetDoubleValue(21)
	c := ms.AppendEmpty()
	c.SetName("requests")
	cs := c.SetEmptySum()
	cs.SetIsMonotonic(true)
	cs.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	cdp := cs.DataPoints().AppendEmpty()
	hostileKeys(cdp.Attributes())
	cdp.SetIntValue(5)
	return md
}

// TestReservedAndCollidingAttributeKeys: attributes named __name__, le,
// quantile, __x, job, instance, otel_scope_name, an empty key and two keys
// that translate alike are written by the one rule of exposition.Resolve,
// in every format: Prometheus's parser reads every body (an attribute le
// or quantile was a second label of that name, and OpenMetrics bodies were
// refused), each series with exactly the labels the rule gives.
func TestReservedAndCollidingAttributeKeys(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.ResourceConstantLabels.Included = []string{"le"}
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	if err := e.consumeMetrics(context.Background(), hostileMetrics()); err != nil {
		t.Fatal(err)
	}
	// The point's le is left out for the resource's (copied over it); in a
	// histogram le is the bucket's, so that le is exported_le, which an
	// attribute holds already: exported_exported_le.
	common := `exported___name__="a", exported___x="d", job="kong", exported_job="f", instance="n1", exported_instance="g", otel_scope_name="s", exported_otel_scope_name="h", a_b="i;j", route="/ok"`
	want := map[string]string{
		"latency":     common + `, quantile="c", exported_le="k", exported_exported_le="r"`,
		"size":        common + `, exported_quantile="c", exported_le="k", le="r"`,
		"temperature": common + `, quantile="c", exported_le="k", le="r"`,
		"requests":    common + `, quantile="c", exported_le="k", le="r"`,
	}
	for _, accept := range []string{"", acceptOpenMetrics, "application/openmetrics-text;version=0.0.1", "text/plain;version=1.0.0;escaping=allow-utf-8", acceptProto} {
		rec := get(t, e, metricsPath, http.Header{"Accept": {accept}})
		ct := rec.Header().Get("Content-Type")
		n, err := checkExposition(rec.Body.Bytes(), ct)
		if err != nil {
			t.Fatalf("%s: %v\n%s", ct, err, rec.Body)
		}
		if n < 10 {
			t.Fatalf("%s: %d series", ct, n)
		}
		for _, s := range parseAll(t, rec.Body.Bytes(), ct) {
			var family string
			for f := range want {
				if strings.HasPrefix(s, `{__name__="`+f) {
					family = f
				}
			}
			if family == "" {
				continue // target_info
			}
			got := labelsOf(t, s)
			wantSet := labelsOf(t, "{"+want[family]+"}")
			got.Del(model.MetricNameLabel)
			if family == "latency" {
				got.Del("le")
			}
			if family == "size" {
				got.Del("quantile")
			}
			if !labels.Equal(got.Labels(), wantSet.Labels()) {
				t.Errorf("%s: %s has labels\n%s\nwant\n%s", ct, family, got.Labels(), wantSet.Labels())
			}
		}
	}
}

// labelsOf parses the label set at the start of a parseAll line.
func labelsOf(t *testing.T, s string) *labels.Builder {
	t.Helper()
	end := strings.LastIndex(s, "}")
	var b labels.ScratchBuilder
	for part := range strings.SplitSeq(s[1:end], ", ") {
		name, value, ok := strings.Cut(part, "=")
		if !ok {
			t.Fatalf("label %q in %q", part, s)
		}
		b.Add(name, strings.Trim(value, `"`))
	}
	b.Sort()
	return labels.NewBuilder(b.Labels())
}

// TestJoinedValuesFollowTheKeys: attributes that translate alike are joined
// in the order of their keys (the OpenTelemetry → Prometheus specification),
// so one OTel series whose attributes arrive in two orders is one
// Prometheus series with one value; in arrival order it was two series.
func TestJoinedValuesFollowTheKeys(t *testing.T) {
	e, _ := newTestExporter(t)
	md := pmetric.NewMetrics()
	g := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	g.SetName("g")
	dps := g.SetEmptyGauge().DataPoints()
	for i, keys := range [][]string{{"a_b", "a.b"}, {"a.b", "a_b"}} {
		dp := dps.AppendEmpty()
		for _, k := range keys {
			dp.Attributes().PutStr(k, "value of "+k)
		}
		dp.SetIntValue(int64(i + 1))
	}
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	if got := sampleLines(scrape(t, e)); strings.Join(got, "|") != `g{a_b="value of a.b;value of a_b"} 2` {
		t.Fatalf("served %q", got)
	}
}

// TestNamesThatEscapeAlike: under a UTF-8 translation strategy, metric and
// label names that differ in UTF-8 may escape alike ("a.b" and "a_b" under
// underscores). A UTF-8 scraper gets every family and series; a scraper
// that asks for escaped names (text 0.0.4 always does) gets the family
// created first, its series whose labels escape alike once, and labels that
// escape alike joined: a valid exposition either way.
func TestNamesThatEscapeAlike(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.TranslationStrategy = noUTF8EscapingWithSuffixes
	cfg.WithoutScopeInfo = true
	e, err := newExporter(cfg, exportertest.NewNopSettings(metadata.Type))
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	for i, name := range []string{"a.b", "a_b"} {
		g := ms.AppendEmpty()
		g.SetName(name)
		dps := g.SetEmptyGauge().DataPoints()
		for j, attrs := range []map[string]string{{"k.x": "1"}, {"k_x": "1"}, {"k.x": "1", "k_x": "2"}} {
			dp := dps.AppendEmpty()
			for k, v := range attrs {
				dp.Attributes().PutStr(k, v)
			}
			dp.SetIntValue(int64(10*i + j))
		}
	}
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		accept string
		want   []string
	}{
		{"text/plain;version=1.0.0;escaping=allow-utf-8", []string{
			`{"a.b","k.x"="1"} 0`, `{"a.b",k_x="1"} 1`, `{"a.b","k.x"="1",k_x="2"} 2`,
			`a_b{"k.x"="1"} 10`, `a_b{k_x="1"} 11`, `a_b{"k.x"="1",k_x="2"} 12`,
		}},
		{"", []string{`a_b{k_x="1"} 0`, `a_b{k_x="1;2"} 2`}},
		// Dots escaping leaves legacy names as they are: nothing collides.
		{"text/plain;version=1.0.0;escaping=dots", []string{
			`a_dot_b{k_dot_x="1"} 0`, `a_dot_b{k_x="1"} 1`, `a_dot_b{k_dot_x="1",k_x="2"} 2`,
			`a_b{k_dot_x="1"} 10`, `a_b{k_x="1"} 11`, `a_b{k_dot_x="1",k_x="2"} 12`,
		}},
	} {
		rec := get(t, e, metricsPath, http.Header{"Accept": {c.accept}})
		if _, err := checkExposition(rec.Body.Bytes(), rec.Header().Get("Content-Type")); err != nil {
			t.Fatalf("Accept %q: %v\n%s", c.accept, err, rec.Body)
		}
		if got := sampleLines(rec.Body.String()); !slices.Equal(got, c.want) {
			t.Errorf("Accept %q: served\n%s\nwant\n%s", c.accept, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
}
