package gatewayreceiver

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/otelgateway/otelgateway/internal/metadatacheck"
	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/gateway"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/metadata"
)

// The otel profile's request counter and its attributes.
const (
	metricRequests = "gateway.requests"
	attrRoute      = "http.route"
	attrMethod     = "http.request.method"
	attrStatusCode = "http.response.status_code"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type harness struct {
	r        *gatewayReceiver
	tel      *componenttest.Telemetry
	httpAddr string
	grpcAddr string
	// logs are the receiver's log lines at info and above.
	logs *observer.ObservedLogs
}

// start runs a receiver on free loopback ports. The flush interval is long
// unless the test changes it, so counts reach next at Shutdown, exactly once.
func start(t *testing.T, next consumer.Metrics, mutate func(*Config)) *harness {
	t.Helper()
	return startOn(t, componenttest.NewNopHost(), next, mutate)
}

// startOn is start on a host (one with extensions).
func startOn(t *testing.T, host component.Host, next consumer.Metrics, mutate func(*Config)) *harness {
	t.Helper()
	h := &harness{tel: componenttest.NewTelemetry(), httpAddr: testutil.FreeAddr(t), grpcAddr: testutil.FreeAddr(t)}
	cfg := createDefaultConfig()
	// Tests compare exact series; the collector label has its own tests
	// (identity_test.go).
	cfg.CollectorLabel = ""
	cfg.Protocols.HTTP.Get().NetAddr.Endpoint = h.httpAddr
	cfg.Protocols.GRPC.Get().NetAddr.Endpoint = h.grpcAddr
	cfg.FlushInterval = time.Hour
	if mutate != nil {
		mutate(cfg)
	}
	set := receivertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = h.tel.NewTelemetrySettings()
	var core zapcore.Core
	core, h.logs = observer.New(zapcore.InfoLevel)
	set.Logger = zap.New(core)
	r, err := newReceiver(cfg, set, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), host); err != nil {
		t.Fatal(err)
	}
	h.r = r
	t.Cleanup(func() {
		_ = r.Shutdown(context.Background())
		// Whatever the test recorded must agree with metadata.yaml (but for
		// the values of a test-only gateway, which the yaml does not list).
		if len(gateway.Gateways()) == builtinGateways {
			metadatacheck.Attributes(t, metadatacheck.Read(t, "metadata.yaml"), h.tel)
		}
		_ = h.tel.Shutdown(context.Background())
	})
	return h
}

// kongExport is one Kong ≥ 3.4 request: the `kong` root SERVER span and its
// balancer child (docs/gateways.md §1a).
func kongExport(method, route string, status int64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "kong")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("kong-internal")
	root := ss.Spans().AppendEmpty()
	root.SetName("kong")
	root.SetKind(ptrace.SpanKindServer)
	root.SetTraceID(pcommon.TraceID{1})
	root.SetSpanID(pcommon.SpanID{1})
	root.Attributes().PutStr("http.method", method)
	root.Attributes().PutStr("http.route", route)
	root.Attributes().PutInt("http.status_code", status)
	child := ss.Spans().AppendEmpty()
	child.SetName("kong.balancer")
	child.SetKind(ptrace.SpanKindClient)
	child.SetTraceID(pcommon.TraceID{1})
	child.SetSpanID(pcommon.SpanID{2})
	child.SetParentSpanID(pcommon.SpanID{1})
	return td
}

func post(t *testing.T, addr, contentType string, body []byte) (int, string) {
	t.Helper()
	resp, err := http.Post("http://"+addr+tracesURLPath, contentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func protoBody(t testing.TB, td ptrace.Traces) []byte {
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonBody(t testing.TB, td ptrace.Traces) []byte {
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countsOf sums the delta points of gateway.requests by (service, method,
// route, status).
func countsOf(t *testing.T, all []pmetric.Metrics) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	for _, md := range all {
		for i := 0; i < md.ResourceMetrics().Len(); i++ {
			rm := md.ResourceMetrics().At(i)
			svc := attrString(rm.Resource().Attributes(), "service.name")
			m := rm.ScopeMetrics().At(0).Metrics().At(0)
			if m.Name() != metricRequests || m.Sum().AggregationTemporality() != pmetric.AggregationTemporalityDelta || !m.Sum().IsMonotonic() {
				t.Fatalf("unexpected metric %s %v", m.Name(), m.Type())
			}
			for j := 0; j < m.Sum().DataPoints().Len(); j++ {
				dp := m.Sum().DataPoints().At(j)
				a := dp.Attributes()
				key := svc + " " + attrString(a, attrMethod) + " " + attrString(a, attrRoute) + " " + attrString(a, attrStatusCode)
				got[key] += dp.IntValue()
			}
		}
	}
	return got
}

func attrString(m pcommon.Map, k string) string {
	if v, ok := m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

func assertCounts(t *testing.T, got, want map[string]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d label sets %v, want %d %v", len(got), got, len(want), want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("count[%q] = %d, want %d", k, got[k], v)
		}
	}
}

func TestHTTPProtobufAndJSONAreCounted(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	for range 3 {
		if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, kongExport("GET", "/anything", 200))); code != http.StatusOK {
			t.Fatalf("protobuf export: %d %s", code, body)
		}
	}
	code, body := post(t, h.httpAddr, "application/json; charset=utf-8", jsonBody(t, kongExport("POST", "/anything", 201)))
	if code != http.StatusOK || body != `{"partialSuccess":{}}` {
		t.Fatalf("JSON export: %d %q, want 200 with an empty ExportTraceServiceResponse", code, body)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{
		"kong GET /anything 200":  3,
		"kong POST /anything 201": 1,
	})
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "accepted")); n != 4 {
		t.Errorf("accepted requests = %d, want 4", n)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_spans", attribute.String("outcome", "ignored")); n != 4 {
		t.Errorf("ignored spans = %d, want 4 (one balancer span per export)", n)
	}
}

func TestGRPCExportIsCounted(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	for range 2 {
		if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(kongExport("DELETE", "/items", 204))); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong DELETE /items 204": 2})
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "grpc")); n != 2 {
		t.Errorf("grpc requests = %d, want 2", n)
	}
}

func TestHTTPBadInput(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Protocols.HTTP.Get().MaxRequestBodySize = 1024 })
	cases := []struct {
		name        string
		method      string
		contentType string
		body        []byte
		wantCode    int
		wantBody    string
		outcome     string
	}{
		{"garbage protobuf", http.MethodPost, pbContentType, []byte{0xff, 0xff, 0xff}, http.StatusBadRequest, "malformed OTLP protobuf body", "malformed"},
		{"truncated JSON", http.MethodPost, jsonContentType, []byte(`{"resourceSpans": [`), http.StatusBadRequest, "malformed OTLP JSON body", "malformed"},
		{"wrong content type", http.MethodPost, "text/plain", []byte("hello"), http.StatusUnsupportedMediaType, `unsupported Content-Type \"text/plain\"`, "unsupported_media_type"},
		{"no content type", http.MethodPost, "", []byte("{}"), http.StatusUnsupportedMediaType, `unsupported Content-Type \"\"`, "unsupported_media_type"},
		{"oversized", http.MethodPost, jsonContentType, bytes.Repeat([]byte(" "), 4096), http.StatusRequestEntityTooLarge, "exceeds max_request_body_size (1024 bytes)", "too_large"},
		{"GET", http.MethodGet, "", nil, http.StatusMethodNotAllowed, "GET not allowed", "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, "http://"+h.httpAddr+tracesURLPath, bytes.NewReader(c.body))
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.wantCode || !bytes.Contains(b, []byte(c.wantBody)) {
				t.Errorf("got %d %q, want %d containing %q", resp.StatusCode, b, c.wantCode, c.wantBody)
			}
		})
	}
	// The receiver keeps serving, and the bad requests changed no count.
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, kongExport("GET", "/ok", 200))); code != http.StatusOK {
		t.Fatalf("valid export after bad ones: %d %s", code, body)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
	for outcome, want := range map[string]int64{"malformed": 2, "unsupported_media_type": 2, "too_large": 1, "method_not_allowed": 1, "accepted": 1} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", outcome)); n != want {
			t.Errorf("requests{outcome=%q} = %d, want %d", outcome, n, want)
		}
	}
}

func TestCorruptGzipIsRejected(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), nil)
	req, _ := http.NewRequest(http.MethodPost, "http://"+h.httpAddr+tracesURLPath, bytes.NewReader([]byte("not gzip")))
	req.Header.Set("Content-Type", jsonContentType)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("corrupt gzip: %d, want 400", resp.StatusCode)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "malformed")); n != 1 {
		t.Errorf("malformed = %d, want 1", n)
	}
}

// TestFirstWindowAfterAColdStartStartsAtItsEnd: without a window carried
// over from storage, the first flushed window starts just before it ends,
// so its streams' start (their created time downstream) is after any scrape
// that found nothing before it (receiver.go, flush); later windows start
// where the one before ended. With a checkpoint's window carried over the
// start is the checkpoint's (TestCrashLosesOnlyTheOpenWindow).
func TestFirstWindowAfterAColdStartStartsAtItsEnd(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	ctx := context.Background()
	h.r.ingest(ctx, kongExport("GET", "/a", 200))
	h.r.flush(ctx)
	h.r.ingest(ctx, kongExport("GET", "/a", 200))
	h.r.flush(ctx)
	all := sink.AllMetrics()
	if len(all) != 2 {
		t.Fatalf("%d batches, want 2", len(all))
	}
	first := all[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	second := all[1].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if first.StartTimestamp() != first.Timestamp()-1 {
		t.Errorf("first window [%v, %v]: want it to start 1ns before its end", first.StartTimestamp(), first.Timestamp())
	}
	if second.StartTimestamp() != first.Timestamp() {
		t.Errorf("second window starts at %v, want the first's end %v", second.StartTimestamp(), first.Timestamp())
	}
}

func TestPeriodicFlushEmitsDeltas(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.FlushInterval = 20 * time.Millisecond })
	h.r.ingest(context.Background(), kongExport("GET", "/a", 200))
	waitFor(t, func() bool { return len(sink.AllMetrics()) == 1 })
	h.r.ingest(context.Background(), kongExport("GET", "/a", 200))
	waitFor(t, func() bool { return len(sink.AllMetrics()) == 2 })

	all := sink.AllMetrics()
	first := all[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	second := all[1].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if first.IntValue() != 1 || second.IntValue() != 1 {
		t.Fatalf("delta values %d, %d; want 1, 1", first.IntValue(), second.IntValue())
	}
	// Consecutive delta windows must tile time: the second starts where the
	// first ended.
	if second.StartTimestamp() != first.Timestamp() || first.StartTimestamp() >= first.Timestamp() {
		t.Fatalf("windows [%v, %v] and [%v, %v] do not tile", first.StartTimestamp(), first.Timestamp(), second.StartTimestamp(), second.Timestamp())
	}
}

// flakyConsumer fails its first calls with err, then records like a sink.
type flakyConsumer struct {
	consumertest.MetricsSink
	mu       sync.Mutex
	failures int
	err      error
}

func (f *flakyConsumer) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	f.mu.Lock()
	if f.failures > 0 {
		f.failures--
		f.mu.Unlock()
		return f.err
	}
	f.mu.Unlock()
	return f.MetricsSink.ConsumeMetrics(ctx, md)
}

func TestRetryableFlushErrorKeepsCounts(t *testing.T) {
	next := &flakyConsumer{failures: 1, err: errors.New("downstream busy")}
	h := start(t, next, nil)
	ctx := context.Background()
	h.r.ingest(ctx, kongExport("GET", "/a", 200))
	h.r.flush(ctx) // refused: counts go back
	// The start the refused window was sent with (the first window after a
	// start without a checkpoint is dated at the flush: coldStart).
	start := h.r.windowStart
	h.r.ingest(ctx, kongExport("GET", "/a", 200))
	h.r.flush(ctx)

	all := next.AllMetrics()
	assertCounts(t, countsOf(t, all), map[string]int64{"kong GET /a 200": 2})
	dp := all[0].ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0)
	if dp.StartTimestamp() != start {
		t.Errorf("retried window starts at %v, want the failed window's start %v", dp.StartTimestamp(), start)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "retried")); n != 1 {
		t.Errorf("retried points = %d, want 1", n)
	}
}

func TestPermanentFlushErrorDrops(t *testing.T) {
	next := &flakyConsumer{failures: 1, err: consumererror.NewPermanent(errors.New("bad data"))}
	h := start(t, next, nil)
	ctx := context.Background()
	h.r.ingest(ctx, kongExport("GET", "/a", 200))
	h.r.flush(ctx)
	h.r.ingest(ctx, kongExport("GET", "/b", 200))
	h.r.flush(ctx)
	assertCounts(t, countsOf(t, next.AllMetrics()), map[string]int64{"kong GET /b 200": 1})
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "dropped")); n != 1 {
		t.Errorf("dropped points = %d, want 1", n)
	}
}

// failNth fails its nth call (1-based) with err, once, and passes every
// other call on to next.
type failNth struct {
	next  consumer.Metrics
	nth   int
	err   error
	calls int
}

func (f *failNth) ConsumeMetrics(ctx context.Context, md pmetric.Metrics) error {
	f.calls++
	if f.calls == f.nth {
		return f.err
	}
	return f.next.ConsumeMetrics(ctx, md)
}

func (*failNth) Capabilities() consumer.Capabilities { return consumer.Capabilities{MutatesData: true} }

// ingestRoutes ingests one Kong request for each of n routes.
func ingestRoutes(t *testing.T, h *harness, n int) {
	t.Helper()
	for i := range n {
		h.r.ingest(context.Background(), kongExport("GET", "/r/"+strconv.Itoa(i), 200))
	}
}

// A window of more points than emitChunk goes downstream in chunks. When a
// later chunk is refused (retryable), the whole window is kept, the chunks
// already accepted too, and resent with the next window's counts under the
// same start: through the cumulative processor every request is counted
// exactly once. (Keeping only the refused chunks would send the accepted
// series' next window under the old start with the new counts alone, which
// the processor takes as a replacement of the window: counts lost.)
func TestChunkRefusedMidWindowIsResentWhole(t *testing.T) {
	const routes = 5000
	sink := new(consumertest.MetricsSink)
	proc := cumulative(t, testutil.NewMemClient(), sink)
	t.Cleanup(func() { _ = proc.Shutdown(context.Background()) })
	next := &failNth{next: proc, nth: 2, err: errors.New("downstream busy")}
	h := start(t, next, nil)
	ctx := context.Background()

	ingestRoutes(t, h, routes)
	h.r.flush(ctx)
	retried := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "retried"))
	if retried <= emitChunk || next.calls != 2 || len(sink.AllMetrics()) != 1 {
		t.Fatalf("first flush: %d points retried, %d calls, %d chunks through; want > %d points, the second of 2+ chunks refused", retried, next.calls, len(sink.AllMetrics()), emitChunk)
	}
	ingestRoutes(t, h, routes)
	h.r.flush(ctx)
	ingestRoutes(t, h, routes)
	h.r.flush(ctx)
	for i := range routes {
		route := "/r/" + strconv.Itoa(i)
		if v, _ := lastRequests(t, sink, route); v != 3 {
			t.Fatalf("route %s: cumulative requests %d, want 3", route, v)
		}
	}
	if sent := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "sent")); sent != 2*retried {
		t.Errorf("sent points = %d, want %d (two windows of %d)", sent, 2*retried, retried)
	}
}

// A permanent refusal of a later chunk drops the chunks not yet accepted,
// counted, and only them.
func TestChunkPermanentlyRefusedDropsTheRest(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	next := &failNth{next: sink, nth: 2, err: consumererror.NewPermanent(errors.New("bad data"))}
	h := start(t, next, nil)
	ctx := context.Background()
	ingestRoutes(t, h, 5000)
	h.r.flush(ctx)
	sent := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "sent"))
	dropped := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "dropped"))
	if sent != emitChunk || dropped <= 0 || int(sent) != sink.DataPointCount() {
		t.Errorf("sent %d, dropped %d, %d points through; want the first chunk (%d) sent and through, the rest dropped", sent, dropped, sink.DataPointCount(), emitChunk)
	}
	h.r.ingest(ctx, kongExport("GET", "/after", 200))
	h.r.flush(ctx)
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_flushed_points", attribute.String("outcome", "sent")); n <= sent {
		t.Errorf("the window after a dropped one was not sent (sent %d)", n)
	}
}

func TestConcurrentExportsAreExact(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.FlushInterval = 5 * time.Millisecond })
	const workers, each = 4, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				h.r.ingest(context.Background(), kongExport("GET", "/a", 200))
			}
		})
	}
	wg.Wait()
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /a 200": workers * each})
}

func TestShutdownWithoutStart(t *testing.T) {
	// The collector may shut a component down that never started.
	r, err := newReceiver(createDefaultConfig(), receivertest.NewNopSettings(metadata.Type), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown before Start: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStartShutdownTwice runs the full lifecycle twice on the same ports: the
// second start fails if the first shutdown leaked a listener.
func TestStartShutdownTwice(t *testing.T) {
	httpAddr, grpcAddr := testutil.FreeAddr(t), testutil.FreeAddr(t)
	for range 2 {
		cfg := NewFactory().CreateDefaultConfig().(*Config)
		cfg.Protocols.HTTP.Get().NetAddr.Endpoint = httpAddr
		cfg.Protocols.GRPC.Get().NetAddr.Endpoint = grpcAddr
		r, err := NewFactory().CreateMetrics(context.Background(), receivertest.NewNopSettings(metadata.Type), cfg, consumertest.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
			t.Fatal(err)
		}
		if err := r.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStartFailsCleanlyOnBusyPort(t *testing.T) {
	h := start(t, consumertest.NewNop(), nil)
	cfg := createDefaultConfig()
	cfg.Protocols.HTTP.Get().NetAddr.Endpoint = testutil.FreeAddr(t)
	cfg.Protocols.GRPC.Get().NetAddr.Endpoint = h.grpcAddr // taken
	r, err := newReceiver(cfg, receivertest.NewNopSettings(metadata.Type), consumertest.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err == nil {
		t.Fatal("Start on a busy port succeeded")
	}
	// The HTTP server that did start was shut down: its port is free again.
	if _, err := http.Get("http://" + cfg.Protocols.HTTP.Get().NetAddr.Endpoint + tracesURLPath); err == nil {
		t.Fatal("HTTP server still serving after a failed Start")
	}
}

// TestResourceNamesTheGatewayNotTheNode: counts carry the gateway's
// service.name and service.namespace, never the reporting node's
// service.instance.id, so two nodes of one gateway sum into one series.
func TestResourceNamesTheGatewayNotTheNode(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	for _, node := range []string{"node-a", "node-b"} {
		td := kongExport("GET", "/a", 200)
		res := td.ResourceSpans().At(0).Resource().Attributes()
		res.PutStr("service.namespace", "edge")
		res.PutStr("service.instance.id", node)
		h.r.ingest(context.Background(), td)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	all := sink.AllMetrics()
	if len(all) != 1 || all[0].ResourceMetrics().Len() != 1 {
		t.Fatalf("got %d batches, want one batch with one resource", len(all))
	}
	rm := all[0].ResourceMetrics().At(0)
	got := rm.Resource().Attributes().AsRaw()
	want := map[string]any{"service.name": "kong", "service.namespace": "edge"}
	if len(got) != len(want) || got["service.name"] != want["service.name"] || got["service.namespace"] != want["service.namespace"] {
		t.Errorf("resource = %v, want %v", got, want)
	}
	if v := rm.ScopeMetrics().At(0).Metrics().At(0).Sum().DataPoints().At(0).IntValue(); v != 2 {
		t.Errorf("count = %d, want 2 (both nodes in one series)", v)
	}
}

// A request of more events than eventChunk hands them to the aggregator in
// chunks as they are read (a request holds 1k events at a time, not all):
// every one is counted once, over the direct protobuf path, pdata's JSON
// path and an http-log batch, which still answers how many it accepted.
func TestLargeRequestsAreCountedInChunks(t *testing.T) {
	const n = 2*eventChunk + 100
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	td := ptrace.NewTraces()
	for i := range n {
		kongExport("GET", "/r/"+strconv.Itoa(i%7), 200).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, td)); code != http.StatusOK {
		t.Fatalf("protobuf: %d %s", code, body)
	}
	if code, body := post(t, h.httpAddr, jsonContentType, jsonBody(t, td)); code != http.StatusOK {
		t.Fatalf("JSON: %d %s", code, body)
	}
	var logs strings.Builder
	logs.WriteString("[")
	for i := range n {
		if i > 0 {
			logs.WriteString(",")
		}
		logs.WriteString(`{"request":{"method":"GET"},"response":{"status":200},"route":{"name":"/r/` + strconv.Itoa(i%7) + `"},"service":{"name":"kong"}}`)
	}
	logs.WriteString("]")
	resp, err := http.Post("http://"+h.httpAddr+"/kong/http-log", jsonContentType, strings.NewReader(logs.String()))
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if want := `{"accepted":` + strconv.Itoa(n) + `,"rejected":0}`; resp.StatusCode != http.StatusOK || string(answer) != want {
		t.Fatalf("http-log: %d %s, want 200 %s", resp.StatusCode, answer, want)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, c := range countsOf(t, sink.AllMetrics()) {
		total += c
	}
	if total != 3*n {
		t.Errorf("%d requests counted, want %d (three requests of %d)", total, 3*n, n)
	}
}
