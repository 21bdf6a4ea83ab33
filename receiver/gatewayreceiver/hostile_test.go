package gatewayreceiver

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// Without an admission queue (admission_queue_timeout: 0), while
// max_request_bytes_in_flight is held by other requests, every ingest path
// refuses a new body before reading it (a declared size that cannot fit) or
// as it arrives (a chunked one): HTTP 429 with Retry-After, gRPC
// Unavailable, counted as throttled; nothing of it is counted. Once the
// bytes are released the same requests are accepted and counted exactly.
// (With the queue they wait: TestAdmissionWaitsInTurn.)
func TestAdmissionRefusesBeyondBytesInFlight(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Limits.MaxRequestBytesInFlight = 64 << 10
		c.Limits.AdmissionQueueTimeout = 0
		c.Health = configoptional.Some(defaultHealthConfig())
	})
	body := protoBody(t, kongExport("GET", "/held", 200))
	log := `{"response":{"status":200},"route":{"name":"r"},"latencies":{"request":1}}`
	push := `{"gateway":"kong-7","kind":"kong","upstream":"u","target":"t:80","address":"10.0.0.1:80","state":"healthy"}`
	send := func(chunked bool) map[string]int {
		codes := map[string]int{}
		do := func(name, path, ct string, b []byte) {
			var rd io.Reader = strings.NewReader(string(b))
			if chunked {
				rd = io.MultiReader(rd) // hides the length: sent chunked
			}
			req, _ := http.NewRequest(http.MethodPost, "http://"+h.httpAddr+path, rd)
			req.Header.Set("Content-Type", ct)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			codes[name] = resp.StatusCode
			if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") != "1" {
				t.Errorf("%s: 429 without Retry-After", name)
			}
		}
		do("traces", tracesURLPath, pbContentType, body)
		do("log", kongLogURLPath, jsonContentType, []byte(log))
		do("push", health.DefaultPushPath, jsonContentType, []byte(push))
		return codes
	}
	grpcExport := func() error {
		_, err := ptraceotlp.NewGRPCClient(dialGRPC(t, h.grpcAddr)).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(kongExport("GET", "/held", 200)))
		return err
	}

	// Another request holds all but 100 bytes.
	held := holdBytes(t, h, 64<<10-100)
	for _, chunked := range []bool{false, true} {
		for name, code := range send(chunked) {
			if code != http.StatusTooManyRequests {
				t.Errorf("%s (chunked %v) while the budget is held: %d, want 429", name, chunked, code)
			}
		}
	}
	// Full: a new gRPC call is refused before its message is read.
	more := holdBytes(t, h, 100)
	if err := grpcExport(); status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC while full: %v, want Unavailable", err)
	}
	more.Release()
	held.Release()

	for name, code := range send(false) {
		if code != http.StatusOK {
			t.Errorf("%s after release: %d, want 200", name, code)
		}
	}
	if err := grpcExport(); err != nil {
		t.Errorf("gRPC after release: %v", err)
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "throttled")); got != 5 {
		t.Errorf("throttled requests = %d, want 5 (traces and log, twice; gRPC once)", got)
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", "throttled")); got != 2 {
		t.Errorf("throttled pushes = %d, want 2", got)
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_events", attribute.String("outcome", "counted")); got != 3 {
		t.Errorf("events counted = %d, want 3 (the accepted export, log and gRPC call only)", got)
	}
	if h.r.ingest.admit.InFlight() != 0 {
		t.Errorf("%d bytes still charged after every request ended", h.r.ingest.admit.InFlight())
	}
}

// A client that announces a body and stops sending is cut off by the read
// timeout, and its announced length reserves nothing.
func TestStalledUploadIsTimedOut(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), func(c *Config) { c.Protocols.HTTP.Get().ReadTimeout = 300 * time.Millisecond })
	conns := make([]net.Conn, 20)
	for i := range conns {
		c, err := net.Dial("tcp", h.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write([]byte("POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: " +
			strconv.Itoa(4<<20) + "\r\n\r\npartial"))
		conns[i] = c
	}
	start := time.Now()
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode < 400 {
				t.Fatalf("connection %d: stalled upload answered %d", i, resp.StatusCode)
			}
			continue
		}
		// Closed without an answer is the other way a stalled read ends.
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection %d still open %v after the read timeout", i, time.Since(start))
		}
	}
	if h.r.ingest.admit.InFlight() != 0 {
		t.Errorf("%d bytes still charged", h.r.ingest.admit.InFlight())
	}
}

// OTLP JSON nested past pdata's depth is refused before pdata decodes it.
func TestDeepOTLPJSONIsRefused(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), nil)
	deep := strings.Repeat(`{"kvlistValue":{"values":[{"key":"k","value":`, 120) + `{"stringValue":"x"}` + strings.Repeat(`}]}}`, 120)
	body := `{"resourceSpans":[{"resource":{"attributes":[{"key":"a","value":` + deep + `}]}}]}`
	code, msg := post(t, h.httpAddr, jsonContentType, []byte(body))
	if code != http.StatusBadRequest || !strings.Contains(msg, "nested deeper than 416 levels") {
		t.Fatalf("deep JSON: %d %s", code, msg)
	}
}

// An OTLP JSON body of empty elements costs pdata hundreds of times its
// size (a span written {} holds ~220 bytes): it is charged what its
// decoding would hold, estimated from its elements, and refused (413,
// too_large) when that is more than all of max_request_bytes_in_flight,
// before pdata decodes a byte. A legitimate export is charged as before.
func TestOTLPJSONFloodIsCharged(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	// max_request_bytes_in_flight: 64 MiB; no queue, so that a request
	// without room is refused at once.
	h := start(t, sink, func(c *Config) { c.Limits.AdmissionQueueTimeout = 0 })
	spans := func(n int) []byte {
		return []byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[` + strings.TrimSuffix(strings.Repeat("{},", n), ",") + `]}]}]}`)
	}
	// 400,000 empty spans, 1.2 MB: ~90 MB in pdata.
	code, msg := post(t, h.httpAddr, jsonContentType, spans(400_000))
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(msg, "400000 spans") || !strings.Contains(msg, "max_request_bytes_in_flight") {
		t.Fatalf("a flood of 400,000 empty spans: %d %s, want 413 naming the spans and the bound", code, msg)
	}
	// 100,000 (~23 MB in pdata) fit, but not while others hold the room:
	// charged the estimate, not 4× their 0.3 MB.
	other := holdBytes(t, h, 60<<20)
	if code, msg := post(t, h.httpAddr, jsonContentType, spans(100_000)); code != http.StatusTooManyRequests {
		t.Fatalf("100,000 empty spans while 60 MiB are held: %d %s, want 429", code, msg)
	}
	other.Release()
	if code, msg := post(t, h.httpAddr, jsonContentType, spans(100_000)); code != http.StatusOK {
		t.Fatalf("100,000 empty spans alone: %d %s, want 200", code, msg)
	}
	// A legitimate export, as ever.
	if code, msg := post(t, h.httpAddr, jsonContentType, jsonBody(t, kongExport("GET", "/ok", 200))); code != http.StatusOK {
		t.Fatalf("a Kong export: %d %s", code, msg)
	}
	if n := h.r.ingest.admit.InFlight(); n != 0 {
		t.Errorf("%d bytes still charged", n)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
	for outcome, want := range map[string]int64{"too_large": 1, "throttled": 1, "accepted": 2} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "http"), attribute.String("outcome", outcome)); n != want {
			t.Errorf("http %s requests = %d, want %d", outcome, n, want)
		}
	}
}

// In a traces pipeline the receiver unmarshals protobuf into pdata too,
// where an empty span (2 bytes on the wire) holds ~220 bytes: a message of
// them is charged what it costs and refused past the whole bound, over
// HTTP (413) and gRPC (ResourceExhausted), both counted too_large, while a
// Kong export passes as ever.
func TestProtobufFloodIsChargedInATracesPipeline(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	h.r.useTraces(new(consumertest.TracesSink))
	spans := func(n int) []byte {
		// ExportTraceServiceRequest{resource_spans: [{scope_spans: [{spans: [{} × n]}]}]}
		scope := bytes.Repeat([]byte{0x12, 0x00}, n) // ScopeSpans: spans (2), each empty
		rs := protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), scope)
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), rs)
	}
	flood := spans(1_000_000) // 2 MB: ~220 MB in pdata
	code, msg := post(t, h.httpAddr, pbContentType, flood)
	if code != http.StatusRequestEntityTooLarge {
		t.Fatalf("HTTP: a million empty spans: %d %s, want 413", code, msg)
	}
	conn := dialGRPC(t, h.grpcAddr)
	var resp []byte
	err := conn.Invoke(context.Background(), exportMethod, &flood, &resp, grpc.ForceCodecV2(bytesCodec{}))
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "1000000 spans") {
		t.Fatalf("gRPC: a million empty spans: %v, want ResourceExhausted naming the spans", err)
	}
	good := protoBody(t, kongExport("GET", "/ok", 200))
	if code, msg := post(t, h.httpAddr, pbContentType, good); code != http.StatusOK {
		t.Fatalf("HTTP: a Kong export: %d %s", code, msg)
	}
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatalf("gRPC: a Kong export: %v", err)
	}
	if n := h.r.ingest.admit.InFlight(); n != 0 {
		t.Errorf("%d bytes still charged", n)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 2})
	for _, transport := range []string{"http", "grpc"} {
		for outcome, want := range map[string]int64{"too_large": 1, "accepted": 1} {
			if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", transport), attribute.String("outcome", outcome)); n != want {
				t.Errorf("%s %s requests = %d, want %d", transport, outcome, n, want)
			}
		}
	}
}

// Every error answer is a google.rpc.Status in the request's encoding, even
// when its message quotes client bytes that are not UTF-8 (protojson and
// proto refuse such strings; the answer used to fall back to text/plain
// echoing them) or is huge.
func TestErrorAnswerIsAlwaysAStatus(t *testing.T) {
	msg := "malformed body: \xff\xfe" + strings.Repeat("x", 5000)
	for _, enc := range []string{jsonContentType, pbContentType} {
		rec := httptest.NewRecorder()
		writeStatus(rec, enc, http.StatusBadRequest, msg)
		var st spb.Status
		var err error
		if enc == jsonContentType {
			err = protojson.Unmarshal(rec.Body.Bytes(), &st)
		} else {
			err = proto.Unmarshal(rec.Body.Bytes(), &st)
		}
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != enc || err != nil ||
			st.Code != int32(codes.InvalidArgument) || len(st.Message) > 1100 || !strings.HasPrefix(st.Message, "malformed body: \uFFFD") {
			t.Errorf("%s: %d %s, %v: %.100q", enc, rec.Code, rec.Header().Get("Content-Type"), err, rec.Body.String())
		}
	}
}

// A request alone on the receiver is always admitted, even when its body
// times its decode weight passes max_request_bytes_in_flight: its own bytes
// never count against it.
func TestLoneLargeRequestIsAdmitted(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), func(c *Config) { c.Limits.MaxRequestBytesInFlight = 64 << 10 })
	td := kongExport("GET", "/big", 200)
	spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	for range 300 {
		spans.At(0).CopyTo(spans.AppendEmpty())
	}
	body := jsonBody(t, td)
	if len(body) < 64<<10/weightOTLPJSON {
		t.Fatalf("body %d bytes is too small to pass the bound once weighted", len(body))
	}
	if code, msg := post(t, h.httpAddr, jsonContentType, body); code != http.StatusOK {
		t.Fatalf("lone %d-byte JSON export: %d %s", len(body), code, msg)
	}
	if h.r.ingest.admit.InFlight() != 0 {
		t.Errorf("%d bytes still charged", h.r.ingest.admit.InFlight())
	}
}

// A body announced larger than max_request_body_size is refused at once
// (413, counted as too_large), on every ingest path, before a byte of it is
// read: a client announcing a terabyte once held its connection until the
// read timeout and was then counted as malformed.
func TestAnnouncedOversizedBodyIsRefusedAtOnce(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), func(c *Config) { c.Health = configoptional.Some(defaultHealthConfig()) })
	for _, path := range []string{tracesURLPath, "/kong/http-log", "/apisix/http-logger", health.DefaultPushPath} {
		conn, err := net.Dial("tcp", h.httpAddr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second)) // well under the 30 s read timeout
		_, _ = conn.Write([]byte("POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1099511627776\r\n\r\n{"))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v (no answer before the body)", path, err)
		}
		_ = resp.Body.Close()
		_ = conn.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("%s: %d, want 413", path, resp.StatusCode)
		}
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "too_large")); got != 3 {
		t.Errorf("too_large requests = %d, want 3 (traces and both logs; the push is counted as a rejected health event)", got)
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", "rejected")); got != 1 {
		t.Errorf("rejected pushes = %d, want 1", got)
	}
}

// A gRPC message over max_recv_msg_size_mib is refused by gRPC itself
// (ResourceExhausted) before Export sees it; it is counted all the same, as
// too_large, and the next export is served.
func TestOversizedGRPCMessageIsCounted(t *testing.T) {
	h := start(t, new(consumertest.MetricsSink), nil)
	td := kongExport("GET", "/big", 200)
	td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes().PutStr("padding", strings.Repeat("p", 5<<20))
	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := ptraceotlp.NewGRPCClient(conn)
	if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("5 MiB message: %v, want ResourceExhausted", err)
	}
	if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(kongExport("GET", "/ok", 200))); err != nil {
		t.Fatalf("next export: %v", err)
	}
	// gRPC reports a call's end to its stats handler after answering it.
	waitFor(t, func() bool {
		return testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "too_large")) == 1
	})
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "accepted")); got != 1 {
		t.Errorf("accepted = %d, want 1", got)
	}
}

// Decoding a protobuf body of many small spans builds far more than the
// body (a 20 MB export of 150k spans took the collector from 40 to 566 MB):
// the span records and events it builds are charged to the request as they
// grow. Alone, the request still gets through whatever its cost; while
// other requests hold bytes, one whose decoding would pass the bound is
// refused (429, retry later, counted as throttled; here with no admission
// queue, at once) and counts nothing, over HTTP and gRPC.
func TestProtobufDecodingIsChargedAsItGrows(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Limits.MaxRequestBytesInFlight = 1 << 20
		c.Limits.AdmissionQueueTimeout = 0 // refused at once rather than after a wait
	})
	td := ptrace.NewTraces()
	for i := range 5000 {
		kongExport("GET", "/r/"+strconv.Itoa(i%3), 200).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	one := ptrace.NewTraces()
	rs := one.ResourceSpans().AppendEmpty()
	td.ResourceSpans().At(0).Resource().CopyTo(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().CopyTo(ss.Scope())
	for i := range td.ResourceSpans().Len() { // one ResourceSpans of 10k spans
		td.ResourceSpans().At(i).ScopeSpans().At(0).Spans().MoveAndAppendTo(ss.Spans())
	}
	body := protoBody(t, one)
	if len(body) > 1<<20 {
		t.Fatalf("body %d bytes: it should fit the bound, only its decoding should not", len(body))
	}
	// Other requests hold half the bound.
	held := holdBytes(t, h, 512<<10)
	resp, err := http.Post("http://"+h.httpAddr+tracesURLPath, pbContentType, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Errorf("while others hold bytes: %d, want 429 with Retry-After", resp.StatusCode)
	}
	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = ptraceotlp.NewGRPCClient(conn).Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(one))
	if status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC while others hold bytes: %v, want Unavailable", err)
	}
	held.Release()
	if code, msg := post(t, h.httpAddr, pbContentType, body); code != http.StatusOK {
		t.Fatalf("alone: %d %s", code, msg)
	}
	if h.r.ingest.admit.InFlight() != 0 {
		t.Errorf("%d bytes still charged", h.r.ingest.admit.InFlight())
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, c := range countsOf(t, sink.AllMetrics()) {
		total += c
	}
	if total != 5000 {
		t.Errorf("%d requests counted, want 5000: the refused exports count nothing", total)
	}
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "throttled")); got != 2 {
		t.Errorf("throttled = %d, want 2", got)
	}
}

// A label value of megabytes (a route, a service.name, a pushed upstream)
// once lived in the tuple, its sets, the processor's streams, the
// exporter's series and every scrape: 1,800 routes of 1 MiB took the
// collector past 13 GB. Every value is cut to max_label_value_length bytes,
// at a whole UTF-8 character; the requests still count, under the cut
// value (two routes that differ only beyond it are one series), and the
// cut values are counted.
func TestHugeLabelValuesAreCut(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) { c.Health = configoptional.Some(defaultHealthConfig()) })
	prefix := "/" + strings.Repeat("é", 200) // 401 bytes: the cut falls inside a character
	for i := range 2 {
		route := prefix + strings.Repeat(strconv.Itoa(i), 1<<20)
		if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, kongExport("GET", route, 200))); code != http.StatusOK {
			t.Fatalf("export %d: %d %s", i, code, body)
		}
	}
	huge := strings.Repeat("u", 1<<20)
	push := `{"gateway":"kong-1","kind":"kong","upstream":"` + huge + `","target":"t:80","address":"10.0.0.1:80","state":"healthy"}`
	resp, err := http.Post("http://"+h.httpAddr+health.DefaultPushPath, "application/json", strings.NewReader(push))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("push: %d", resp.StatusCode)
	}
	// The health row reaches the sink from the health emitter.
	upstreams := func() map[string]bool {
		got := map[string]bool{}
		for _, md := range sink.AllMetrics() {
			forEachPoint(md, func(_ string, dp pmetric.NumberDataPoint) {
				if u, ok := dp.Attributes().Get("gateway.upstream.name"); ok {
					got[u.Str()] = true
				}
			})
		}
		return got
	}
	waitFor(t, func() bool { return len(upstreams()) > 0 })
	if got := upstreams(); len(got) != 1 || !got[strings.Repeat("u", defaultMaxLabelValueLength)] {
		t.Errorf("health upstream labels: %d, want one of %d bytes", len(got), defaultMaxLabelValueLength)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	var requests []pmetric.Metrics
	for _, md := range sink.AllMetrics() {
		if md.ResourceMetrics().Len() > 0 && md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name() == metricRequests {
			requests = append(requests, md)
		}
	}
	cut := "/" + strings.Repeat("é", 127) // 255 bytes: one more é does not fit whole in 256
	assertCounts(t, countsOf(t, requests), map[string]int64{"kong GET " + cut + " 200": 2})
	if got := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_label_values_truncated"); got != 3 {
		t.Errorf("truncated label values = %d, want 3 (two routes, one upstream)", got)
	}
}
