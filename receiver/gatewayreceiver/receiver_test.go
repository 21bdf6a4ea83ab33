package gatewayreceiver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"go.opentelemetry.io/collector/receiver/receivertest"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

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
