package promstreamexporter

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

func compatible(name string) *Config {
	c := createDefaultConfig()
	c.Compatibility = name
	return c
}

// gatewayShaped is what the gateway receiver's kong profile sends through the
// cumulative processor: no resource, a scope, labels in Kong's order (not
// sorted), an empty consumer, a counter with _total and one without,
// millisecond histograms with Kong's integer bounds and start times, a
// gauge.
func gatewayShaped() pmetric.Metrics {
	md := pmetric.NewMetrics()
	sm := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("github.com/otelgateway/otelgateway/receiver/gatewayreceiver")
	sm.Scope().SetVersion("0.1.0")
	ms := sm.Metrics()
	attrs := func(m pcommon.Map, kv ...string) {
		for i := 0; i < len(kv); i += 2 {
			m.PutStr(kv[i], kv[i+1])
		}
	}
	counter := func(name, unit string) pmetric.NumberDataPointSlice {
		m := ms.AppendEmpty()
		m.SetName(name)
		m.SetUnit(unit)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		return s.DataPoints()
	}
	reqs := counter("kong_http_requests_total", "")
	for _, p := range []struct {
		route, code, consumer string
		n                     int64
	}{{"orders", "200", "alice", 41}, {"orders", "503", "", 2}} {
		dp := reqs.AppendEmpty()
		attrs(dp.Attributes(), "service", "shop", "route", p.route, "code", p.code, "source", "service", "workspace", "default", "consumer", p.consumer)
		dp.SetStartTimestamp(1_700_000_000_000_000_000)
		dp.SetIntValue(p.n)
	}
	bw := counter("kong_bandwidth_bytes", "By")
	for i, dir := range []string{"ingress", "egress"} {
		dp := bw.AppendEmpty()
		attrs(dp.Attributes(), "service", "shop", "route", "orders", "direction", dir, "workspace", "default", "consumer", "")
		dp.SetStartTimestamp(1_700_000_000_000_000_000)
		dp.SetIntValue(int64(1000 * (i + 1)))
	}
	lat := ms.AppendEmpty()
	lat.SetName("kong_request_latency_ms")
	lat.SetUnit("ms")
	h := lat.SetEmptyHistogram()
	h.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	dp := h.DataPoints().AppendEmpty()
	attrs(dp.Attributes(), "service", "shop", "route", "orders", "workspace", "default")
	dp.ExplicitBounds().FromRaw([]float64{1, 2, 5, 25, 100, 1000, 60000})
	dp.BucketCounts().FromRaw([]uint64{3, 4, 10, 20, 5, 1, 0, 0})
	dp.SetCount(43)
	dp.SetSum(1234.5)
	dp.SetStartTimestamp(1_700_000_000_000_000_000)
	g := ms.AppendEmpty()
	g.SetName("kong_upstream_target_health")
	gp := g.SetEmptyGauge().DataPoints().AppendEmpty()
	attrs(gp.Attributes(), "upstream", "shop", "target", "10.0.0.1:80", "address", "10.0.0.1:80", "state", "healthy", "subsystem", "http")
	gp.SetIntValue(1)
	return md
}

// TestCompatibilityRendersTheRecipe: each preset renders exactly what the
// five keys it replaces render (testdata/golden/compatibility.prom and
// .om.txt, written by the keys), byte for byte, in every format it
// negotiates. Envoy's preset does not negotiate OpenMetrics: a scraper
// asking for it first gets text 0.0.4, as from Envoy itself.
func TestCompatibilityRendersTheRecipe(t *testing.T) {
	formats := []struct {
		name, accept, golden string
	}{
		{"text 0.0.4", acceptText004, "compatibility.prom"},
		{"text 1.0.0", acceptText100, ""},
		{"protobuf", acceptProto, ""},
		{"OpenMetrics", acceptOpenMetrics, "compatibility.om.txt"},
	}
	keys, _ := exporterWith(t, kongParityConfig()) // the five keys
	if err := keys.consumeMetrics(context.Background(), gatewayShaped()); err != nil {
		t.Fatal(err)
	}
	want := map[string]*httpBody{}
	for _, f := range formats {
		rec := get(t, keys, metricsPath, http.Header{"Accept": {f.accept}})
		want[f.name] = &httpBody{rec.Header().Get("Content-Type"), rec.Body.Bytes()}
		if f.golden != "" {
			checkGolden(t, f.golden, rec.Body.Bytes())
		}
	}
	for _, name := range []string{compatKong, compatAPISIX, compatEnvoy} {
		t.Run(name, func(t *testing.T) {
			e, logs := exporterWith(t, compatible(name))
			if err := e.consumeMetrics(context.Background(), gatewayShaped()); err != nil {
				t.Fatal(err)
			}
			for _, f := range formats {
				rec := get(t, e, metricsPath, http.Header{"Accept": {f.accept}})
				w := want[f.name]
				if name == compatEnvoy && f.name == "OpenMetrics" {
					// Not negotiated: the scraper's next choice, text 1.0.0
					// (the same body: every name is a legacy name).
					w = &httpBody{"text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8", want["text 0.0.4"].body}
				}
				if ct := rec.Header().Get("Content-Type"); ct != w.contentType {
					t.Errorf("%s: Content-Type %q, want %q", f.name, ct, w.contentType)
				}
				if !bytes.Equal(rec.Body.Bytes(), w.body) {
					t.Errorf("%s: body differs from the five keys':\n%s\nwant:\n%s", f.name, rec.Body, w.body)
				}
			}
			if logs.Len() != 0 {
				t.Errorf("warnings: %v", logs.All())
			}
		})
	}
}

type httpBody struct {
	contentType string
	body        []byte
}

// envoyShaped is a push of Envoy's stats sink as the gateway receiver maps
// it (docs/gateways.md §3c): the per-code counter
// envoy_cluster_upstream_rq and envoy_cluster_upstream_rq_total, in the
// given order, and a counter of its own.
func envoyShaped(totalFirst bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "envoy")
	rm.Resource().Attributes().PutStr("service.instance.id", "10.1.2.3:50000")
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	// counter adds a counter with a point per label set, each [labels…, value].
	counter := func(name string, points ...[]string) {
		m := ms.AppendEmpty()
		m.SetName(name)
		s := m.SetEmptySum()
		s.SetIsMonotonic(true)
		s.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
		for _, p := range points {
			dp := s.DataPoints().AppendEmpty()
			for i := 0; i+1 < len(p); i += 2 {
				dp.Attributes().PutStr(p[i], p[i+1])
			}
			dp.SetStartTimestamp(1_700_000_000_000_000_000)
			v, _ := strconv.ParseInt(p[len(p)-1], 10, 64)
			dp.SetIntValue(v)
		}
	}
	const cluster = "httproute/default/backend/rule/0"
	perCode := func() {
		counter("envoy_cluster_upstream_rq",
			[]string{"envoy_response_code", "200", "envoy_cluster_name", cluster, "1490"},
			[]string{"envoy_response_code", "503", "envoy_cluster_name", cluster, "30"})
	}
	total := func() { counter("envoy_cluster_upstream_rq_total", []string{"envoy_cluster_name", cluster, "1520"}) }
	if totalFirst {
		total()
		perCode()
	} else {
		perCode()
		total()
	}
	counter("envoy_cluster_upstream_cx_connect_fail", []string{"envoy_cluster_name", cluster, "2"})
	return md
}

// TestEnvoyCompatibilityServesBothCounters: under compatibility: envoy,
// envoy_cluster_upstream_rq{envoy_response_code} and
// envoy_cluster_upstream_rq_total are both served, whichever comes first,
// each `# TYPE … counter` as /stats/prometheus writes them
// (testdata/golden/compatibility_envoy.prom), in text 0.0.4 and protobuf;
// OpenMetrics is not negotiated. With enable_open_metrics: true set
// explicitly (warned about), OpenMetrics writes both as unknown families
// of their own names, which Prometheus's parser reads with every sample.
// Every other preset keeps refusing the second (type_conflict).
func TestEnvoyCompatibilityServesBothCounters(t *testing.T) {
	for _, totalFirst := range []bool{false, true} {
		name := "per-code first"
		if totalFirst {
			name = "total first"
		}
		t.Run(name, func(t *testing.T) {
			e, logs := exporterWith(t, compatible(compatEnvoy))
			if err := e.consumeMetrics(context.Background(), envoyShaped(totalFirst)); err != nil {
				t.Fatal(err)
			}
			text := get(t, e, metricsPath, http.Header{"Accept": {acceptOpenMetrics}})
			if ct := text.Header().Get("Content-Type"); ct != "text/plain; version=1.0.0; charset=utf-8; escaping=allow-utf-8" {
				t.Errorf("OpenMetrics asked first: Content-Type %q, want text (1.0.0, the scraper's next choice)", ct)
			}
			// Prometheus 2.42's fixed Accept header (Debian's, seen on the wire).
			const accept242 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
			if ct := get(t, e, metricsPath, http.Header{"Accept": {accept242}}).Header().Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8; escaping=underscores" {
				t.Errorf("Prometheus 2.42: Content-Type %q, want text 0.0.4", ct)
			}
			body := get(t, e, metricsPath, http.Header{"Accept": {acceptText004}}).Body.String()
			golden := "compatibility_envoy.prom"
			if totalFirst {
				golden = "compatibility_envoy_total_first.prom"
			}
			checkGolden(t, golden, []byte(body))
			textSamples := parseAll(t, []byte(body), "text/plain; version=0.0.4")
			proto := get(t, e, metricsPath, http.Header{"Accept": {acceptProto}})
			protoSamples, _ := parseProto(t, proto.Body.Bytes(), proto.Header().Get("Content-Type"))
			if strings.Join(protoSamples, "\n") != strings.Join(textSamples, "\n") {
				t.Errorf("protobuf samples:\n%s\nwant text's:\n%s", strings.Join(protoSamples, "\n"), strings.Join(textSamples, "\n"))
			}
			if logs.Len() != 0 {
				t.Errorf("warnings: %v", logs.All())
			}

			// OpenMetrics asked for explicitly.
			cfg := compatible(compatEnvoy)
			cfg.EnableOpenMetrics = new(true)
			om, logs := exporterWith(t, cfg)
			if err := om.consumeMetrics(context.Background(), envoyShaped(totalFirst)); err != nil {
				t.Fatal(err)
			}
			rec := get(t, om, metricsPath, http.Header{"Accept": {acceptOpenMetrics}})
			ct := rec.Header().Get("Content-Type")
			if !strings.HasPrefix(ct, "application/openmetrics-text; version=1.0.0") {
				t.Fatalf("Content-Type %q, want OpenMetrics", ct)
			}
			if totalFirst {
				checkGolden(t, "compatibility_envoy_total_first.om.txt", rec.Body.Bytes())
			} else {
				checkGolden(t, "compatibility_envoy.om.txt", rec.Body.Bytes())
			}
			if omSamples := parseAll(t, rec.Body.Bytes(), ct); strings.Join(omSamples, "\n") != strings.Join(textSamples, "\n") {
				t.Errorf("OpenMetrics samples:\n%s\nwant text's:\n%s", strings.Join(omSamples, "\n"), strings.Join(textSamples, "\n"))
			}
			if logs.Len() != 1 || logs.All()[0].ContextMap()["key"] != "enable_open_metrics" {
				t.Errorf("warnings: %v, want one about enable_open_metrics", logs.All())
			}
		})
	}
	// The other presets, and the five keys without a preset, keep
	// OpenMetrics' naming in every format: the second family is refused.
	for name, cfg := range map[string]*Config{compatKong: compatible(compatKong), compatAPISIX: compatible(compatAPISIX), "the five keys": kongParityConfig()} {
		e, tel := newTestExporterWith(t, cfg)
		if err := e.consumeMetrics(context.Background(), envoyShaped(false)); err != nil {
			t.Fatal(err)
		}
		if body := scrape(t, e); strings.Contains(body, "envoy_cluster_upstream_rq_total") {
			t.Errorf("compatibility %q serves both families:\n%s", name, body)
		}
		if got := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_dropped_points", attribute.String("reason", reasonConflict)); got != 1 {
			t.Errorf("compatibility %q: type_conflict drops = %d, want 1", name, got)
		}
	}
}

// TestCompatibilityOverrides: keys set explicitly win over the preset; the
// ones that contradict it are warned about, once each, naming the key, the
// preset's value and the one set; a config built in Go sets a key by giving
// it another value than its default.
func TestCompatibilityOverrides(t *testing.T) {
	cfg := compatible(compatKong)
	cfg.TextBucketFormat = bucketFormatCanonical // the default: the preset's value applies
	cfg.LabelOrder = labelOrderAsReceived        // the preset's own value: no warning
	cfg.TranslationStrategy = underscoreEscapingWithSuffixes
	e, logs := exporterWith(t, cfg)
	if e.cfg.TextBucketFormat != bucketFormatShortest || e.cfg.LabelOrder != labelOrderAsReceived ||
		e.cfg.TranslationStrategy != underscoreEscapingWithSuffixes || !e.cfg.WithoutScopeInfo || !e.cfg.KeepEmptyLabels {
		t.Errorf("in effect: %+v", e.cfg)
	}
	if logs.Len() != 1 {
		t.Fatalf("warnings: %v, want one", logs.All())
	}
	got := logs.All()[0]
	want := map[string]any{"compatibility": "kong", "key": "translation_strategy", "preset": underscoreEscapingWithoutSuffixes, "set": underscoreEscapingWithSuffixes}
	for k, v := range want {
		if got.ContextMap()[k] != v {
			t.Errorf("warning %q: %s = %v, want %v", got.Message, k, got.ContextMap()[k], v)
		}
	}
	if cfg.TextBucketFormat != bucketFormatCanonical {
		t.Error("withPreset changed the configuration it was given")
	}
}
