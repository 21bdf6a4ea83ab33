package gatewayreceiver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap/zapcore"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/traffic"
)

func postPath(t *testing.T, addr, path, contentType, body string) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+path, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestLogEndpoints: Kong http-log and APISIX http-logger batches over HTTP;
// a bad entry rejects only itself and the answer says what was accepted.
func TestLogEndpoints(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	kong, err := os.ReadFile("testdata/kong-3.8-http-log.json")
	if err != nil {
		t.Fatal(err)
	}
	apisix, err := os.ReadFile("testdata/apisix-3.9-http-logger.json")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, contentType, body string
		code                    int
		answer                  string
	}{
		{kongLogURLPath, jsonContentType, string(kong), 200, `{"accepted":1,"rejected":0}`},
		{kongLogURLPath, "application/json; charset=utf-8", "[" + string(kong) + `,{"response":{}},` + string(kong) + "]", 200,
			`{"accepted":2,"rejected":1,"errors":["entry 1: response.status is missing"]}`},
		{kongLogURLPath, jsonContentType, `[{"response":{"status":"x"}}]`, 400,
			`{"accepted":0,"rejected":1,"errors":["entry 0: want a number, got \"x\""]}`},
		{kongLogURLPath, jsonContentType, `{"response":`, 400,
			`{"code":3,"message":"malformed kong_http_log body: body is not a JSON object, array or newline-delimited objects\nunexpected EOF"}`},
		{kongLogURLPath, "application/x-www-form-urlencoded", "a=b", 415,
			`{"code":12,"message":"unsupported Content-Type \"application/x-www-form-urlencoded\" on /kong/http-log, use application/json"}`},
		{apisixLogURLPath, jsonContentType, string(apisix), 200, `{"accepted":1,"rejected":0}`},
		{apisixLogURLPath, "text/plain", `{"response":{"status":200},"route_id":"1","latency":5}` + "\n" + `{"response":{"status":503},"route_id":"1","latency":1}`, 200,
			`{"accepted":2,"rejected":0}`},
	}
	for _, c := range cases {
		code, body := postPath(t, h.httpAddr, c.path, c.contentType, c.body)
		// protojson (the google.rpc.Status of refused requests) varies its
		// whitespace on purpose: compare compacted JSON.
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(body)); err == nil {
			body = compact.String()
		}
		if code != c.code || body != c.answer {
			t.Errorf("POST %s %.40q: %d %s\nwant %d %s", c.path, c.body, code, body, c.code, c.answer)
		}
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// otel profile: the log entries counted under gateway.requests (resource
	// empty: logs carry no service.name; route = the route's first path or
	// the matched uri, which APISIX logs do not carry).
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{
		" GET /example-route 200": 3,
		" GET  200":               1,
		"   200":                  1,
		"   503":                  1,
	})
	for _, c := range []struct {
		format, outcome string
		want            int64
	}{{"kong_http_log", "accepted", 3}, {"kong_http_log", "rejected", 2}, {"apisix_http_logger", "accepted", 3}} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_log_entries", attribute.String("format", c.format), attribute.String("outcome", c.outcome)); n != c.want {
			t.Errorf("log entries %s/%s = %d, want %d", c.format, c.outcome, n, c.want)
		}
	}
	for outcome, want := range map[string]int64{"accepted": 3, "partially_accepted": 1, "malformed": 2, "unsupported_media_type": 1} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", outcome)); n != want {
			t.Errorf("requests{outcome=%q} = %d, want %d", outcome, n, want)
		}
	}
}

// TestMaxSeriesOverflow: past max_series tuples, new tuples fold into the
// otel.metric.overflow tuple; known tuples keep counting.
func TestMaxSeriesOverflow(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Limits.MaxTuples = 2 })
	ctx := context.Background()
	for _, route := range []string{"/a", "/b", "/c", "/d", "/a"} {
		if err := h.r.ingest.traces(ctx, kongExport("GET", route, 200)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	md := sink.AllMetrics()[0]
	dps := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints()
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if _, ok := dp.Attributes().Get("otel.metric.overflow"); ok {
			got["overflow"] += dp.IntValue()
			if dp.Attributes().Len() != 1 {
				t.Errorf("overflow point attributes %v, want only otel.metric.overflow", dp.Attributes().AsRaw())
			}
			continue
		}
		r, _ := dp.Attributes().Get(attrRoute)
		got[r.Str()] += dp.IntValue()
	}
	want := map[string]int64{"/a": 2, "/b": 1, "overflow": 2}
	assertCounts(t, got, want)
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_events", attribute.String("outcome", "overflow")); n != 2 {
		t.Errorf("overflow events = %d, want 2", n)
	}
	// Said in the log too: at the first fold (with the bound, the key to
	// raise and its cost), and at shutdown what was folded since.
	logs := h.logs.FilterMessageSnippet("limits.max_tuples").All()
	if len(logs) != 2 || logs[0].Level != zapcore.WarnLevel ||
		logs[0].Message != "limits.max_tuples reached: requests of new label tuples are counted under their gateway's otel.metric.overflow series, "+
			"without route, method or status, until held tuples go 5m0s (tuple_expiry) without a request; raise limits.max_tuples to keep them apart" {
		t.Fatalf("fold log lines %v, want the first fold's and the one at shutdown", logs)
	}
	if f := logs[0].ContextMap(); f["limits.max_tuples"] != int64(2) || f["events_folded"] != int64(1) || f["cost"] != tupleCost[traffic.ProfileOTel] {
		t.Errorf("first fold log fields %v", f)
	}
	if f := logs[1].ContextMap(); f["events_folded_since_last_log"] != int64(1) || f["events_folded_total"] != int64(2) {
		t.Errorf("shutdown fold log fields %v", f)
	}
}

// TestKongProfileSkipsRoutelessRequests: Kong's plugin does not count a
// request without a matched route; neither does the kong profile, and the
// event is counted as not_counted. The balancer span succeeded: source is
// "service".
func TestKongProfileSkipsRoutelessRequests(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Profile = traffic.ProfileKong })
	ctx := context.Background()
	_ = h.r.ingest.traces(ctx, kongExport("GET", "", 200))
	_ = h.r.ingest.traces(ctx, kongExport("GET", "/r", 200))
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_events", attribute.String("outcome", "not_counted")); n != 1 {
		t.Errorf("not_counted = %d, want 1", n)
	}
	m := sink.AllMetrics()[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0)
	if m.Name() != "kong_http_requests_total" || m.Sum().DataPoints().Len() != 1 || m.Sum().DataPoints().At(0).IntValue() != 1 {
		t.Fatalf("got %s with %d points", m.Name(), m.Sum().DataPoints().Len())
	}
	want := map[string]any{"service": "", "route": "/r", "code": "200", "source": "service", "workspace": "default", "consumer": ""}
	got := m.Sum().DataPoints().At(0).Attributes().AsRaw()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %v, want %v (all %v)", k, got[k], v, got)
		}
	}
}

// TestTracesPassThrough: in a traces pipeline too, the receiver hands the
// spans it received on unchanged, and still counts them.
func TestTracesPassThrough(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	traces := new(consumertest.TracesSink)
	h := start(t, sink, nil)
	h.r.useTraces(traces)
	td := kongExport("GET", "/p", 200)
	want := td.SpanCount()
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, td)); code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if traces.SpanCount() != want || traces.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Name() != "kong.balancer" {
		t.Fatalf("passed %d spans, want %d unchanged", traces.SpanCount(), want)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /p 200": 1})
}

// The log paths the README documents (the gateways' homes declare them).
const (
	kongLogURLPath   = "/kong/http-log"
	apisixLogURLPath = "/apisix/http-logger"
)

// A batch of 100,000 bad entries and one good one: 200, the good one
// counted, every bad one counted rejected, the first ones listed and the
// rest summed up in the answer (the decoder lists no more than that: 20
// MiB of empty entries once took 880 MB to list).
func TestManyBadLogEntriesAreCountedNotListed(t *testing.T) {
	const bad = 100_000
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	good := `{"request":{"method":"GET"},"response":{"status":200},"route":{"name":"many"},"service":{"name":"svc"}}`
	body := "[" + strings.Repeat("{},", bad) + good + "]"
	code, msg := postPath(t, h.httpAddr, "/kong/http-log", "application/json", body)
	var ans logAnswer
	if err := json.Unmarshal([]byte(msg), &ans); err != nil || code != http.StatusOK {
		t.Fatalf("%d %s (%v)", code, msg, err)
	}
	if ans.Accepted != 1 || ans.Rejected != bad || len(ans.Errors) != maxListedErrors+1 ||
		ans.Errors[maxListedErrors] != "… 99990 more" || !strings.HasPrefix(ans.Errors[0], "entry 0: ") {
		t.Fatalf("answer %+v", ans)
	}
	for outcome, want := range map[string]int64{"accepted": 1, "rejected": bad} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_log_entries", attribute.String("outcome", outcome)); n != want {
			t.Errorf("%s log entries = %d, want %d", outcome, n, want)
		}
	}
}
