package gatewayreceiver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configauth"
	"go.opentelemetry.io/collector/config/confighttp"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

// fixtureMetrics reads an OTLP JSON metrics fixture of the gateway homes.
func fixtureMetrics(t testing.TB, name string) pmetric.Metrics {
	t.Helper()
	b, err := os.ReadFile("internal/gateway/testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	md, err := (&pmetric.JSONUnmarshaler{}).UnmarshalMetrics(b)
	if err != nil {
		t.Fatal(err)
	}
	return md
}

// mapped is what the gateway's home makes of md, called directly: what the
// receiver must forward.
func mapped(md pmetric.Metrics, kind gateway.Kind, origin string) pmetric.Metrics {
	out := pmetric.NewMetrics()
	o := gateway.MetricsOptions{Origin: origin}
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		var st gateway.MetricsStats
		gateway.MetricsOf(kind).Map(out, md.ResourceMetrics().At(i), &o, &st)
	}
	return out
}

func metricsProto(t testing.TB, md pmetric.Metrics) []byte {
	t.Helper()
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func metricsJSON(t testing.TB, md pmetric.Metrics) []byte {
	t.Helper()
	b, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postMetrics posts body to /v1/metrics.
func postMetrics(t *testing.T, addr, contentType string, body []byte, header ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+metricsURLPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// grpcMetrics calls MetricsService/Export with body.
func grpcMetrics(t *testing.T, addr string, body []byte, md ...string) (pmetricotlp.ExportResponse, error) {
	t.Helper()
	conn := dialGRPC(t, addr)
	var resp []byte
	ctx := context.Background()
	if len(md) > 0 {
		ctx = metadata.AppendToOutgoingContext(ctx, md...)
	}
	err := conn.Invoke(ctx, metricsExportMethod, &body, &resp, grpc.ForceCodecV2(bytesCodec{}))
	r := pmetricotlp.NewExportResponse()
	if err == nil {
		if uerr := r.UnmarshalProto(resp); uerr != nil {
			t.Fatal(uerr)
		}
	}
	return r, err
}

// assertSame fails unless got and want marshal to the same OTLP JSON.
func assertSame(t *testing.T, what string, got, want pmetric.Metrics) {
	t.Helper()
	g, _ := (&pmetric.JSONMarshaler{}).MarshalMetrics(got)
	w, _ := (&pmetric.JSONMarshaler{}).MarshalMetrics(want)
	if !bytes.Equal(g, w) {
		t.Errorf("%s: forwarded\n%s\nwant\n%s", what, g, w)
	}
}

func kongProfile(c *Config) { c.Profile = traffic.ProfileKong }

// TestPushedMetricsEveryTransport: Kong's pushed metrics (kong profile) and
// Envoy's stats sink, sent over HTTP protobuf, HTTP JSON, gzip and gRPC,
// reach the metrics pipeline as their home maps them, and are counted
// mapped.
func TestPushedMetricsEveryTransport(t *testing.T) {
	for _, fx := range []struct {
		file string
		kind gateway.Kind
	}{{"kong/kong-3.14-push.json", gateway.KindKong}, {"envoy/cluster-stats.push.json", gateway.KindEnvoy}} {
		md := fixtureMetrics(t, fx.file)
		want := mapped(md, fx.kind, "127.0.0.1")
		if want.DataPointCount() == 0 {
			t.Fatalf("%s maps to nothing", fx.file)
		}
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		_, _ = zw.Write(metricsProto(t, md))
		_ = zw.Close()
		sends := map[string]func(t *testing.T, h *harness){
			"http protobuf": func(t *testing.T, h *harness) {
				if code, b := postMetrics(t, h.httpAddr, pbContentType, metricsProto(t, md)); code != http.StatusOK {
					t.Fatalf("%d %q", code, b)
				}
			},
			"http json": func(t *testing.T, h *harness) {
				if code, b := postMetrics(t, h.httpAddr, jsonContentType, metricsJSON(t, md)); code != http.StatusOK {
					t.Fatalf("%d %q", code, b)
				}
			},
			"http gzip": func(t *testing.T, h *harness) {
				if code, b := postMetrics(t, h.httpAddr, pbContentType, gz.Bytes(), "Content-Encoding", "gzip"); code != http.StatusOK {
					t.Fatalf("%d %q", code, b)
				}
			},
			"grpc": func(t *testing.T, h *harness) {
				if _, err := grpcMetrics(t, h.grpcAddr, metricsProto(t, md)); err != nil {
					t.Fatal(err)
				}
			},
		}
		for name, send := range sends {
			t.Run(fx.kind.String()+" "+name, func(t *testing.T) {
				sink := new(consumertest.MetricsSink)
				h := start(t, sink, kongProfile)
				send(t, h)
				if len(sink.AllMetrics()) != 1 {
					t.Fatalf("%d exports forwarded, want 1", len(sink.AllMetrics()))
				}
				assertSame(t, name, sink.AllMetrics()[0], want)
				n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_pushed_points",
					attribute.String("gateway", fx.kind.String()), attribute.String("outcome", "mapped"))
				if n == 0 || n > int64(md.DataPointCount()) {
					t.Errorf("mapped points = %d, want 1..%d", n, md.DataPointCount())
				}
			})
		}
	}
}

// TestPushedKongOtelProfilePassesThrough: under the otel profile Kong's
// metrics keep their OpenTelemetry names: forwarded as sent.
func TestPushedKongOtelProfilePassesThrough(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	md := fixtureMetrics(t, "kong/kong-3.14-push.json")
	if code, b := postMetrics(t, h.httpAddr, pbContentType, metricsProto(t, md)); code != http.StatusOK {
		t.Fatalf("%d %q", code, b)
	}
	assertSame(t, "otel profile", sink.AllMetrics()[0], md)
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_pushed_points", attribute.String("outcome", "passed")); n != int64(md.DataPointCount()) {
		t.Errorf("passed points = %d, want %d", n, md.DataPointCount())
	}
}

// unknownMetrics is an SDK's push: no gateway home recognises it.
func unknownMetrics(points int) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr("service.name", "checkout")
	sm := rm.ScopeMetrics().AppendEmpty()
	sm.Scope().SetName("go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp")
	g := sm.Metrics().AppendEmpty()
	g.SetName("http.server.active_requests")
	dps := g.SetEmptyGauge().DataPoints()
	for i := range points {
		dps.AppendEmpty().SetIntValue(int64(i))
	}
	return md
}

// TestPushedUnknownGateway: an export only of metrics no home recognises is
// refused (400 / InvalidArgument naming what to do) and counted; one that
// also carries a gateway's metrics is a partial success: the gateway's are
// forwarded, the others counted as rejected in the answer.
func TestPushedUnknownGateway(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, kongProfile)
	code, b := postMetrics(t, h.httpAddr, jsonContentType, metricsJSON(t, unknownMetrics(1)))
	if code != http.StatusBadRequest || !bytes.Contains(b, []byte("no gateway home recognises")) || !bytes.Contains(b, []byte(`\"checkout\"`)) {
		t.Errorf("unknown only: %d %s, want 400 naming the service", code, b)
	}
	if _, err := grpcMetrics(t, h.grpcAddr, metricsProto(t, unknownMetrics(1))); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown only over gRPC: %v, want InvalidArgument", err)
	}
	mixed := fixtureMetrics(t, "envoy/cluster-stats.push.json")
	unknownMetrics(3).ResourceMetrics().At(0).CopyTo(mixed.ResourceMetrics().AppendEmpty())
	code, b = postMetrics(t, h.httpAddr, pbContentType, metricsProto(t, mixed))
	resp := pmetricotlp.NewExportResponse()
	if err := resp.UnmarshalProto(b); err != nil || code != http.StatusOK {
		t.Fatalf("mixed: %d %v", code, err)
	}
	if ps := resp.PartialSuccess(); ps.RejectedDataPoints() != 3 || !strings.Contains(ps.ErrorMessage(), "no gateway home") {
		t.Errorf("mixed: partial success %d %q, want 3 rejected, named", ps.RejectedDataPoints(), ps.ErrorMessage())
	}
	r, err := grpcMetrics(t, h.grpcAddr, metricsProto(t, mixed))
	if err != nil || r.PartialSuccess().RejectedDataPoints() != 3 {
		t.Errorf("mixed over gRPC: %v, rejected %d, want 3", err, r.PartialSuccess().RejectedDataPoints())
	}
	if len(sink.AllMetrics()) != 2 {
		t.Fatalf("%d exports forwarded, want the 2 mixed ones", len(sink.AllMetrics()))
	}
	assertSame(t, "mixed", sink.AllMetrics()[0], mapped(fixtureMetrics(t, "envoy/cluster-stats.push.json"), gateway.KindEnvoy, "127.0.0.1"))
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_pushed_points", attribute.String("gateway", "unknown"), attribute.String("outcome", "unknown_gateway")); n != 8 {
		t.Errorf("unknown_gateway points = %d, want 8", n)
	}
	for outcome, want := range map[string]int64{"malformed": 2, "partially_accepted": 2} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", outcome)); n != want {
			t.Errorf("requests{outcome=%s} = %d, want %d", outcome, n, want)
		}
	}
}

// TestPushedMetricsBadInput: malformed, oversized, corrupt gzip and
// element floods are refused with their reason and counted; nothing is
// forwarded, and the next push is served.
func TestPushedMetricsBadInput(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Profile = traffic.ProfileKong
		c.Protocols.HTTP.Get().MaxRequestBodySize = 1 << 20
		c.Limits.MaxRequestBytesInFlight = 4 << 20
	})
	// 400k empty gauge points: 800 KB on the wire, ~45 MB in pdata.
	flood := pmetric.NewMetrics()
	dps := flood.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints()
	for range 400_000 {
		dps.AppendEmpty()
	}
	cases := []struct {
		name, ct string
		body     []byte
		header   []string
		code     int
		want     string
	}{
		{"garbage protobuf", pbContentType, []byte{0xff, 0xff, 0xff}, nil, http.StatusBadRequest, "malformed OTLP protobuf metrics body"},
		{"truncated JSON", jsonContentType, []byte(`{"resourceMetrics": [`), nil, http.StatusBadRequest, "malformed OTLP JSON"},
		{"text", "text/plain", []byte("x"), nil, http.StatusUnsupportedMediaType, "unsupported Content-Type"},
		{"oversized", pbContentType, make([]byte, 2<<20), nil, http.StatusRequestEntityTooLarge, "max_request_body_size"},
		{"corrupt gzip", pbContentType, []byte("not gzip"), []string{"Content-Encoding", "gzip"}, http.StatusBadRequest, ""},
		{"point flood", pbContentType, metricsProto(t, flood), nil, http.StatusRequestEntityTooLarge, "400000 data points"},
	}
	for _, c := range cases {
		if code, b := postMetrics(t, h.httpAddr, c.ct, c.body, c.header...); code != c.code || !bytes.Contains(b, []byte(c.want)) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, code, b, c.code, c.want)
		}
	}
	if _, err := grpcMetrics(t, h.grpcAddr, []byte{0xff, 0xff, 0xff}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed OTLP protobuf metrics message") {
		t.Errorf("garbage over gRPC: %v, want InvalidArgument", err)
	}
	if _, err := grpcMetrics(t, h.grpcAddr, metricsProto(t, flood)); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("point flood over gRPC: %v, want ResourceExhausted", err)
	}
	if n := len(sink.AllMetrics()); n != 0 {
		t.Errorf("%d exports forwarded, want none", n)
	}
	md := fixtureMetrics(t, "kong/kong-3.14-push.json")
	if code, b := postMetrics(t, h.httpAddr, pbContentType, metricsProto(t, md)); code != http.StatusOK {
		t.Fatalf("good push after bad ones: %d %q", code, b)
	}
	// gRPC's own refusals are counted as its call ends (refusalCounter).
	waitFor(t, func() bool {
		return testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "grpc"), attribute.String("outcome", "too_large")) == 1
	})
	for outcome, want := range map[string]int64{"malformed": 4, "too_large": 3, "unsupported_media_type": 1, "accepted": 1} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", outcome)); n != want {
			t.Errorf("requests{outcome=%s} = %d, want %d", outcome, n, want)
		}
	}
}

// TestPushedMetricsPartialSuccess: points the sender got wrong are dropped,
// named in the partial success, and counted; the rest are forwarded.
func TestPushedMetricsPartialSuccess(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Limits.MaxPushedLabelBytes = 16 })
	md := fixtureMetrics(t, "envoy/cluster-stats.push.json")
	code, b := postMetrics(t, h.httpAddr, jsonContentType, metricsJSON(t, md))
	if code != http.StatusOK || !bytes.Contains(b, []byte(`"rejectedDataPoints"`)) || !bytes.Contains(b, []byte("longer than 16 bytes")) {
		t.Fatalf("%d %s, want a partial success", code, b)
	}
	n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_pushed_points", attribute.String("outcome", "label_too_long"))
	if n == 0 {
		t.Error("no label_too_long points counted")
	}
	if m := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_pushed_points", attribute.String("outcome", "mapped")); m+n != int64(md.DataPointCount()) {
		t.Errorf("mapped %d + label_too_long %d != %d points sent", m, n, md.DataPointCount())
	}
}

// TestPushedMetricsAuth: the servers' authenticators guard /v1/metrics and
// MetricsService as they guard traces.
func TestPushedMetricsAuth(t *testing.T) {
	authID := component.MustNewID("tokenauth")
	sink := new(consumertest.MetricsSink)
	h := startOn(t, testutil.ExtHost{authID: headerAuth{&tokenAuth{token: "s3cret"}}}, sink, func(c *Config) {
		c.Protocols.GRPC.Get().Auth = configoptional.Some(configauth.Config{AuthenticatorID: authID})
		c.Protocols.HTTP.Get().Auth = configoptional.Some(confighttp.AuthConfig{Config: configauth.Config{AuthenticatorID: authID}})
	})
	body := metricsProto(t, fixtureMetrics(t, "envoy/cluster-stats.push.json"))
	if code, _ := postMetrics(t, h.httpAddr, pbContentType, body); code != http.StatusUnauthorized {
		t.Errorf("HTTP without token: %d, want 401", code)
	}
	if _, err := grpcMetrics(t, h.grpcAddr, body); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC without token: %v, want Unauthenticated", err)
	}
	if code, b := postMetrics(t, h.httpAddr, pbContentType, body, "Authorization", "Bearer s3cret"); code != http.StatusOK {
		t.Errorf("HTTP with token: %d %q", code, b)
	}
	if _, err := grpcMetrics(t, h.grpcAddr, body, "authorization", "Bearer s3cret"); err != nil {
		t.Errorf("gRPC with token: %v", err)
	}
	if n := len(sink.AllMetrics()); n != 2 {
		t.Errorf("%d exports forwarded, want the 2 authenticated", n)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "unauthenticated")); n != 2 {
		t.Errorf("unauthenticated = %d, want 2", n)
	}
}

// headerAuth is tokenAuth for HTTP too, whose header keys are canonical.
type headerAuth struct{ *tokenAuth }

func (a headerAuth) Authenticate(ctx context.Context, headers map[string][]string) (context.Context, error) {
	if v, ok := headers["Authorization"]; ok {
		headers = map[string][]string{"authorization": v}
	}
	return a.tokenAuth.Authenticate(ctx, headers)
}

// TestPushedMetricsWithoutMetricsPipeline: a receiver only in a traces
// pipeline says why it takes no metrics.
func TestPushedMetricsWithoutMetricsPipeline(t *testing.T) {
	h := start(t, nil, nil)
	h.r.useTraces(new(consumertest.TracesSink))
	body := metricsProto(t, fixtureMetrics(t, "envoy/cluster-stats.push.json"))
	if code, b := postMetrics(t, h.httpAddr, pbContentType, body); code != http.StatusNotFound || !bytes.Contains(b, []byte("no metrics pipeline")) {
		t.Errorf("HTTP: %d %q, want 404 naming the pipeline", code, b)
	}
	if _, err := grpcMetrics(t, h.grpcAddr, body); status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "no metrics pipeline") {
		t.Errorf("gRPC: %v, want Unimplemented naming the pipeline", err)
	}
}

// TestPushedMetricsPipelineRefusal: a refusal downstream is the sender's to
// retry (503 / Unavailable).
func TestPushedMetricsPipelineRefusal(t *testing.T) {
	h := start(t, consumertest.NewErr(errBusyDownstream), nil)
	body := metricsProto(t, fixtureMetrics(t, "envoy/cluster-stats.push.json"))
	if code, b := postMetrics(t, h.httpAddr, pbContentType, body); code != http.StatusServiceUnavailable || !bytes.Contains(b, []byte("metrics pipeline refused")) {
		t.Errorf("HTTP: %d %q, want 503", code, b)
	}
	if _, err := grpcMetrics(t, h.grpcAddr, body); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC: %v, want Unavailable", err)
	}
}

var errBusyDownstream = io.ErrShortWrite

// kongRequestsByRoute sums kong_http_requests_total by route over every
// export the sink got, pushed (cumulative) and span-derived (delta) alike.
func kongRequestsByRoute(all []pmetric.Metrics) map[string]int64 {
	got := map[string]int64{}
	for _, md := range all {
		rms := md.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			ms := rms.At(i).ScopeMetrics().At(0).Metrics()
			for j := 0; j < ms.Len(); j++ {
				if m := ms.At(j); m.Name() == "kong_http_requests_total" {
					for k := 0; k < m.Sum().DataPoints().Len(); k++ {
						dp := m.Sum().DataPoints().At(k)
						got[attrString(dp.Attributes(), "route")] += dp.IntValue()
					}
				}
			}
		}
	}
	return got
}

// kongNodeSpans is one Kong request on route from node (its
// service.instance.id, as Kong sets it).
func kongNodeSpans(t *testing.T, node, route string) []byte {
	td := kongExport("GET", route, 200)
	td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.instance.id", node)
	return protoBody(t, td)
}

// TestPushedKongMetricsWinOverSpans: once a Kong node pushes its metrics
// (kong profile), its spans and every http-log entry (they name no node)
// are no longer counted into the families the push carries (superseded);
// another node's spans still are, and so are the node's once its claim has
// expired.
func TestPushedKongMetricsWinOverSpans(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, kongProfile)
	now := time.Now()
	h.r.ingest.pushed.now = func() time.Time { return now }
	md := fixtureMetrics(t, "kong/kong-3.14-push.json")
	node := attrString(md.ResourceMetrics().At(0).Resource().Attributes(), "service.instance.id")
	if code, b := postMetrics(t, h.httpAddr, pbContentType, metricsProto(t, md)); code != http.StatusOK {
		t.Fatalf("push: %d %q", code, b)
	}
	for _, s := range []struct{ node, route string }{{node, "/pushed-node"}, {"other-node", "/other-node"}} {
		if code, b := post(t, h.httpAddr, pbContentType, kongNodeSpans(t, s.node, s.route)); code != http.StatusOK {
			t.Fatalf("spans: %d %s", code, b)
		}
	}
	entry := `{"route":{"name":"logged"},"service":{"name":"s"},"request":{"method":"GET","size":10},"response":{"status":200,"size":20},"latencies":{"request":5,"kong":1,"proxy":4},"workspace_name":"default"}`
	if code := postTo(t, h.httpAddr, kongLogURLPath, entry); code != http.StatusOK {
		t.Fatalf("log: %d", code)
	}
	now = now.Add(kongClaimTTL + time.Second) // the claim has expired
	if code, b := post(t, h.httpAddr, pbContentType, kongNodeSpans(t, node, "/after-expiry")); code != http.StatusOK {
		t.Fatalf("spans: %d %s", code, b)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := kongRequestsByRoute(sink.AllMetrics())
	want := map[string]int64{"example-route": 8, "/other-node": 1, "/after-expiry": 1}
	for route, n := range want {
		if got[route] != n {
			t.Errorf("kong_http_requests_total{route=%q} = %d, want %d (all: %v)", route, got[route], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("routes %v, want only %v: the pushing node's spans and the log entry must not count", got, want)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_events", attribute.String("outcome", "superseded")); n != 2 {
		t.Errorf("superseded events = %d, want 2 (the node's span, the log entry)", n)
	}
}

// postTo posts a JSON body to path and returns the status.
func postTo(t *testing.T, addr, path, body string) int {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, jsonContentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestPushedMetricsOverLimit: a push of more series than
// limits.max_pushed_points is written up to it; the rest are refused in the
// partial success, which says which limit and what to do.
func TestPushedMetricsOverLimit(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Limits.MaxPushedPoints = 10 })
	md := pmetric.NewMetrics()
	m := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics().AppendEmpty()
	m.SetName("cluster.upstream_cx_active")
	dps := m.SetEmptyGauge().DataPoints()
	for i := range 25 {
		p := dps.AppendEmpty()
		p.SetIntValue(1)
		p.Attributes().PutStr("envoy.cluster_name", "c"+strconv.Itoa(i))
	}
	r, err := grpcMetrics(t, h.grpcAddr, metricsProto(t, md))
	if err != nil {
		t.Fatal(err)
	}
	if ps := r.PartialSuccess(); ps.RejectedDataPoints() != 15 || !strings.Contains(ps.ErrorMessage(), "limits.max_pushed_points (10") {
		t.Errorf("partial success %d %q, want 15 rejected naming limits.max_pushed_points", ps.RejectedDataPoints(), ps.ErrorMessage())
	}
	if n := sink.AllMetrics()[0].DataPointCount(); n != 10 {
		t.Errorf("%d points forwarded, want 10", n)
	}
}

// TestPushedMetricsAdmission: pushed metrics wait in turn for room in
// limits.max_request_bytes_in_flight as traces do, over HTTP and gRPC, and
// are refused (429 / Unavailable, throttled) when the wait passes
// limits.admission_queue_timeout.
func TestPushedMetricsAdmission(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Limits.MaxRequestBytesInFlight = 64 << 10
		c.Limits.AdmissionQueueTimeout = time.Minute
	})
	body := metricsProto(t, fixtureMetrics(t, "envoy/cluster-stats.push.json"))
	sends := map[string]func() error{
		"http": func() error {
			if code, b := postMetrics(t, h.httpAddr, pbContentType, body); code != http.StatusOK {
				return errors.New(string(b))
			}
			return nil
		},
		"grpc": func() error { _, err := grpcMetrics(t, h.grpcAddr, body); return err },
	}
	for name, send := range sends {
		held := holdBytes(t, h, 64<<10)
		done := make(chan error, 1)
		go func() { done <- send() }()
		waitFor(t, func() bool { return h.r.ingest.admit.Waiting() == 1 })
		select {
		case err := <-done:
			t.Fatalf("%s answered while the bound was held: %v", name, err)
		default:
		}
		held.Release()
		if err := <-done; err != nil {
			t.Errorf("%s after waiting: %v", name, err)
		}
	}
	if n := len(sink.AllMetrics()); n != 2 {
		t.Errorf("%d pushes forwarded, want 2", n)
	}
}

// TestPushedMetricsThrottled: a push that finds no room within
// limits.admission_queue_timeout is refused with 429 and Retry-After
// (gRPC Unavailable), counted throttled, and forwards nothing.
func TestPushedMetricsThrottled(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Limits.MaxRequestBytesInFlight = 64 << 10
		c.Limits.AdmissionQueueTimeout = 50 * time.Millisecond
	})
	held := holdBytes(t, h, 64<<10)
	defer held.Release()
	body := metricsProto(t, fixtureMetrics(t, "envoy/cluster-stats.push.json"))
	if code, b := postMetrics(t, h.httpAddr, pbContentType, body); code != http.StatusTooManyRequests || !bytes.Contains(b, []byte("admission_queue_timeout")) {
		t.Errorf("HTTP: %d %q, want 429 naming admission_queue_timeout", code, b)
	}
	if _, err := grpcMetrics(t, h.grpcAddr, body); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC: %v, want Unavailable", err)
	}
	if n := len(sink.AllMetrics()); n != 0 {
		t.Errorf("%d pushes forwarded, want none", n)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "throttled")); n != 2 {
		t.Errorf("throttled = %d, want 2", n)
	}
}
