package e2e

// Hostile pushes of metrics (/v1/metrics), in the hostile suite's harness
// (hostile_test.go): while good span traffic flows, a client pushes a
// million points at once, more series than limits.max_pushed_points, and
// points with hostile names, labels and values. Each push is answered with
// what was wrong, the good traffic is counted exactly, memory stays bounded
// and the exposition stays valid with the good pushed point in it.

import (
	"bytes"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	colmetricspb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// hostilePushedPoints is limits.max_pushed_points in this attack's config:
// a tenth of the default, so the over-limit push stays lean.
const hostilePushedPoints = 20000

// pushedRSSBound: what the receiver holds is bounded by
// max_request_bytes_in_flight (64 MiB, decoding weighted), the series
// written by hostilePushedPoints per push; the good traffic's few series.
const pushedRSSBound = 512 * mib

// envoyGauge is an Envoy stats-sink push (an empty scope) of one gauge
// metric with the given points.
func envoyGauge(name string, points []*metricspb.NumberDataPoint) *metricspb.Metric {
	return &metricspb.Metric{Name: name, Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: points}}}
}

func envoyPush(ms ...*metricspb.Metric) []byte {
	b, err := proto.Marshal(&colmetricspb.ExportMetricsServiceRequest{ResourceMetrics: []*metricspb.ResourceMetrics{{
		ScopeMetrics: []*metricspb.ScopeMetrics{{Scope: &commonpb.InstrumentationScope{}, Metrics: ms}},
	}}})
	if err != nil {
		panic(err)
	}
	return b
}

func gaugePoint(v int64, attrs ...*commonpb.KeyValue) *metricspb.NumberDataPoint {
	return &metricspb.NumberDataPoint{Value: &metricspb.NumberDataPoint_AsInt{AsInt: v}, Attributes: attrs}
}

// wireGaugePush is envoyPush of one gauge of n points of value 1, encoded
// by hand (a generated marshaller is slow under -race for a million
// points); cluster names point i's envoy.cluster_name (nil: no attribute).
func wireGaugePush(name string, n int, cluster func(i int) string) []byte {
	gauge := make([]byte, 0, n*48)
	var pt, kv, av []byte // reused: one allocation per push, not per point
	if cluster == nil {
		// Every point the same: one, repeated.
		pt = protowire.AppendTag(pt, 6, protowire.Fixed64Type)
		pt = protowire.AppendFixed64(pt, 1)
		one := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), pt)
		gauge = bytes.Repeat(one, n)
		n = 0
	}
	for i := range n {
		pt = pt[:0]
		if cluster != nil {
			av = protowire.AppendTag(av[:0], 1, protowire.BytesType)
			av = protowire.AppendString(av, cluster(i))
			kv = protowire.AppendTag(kv[:0], 1, protowire.BytesType)
			kv = protowire.AppendString(kv, "envoy.cluster_name")
			kv = protowire.AppendTag(kv, 2, protowire.BytesType)
			kv = protowire.AppendBytes(kv, av)
			pt = protowire.AppendTag(pt, 7, protowire.BytesType)
			pt = protowire.AppendBytes(pt, kv)
		}
		pt = protowire.AppendTag(pt, 6, protowire.Fixed64Type) // as_int
		pt = protowire.AppendFixed64(pt, 1)
		gauge = protowire.AppendTag(gauge, 1, protowire.BytesType)
		gauge = protowire.AppendBytes(gauge, pt)
	}
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.BytesType)
	m = protowire.AppendString(m, name)
	m = protowire.AppendTag(m, 5, protowire.BytesType)
	m = protowire.AppendBytes(m, gauge)
	var sm []byte
	sm = protowire.AppendTag(sm, 1, protowire.BytesType)
	sm = protowire.AppendBytes(sm, nil)
	sm = protowire.AppendTag(sm, 2, protowire.BytesType)
	sm = protowire.AppendBytes(sm, m)
	var rm []byte
	rm = protowire.AppendTag(rm, 2, protowire.BytesType)
	rm = protowire.AppendBytes(rm, sm)
	var req []byte
	req = protowire.AppendTag(req, 1, protowire.BytesType)
	return protowire.AppendBytes(req, rm)
}

// pushAnswer posts body to /v1/metrics and reads the answer: the status,
// the partial success (on 200) or the error message.
func pushAnswer(t *testing.T, col *collector, body []byte) (int, int64, string) {
	t.Helper()
	code, b := httpPost(t, col.url("/v1/metrics"), "application/x-protobuf", body)
	if code != http.StatusOK {
		return code, 0, string(b)
	}
	var r colmetricspb.ExportMetricsServiceResponse
	if err := proto.Unmarshal(b, &r); err != nil {
		t.Fatalf("answer: %v", err)
	}
	return code, r.GetPartialSuccess().GetRejectedDataPoints(), r.GetPartialSuccess().GetErrorMessage()
}

func TestHostilePushedMetrics(t *testing.T) {
	cfg := hostileConfig("")
	const tuples = "      max_tuples: 10000\n"
	if !strings.Contains(cfg, tuples) {
		t.Fatal("hostileConfig changed: cannot set limits.max_pushed_points")
	}
	cfg = strings.Replace(cfg, tuples, tuples+"      max_pushed_points: "+strconv.Itoa(hostilePushedPoints)+"\n", 1)
	h := startHostileRunWith(t, cfg)

	// 1. A million points in one push (11 MB on the wire, ~130 MB in
	// pdata): refused before it is decoded, naming the points.
	millionBody := wireGaugePush("cluster.upstream_cx_active", 1_000_000, nil)
	code, _, msg := pushAnswer(t, h.col, millionBody)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "1000000 data points") || !strings.Contains(msg, "max_request_bytes_in_flight") {
		t.Errorf("a million points in one push: %d %q, want 413 naming the points and the bound", code, msg)
	}

	// 2. 100,000 series in one push: the first max_pushed_points written,
	// the rest refused in the partial success.
	code, rejected, msg := pushAnswer(t, h.col, wireGaugePush("cluster.hostile_many", 100_000, func(i int) string { return "hostile-" + strconv.Itoa(i) }))
	if code != http.StatusOK || rejected != 100_000-hostilePushedPoints || !strings.Contains(msg, "limits.max_pushed_points") {
		t.Errorf("100,000 series: %d, %d rejected %q; want 200 with %d rejected naming limits.max_pushed_points", code, rejected, msg, 100_000-hostilePushedPoints)
	}

	// 3. Hostile names, labels and values beside one good point.
	hostile := []*metricspb.Metric{
		envoyGauge("cluster.hostile_good", []*metricspb.NumberDataPoint{gaugePoint(7, strAttr("envoy.cluster_name", "ok"))}),
		envoyGauge("cluster."+strings.Repeat("n", 2000), []*metricspb.NumberDataPoint{gaugePoint(1)}),
		envoyGauge(`cluster.é"{}\n# TYPE x counter`, []*metricspb.NumberDataPoint{gaugePoint(3, strAttr(`envoy.a"b\`, "v\"\n}"))}),
		envoyGauge("cluster.hostile_label", []*metricspb.NumberDataPoint{gaugePoint(1, strAttr("envoy.cluster_name", strings.Repeat("x", 100_000)))}),
		envoyGauge("cluster.hostile_nan", []*metricspb.NumberDataPoint{{Value: &metricspb.NumberDataPoint_AsDouble{AsDouble: math.NaN()}}}),
		envoyGauge("cluster.hostile_map", []*metricspb.NumberDataPoint{gaugePoint(1, &commonpb.KeyValue{Key: "envoy.m",
			Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{}}}})}),
	}
	var wide []*commonpb.KeyValue
	for i := range 64 {
		wide = append(wide, strAttr("envoy.t"+strconv.Itoa(i), "v"))
	}
	hostile = append(hostile, envoyGauge("cluster.hostile_wide", []*metricspb.NumberDataPoint{gaugePoint(1, wide...)}))
	code, rejected, msg = pushAnswer(t, h.col, envoyPush(hostile...))
	// Refused: the long name, the long label, NaN, the map, the 64 labels;
	// the odd name and label are sanitized and written, as Envoy would.
	if code != http.StatusOK || rejected != 5 || msg == "" {
		t.Errorf("hostile points: %d, %d rejected %q; want 200 with 5 rejected and why", code, rejected, msg)
	}
	t.Logf("hostile points answered: %d rejected, first: %s", rejected, msg)

	body, _, err := scrape(h.col.metricsURL())
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("the exposition after the hostile pushes does not parse: %v", err)
	}
	good := fams["envoy_cluster_hostile_good"]
	if good == nil || len(good.Metric) != 1 || good.Metric[0].GetGauge().GetValue() != 7 {
		t.Errorf("envoy_cluster_hostile_good: %v, want one series of 7", good)
	}
	if f := fams["envoy_cluster_hostile_many"]; f == nil || len(f.Metric) != hostilePushedPoints {
		n := 0
		if f != nil {
			n = len(f.Metric)
		}
		t.Errorf("envoy_cluster_hostile_many has %d series, want %d", n, hostilePushedPoints)
	}
	waitTelemetry(t, h.col, "otelcol_receiver_gateway_pushed_points", map[string]string{"outcome": "over_limit"}, 100_000-hostilePushedPoints)
	waitTelemetry(t, h.col, telemetryName, requestsOutcome("too_large"), 1)
	h.finish(t, pushedRSSBound, 0, scrapeBound)
}
