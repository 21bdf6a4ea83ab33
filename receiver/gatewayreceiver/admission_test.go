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

	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/otelgateway/otelgateway/internal/testutil"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/admission"
	"github.com/otelgateway/otelgateway/receiver/gatewayreceiver/internal/health"
)

// holdBytes stands for another request holding n bytes of
// max_request_bytes_in_flight, until the test releases them.
func holdBytes(t *testing.T, h *harness, n int64) *admission.Charge {
	t.Helper()
	c, err := h.r.ingest.admit.Admit(context.Background(), admission.Request{})
	if err == nil {
		err = c.Add(n)
	}
	if err != nil {
		t.Fatalf("holding %d bytes: %v", n, err)
	}
	t.Cleanup(c.Release)
	return c
}

// bigKongExport is one Kong export of spans roots on route, each padded
// with pad bytes, in one ResourceSpans.
func bigKongExport(route string, spans, pad int) ptrace.Traces {
	td := kongExport("GET", route, 200)
	ss := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
	root, child := ss.At(0), ss.At(1)
	root.Attributes().PutStr("pad", strings.Repeat("p", pad))
	for i := 1; i < spans; i++ {
		r := ss.AppendEmpty()
		root.CopyTo(r)
		r.SetSpanID([8]byte{byte(i >> 8), byte(i), 1})
		c := ss.AppendEmpty()
		child.CopyTo(c)
		c.SetSpanID([8]byte{byte(i >> 8), byte(i), 2})
		c.SetParentSpanID(r.SpanID())
	}
	return td
}

// Large exports sent at once, each weighing more than a quarter of
// max_request_bytes_in_flight (the JSON ones more than all of it), are
// served in turn, every one of them at its first try, and small exports
// sent alongside all the while are served too, in their turn; everything
// is counted exactly. Before the queue, the exports admitted against an
// empty bound read their bodies at once and refused each other, and the
// rest were refused before reading: 429s where every export could be
// served (the issue: 2,778 answers, every one 429).
func TestAdmissionServesConcurrentLargeExportsInTurn(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Limits.MaxRequestBytesInFlight = 1 << 20
		// Long enough for all of them on a loaded machine under the race
		// detector: the point is that they are served, not how soon.
		c.Limits.AdmissionQueueTimeout = time.Minute
	})
	const (
		big   = 8
		spans = 150
		pad   = 2000
		small = 20
	)
	type export struct {
		route, ct string
		body      []byte
	}
	exports := make([]export, big)
	for i := range exports {
		e := &exports[i]
		e.route = "/big/" + strconv.Itoa(i)
		td := bigKongExport(e.route, spans, pad)
		if i%2 == 0 {
			e.ct, e.body = pbContentType, protoBody(t, td)
		} else {
			e.ct, e.body = jsonContentType, jsonBody(t, td)
		}
	}
	if n := int64(len(exports[0].body)); n*weightDirectProto < 1<<18 {
		t.Fatalf("protobuf export of %d bytes: want more than a quarter of the bound", n)
	}
	if n := int64(len(exports[1].body)); n*weightOTLPJSON <= 1<<20 {
		t.Fatalf("JSON export of %d bytes: want it to weigh more than the bound", n)
	}
	smallBody := protoBody(t, kongExport("GET", "/small", 200))

	var wg sync.WaitGroup
	gate := make(chan struct{})
	codes := make([]int, big)
	msgs := make([]string, big)
	for i := range exports {
		wg.Go(func() {
			<-gate
			resp, err := http.Post("http://"+h.httpAddr+tracesURLPath, exports[i].ct, bytes.NewReader(exports[i].body))
			if err != nil {
				msgs[i] = err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			codes[i], msgs[i] = resp.StatusCode, string(b)
		})
	}
	var smallMu sync.Mutex
	smallCodes := map[int]int{}
	for range 2 {
		wg.Go(func() {
			<-gate
			for range small {
				resp, err := http.Post("http://"+h.httpAddr+tracesURLPath, pbContentType, bytes.NewReader(smallBody))
				code := 0
				if err == nil {
					code = resp.StatusCode
					_, _ = io.Copy(io.Discard, resp.Body)
					_ = resp.Body.Close()
				}
				smallMu.Lock()
				smallCodes[code]++
				smallMu.Unlock()
			}
		})
	}
	close(gate)
	wg.Wait()
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("export %d (%s, %d bytes): %d %.200s, want 200 at the first try", i, exports[i].ct, len(exports[i].body), code, msgs[i])
		}
	}
	if smallCodes[http.StatusOK] != 2*small {
		t.Errorf("small exports sent alongside: %v, want %d × 200", smallCodes, 2*small)
	}
	if n := h.r.ingest.admit.InFlight(); n != 0 {
		t.Errorf("%d bytes still in flight", n)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"kong GET /small 200": 2 * small}
	for _, e := range exports {
		want["kong GET "+e.route+" 200"] = spans
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), want)
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "throttled")); n != 0 {
		t.Errorf("%d requests throttled, want none", n)
	}
}

// While max_request_bytes_in_flight is held, a request of every ingest path
// (OTLP over HTTP and gRPC, an access log, a health push) waits for room
// instead of being refused, and is served once the room is released.
func TestAdmissionWaitsInTurn(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Limits.MaxRequestBytesInFlight = 64 << 10
		c.Limits.AdmissionQueueTimeout = time.Minute
		c.Health = configoptional.Some(defaultHealthConfig())
	})
	log := `{"response":{"status":200},"route":{"name":"r"},"latencies":{"request":1}}`
	push := `{"gateway":"kong-7","kind":"kong","upstream":"u","target":"t:80","address":"10.0.0.1:80","state":"healthy"}`
	export := protoBody(t, kongExport("GET", "/waited", 200))
	grpcClient := ptraceotlp.NewGRPCClient(dialGRPC(t, h.grpcAddr))
	requests := []struct {
		name string
		send func() error
	}{
		{"traces", func() error { return postOK(h.httpAddr, tracesURLPath, pbContentType, export) }},
		{"log", func() error { return postOK(h.httpAddr, kongLogURLPath, jsonContentType, []byte(log)) }},
		{"push", func() error { return postOK(h.httpAddr, health.DefaultPushPath, jsonContentType, []byte(push)) }},
		{"grpc", func() error {
			_, err := grpcClient.Export(context.Background(),
				ptraceotlp.NewExportRequestFromTraces(kongExport("GET", "/waited-grpc", 200)))
			return err
		}},
	}
	for _, r := range requests {
		held := holdBytes(t, h, 64<<10)
		done := make(chan error, 1)
		go func() { done <- r.send() }()
		waitFor(t, func() bool { return h.r.ingest.admit.Waiting() == 1 })
		select {
		case err := <-done:
			t.Fatalf("%s answered while the bound was held: %v", r.name, err)
		default:
		}
		held.Release()
		if err := <-done; err != nil {
			t.Errorf("%s after waiting: %v", r.name, err)
		}
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_events", attribute.String("outcome", "counted")); n != 3 {
		t.Errorf("events counted = %d, want 3 (both exports and the log)", n)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_health_events", attribute.String("outcome", "accepted")); n != 1 {
		t.Errorf("health events accepted = %d, want 1", n)
	}
}

// postOK posts body to path and fails unless it is answered 200.
func postOK(addr, path, ct string, body []byte) error {
	resp, err := http.Post("http://"+addr+path, ct, bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status + ": " + string(b))
	}
	return nil
}

// A request that has waited admission_queue_timeout is refused: 429 with
// Retry-After (gRPC Unavailable with RetryInfo, as the OTLP specification
// has a server that cannot keep up answer), naming the timeout, counted
// throttled; and one that finds the queue full is refused at once, naming
// admission_queue_size, a gRPC call before its message is read.
func TestAdmissionQueueTimeoutAndSize(t *testing.T) {
	const timeout = 300 * time.Millisecond
	h := start(t, new(consumertest.MetricsSink), func(c *Config) {
		c.Limits.MaxRequestBytesInFlight = 64 << 10
		c.Limits.AdmissionQueueSize = 1
		c.Limits.AdmissionQueueTimeout = timeout
	})
	body := protoBody(t, kongExport("GET", "/late", 200))
	held := holdBytes(t, h, 64<<10)

	start := time.Now()
	resp, err := http.Post("http://"+h.httpAddr+tracesURLPath, pbContentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if waited := time.Since(start); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		!strings.Contains(string(msg), "admission_queue_timeout") || waited < timeout {
		t.Fatalf("HTTP after waiting %s: %d (Retry-After %q) %s; want 429 with Retry-After after %s",
			waited, resp.StatusCode, resp.Header.Get("Retry-After"), msg, timeout)
	}

	client := ptraceotlp.NewGRPCClient(dialGRPC(t, h.grpcAddr))
	_, err = client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(kongExport("GET", "/late", 200)))
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "admission_queue_timeout") || retryDelay(st) != time.Second {
		t.Fatalf("gRPC after waiting: %v (retry delay %s), want Unavailable with RetryInfo 1s", err, retryDelay(st))
	}

	// One waiter fills the queue of 1: the next request is refused at once.
	waiting := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+h.httpAddr+tracesURLPath, pbContentType, bytes.NewReader(body))
		if err != nil {
			waiting <- 0
			return
		}
		_ = resp.Body.Close()
		waiting <- resp.StatusCode
	}()
	waitFor(t, func() bool { return h.r.ingest.admit.Waiting() == 1 })
	resp, err = http.Post("http://"+h.httpAddr+tracesURLPath, pbContentType, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	msg, _ = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(msg), "admission_queue_size") {
		t.Errorf("HTTP with the queue full: %d %s", resp.StatusCode, msg)
	}
	_, err = client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(kongExport("GET", "/late", 200)))
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "admission_queue_size") {
		t.Errorf("gRPC with the queue full: %v", err)
	}
	held.Release()
	if code := <-waiting; code != http.StatusOK {
		t.Errorf("the waiter once the room was released: %d", code)
	}
	if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("outcome", "throttled")); n != 4 {
		t.Errorf("throttled = %d, want 4 (two timed out, two found the queue full)", n)
	}
}

func retryDelay(st *status.Status) time.Duration {
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}
