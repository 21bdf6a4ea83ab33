package gatewayreceiver

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// bytesCodec sends a []byte message as it is, to put malformed protobuf on
// the wire.
type bytesCodec struct{}

func (bytesCodec) Name() string { return "proto" }
func (bytesCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (bytesCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}

func dialGRPC(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestGRPCMalformedMessage: a message that is not an ExportTraceServiceRequest
// gets InvalidArgument naming the problem, is counted as malformed, counts no
// span, and the next export is served.
func TestGRPCMalformedMessage(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	conn := dialGRPC(t, h.grpcAddr)
	good := protoBody(t, kongExport("GET", "/ok", 200))
	// resource_spans → scope_spans → a span whose span_id has 3 bytes.
	bad := []byte{0x0a, 0x07, 0x12, 0x05, 0x12, 0x03, 0x12, 0x01, 0x01}
	var resp []byte
	err := conn.Invoke(context.Background(), exportMethod, &bad, &resp, grpc.ForceCodecV2(bytesCodec{}))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "malformed OTLP protobuf message: resource_spans[0].scope_spans[0].spans[0]: span_id is 1 bytes, want 8") {
		t.Fatalf("malformed message: %v, want InvalidArgument naming the span_id", err)
	}
	if err := conn.Invoke(context.Background(), exportMethod, &good, &resp, grpc.ForceCodecV2(bytesCodec{})); err != nil {
		t.Fatalf("next export: %v", err)
	}
	if len(resp) != 0 {
		t.Errorf("response is %d bytes, want the empty ExportTraceServiceResponse", len(resp))
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong GET /ok 200": 1})
	for outcome, want := range map[string]int64{"malformed": 1, "accepted": 1} {
		if n := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_requests", attribute.String("transport", "grpc"), attribute.String("outcome", outcome)); n != want {
			t.Errorf("grpc %s requests = %d, want %d", outcome, n, want)
		}
	}
}

// TestGRPCTracesPassThrough: over gRPC too, a receiver in a traces pipeline
// passes the spans on unchanged and still counts them.
func TestGRPCTracesPassThrough(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	traces := new(consumertest.TracesSink)
	h := start(t, sink, nil)
	h.r.useTraces(traces)
	td := kongExport("PUT", "/g", 201)
	want := td.SpanCount()
	client := ptraceotlp.NewGRPCClient(dialGRPC(t, h.grpcAddr))
	if _, err := client.Export(context.Background(), ptraceotlp.NewExportRequestFromTraces(td)); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if traces.SpanCount() != want || traces.AllTraces()[0].ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(1).Name() != "kong.balancer" {
		t.Fatalf("passed %d spans, want %d unchanged", traces.SpanCount(), want)
	}
	assertCounts(t, countsOf(t, sink.AllMetrics()), map[string]int64{"kong PUT /g 201": 1})
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
