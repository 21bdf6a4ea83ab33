package gatewayreceiver

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net/http"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// sampledKong returns the Kong-shaped requests of n traces that a
// consistent probability sampler keeps at threshold th (a trace is kept
// when the 56 random low bits of its trace id are ≥ T), with tracestate
// ot=th:<th> when withThreshold.
func sampledKong(n int, th string, t56 uint64, withThreshold bool) (ptrace.Traces, int) {
	rng := rand.New(rand.NewPCG(1, 2))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "kong")
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("kong-internal")
	kept := 0
	for i := range n {
		var id pcommon.TraceID
		binary.BigEndian.PutUint64(id[0:8], rng.Uint64())
		binary.BigEndian.PutUint64(id[8:16], rng.Uint64())
		if binary.BigEndian.Uint64(id[8:16])&(1<<56-1) < t56 {
			continue // not sampled
		}
		kept++
		s := ss.Spans().AppendEmpty()
		s.SetName("kong")
		s.SetKind(ptrace.SpanKindServer)
		s.SetTraceID(id)
		s.SetSpanID(pcommon.SpanID{byte(i), byte(i >> 8), 1})
		if withThreshold {
			s.TraceState().FromRaw("ot=th:" + th)
		}
		s.Attributes().PutStr("http.method", "GET")
		s.Attributes().PutStr("http.route", "/sampled")
		s.Attributes().PutInt("http.status_code", 200)
	}
	return td, kept
}

// 10,000 Kong-shaped requests sampled at 10 % with the OpenTelemetry
// threshold are counted with their adjusted count (10 each): the counter
// estimates the 10,000 within its error (relative standard error
// √((1−p)/(N·p)) = 3 %; the bound is 3σ). Without the threshold, each kept
// span counts once and the telemetry says their sampling is unknown; with
// sampling_rates the estimate is back, flagged as configured.
func TestSampledSpansCountTheirAdjustedCount(t *testing.T) {
	const n, th = 10_000, "e6666666666666"
	t56 := uint64(0xe6666666666666)
	for _, c := range []struct {
		name          string
		withThreshold bool
		rates         map[string]float64
		sampling      string
		estimates     bool
	}{
		{"threshold", true, nil, "threshold", true},
		{"no threshold", false, nil, "unknown", false},
		{"no threshold, sampling_rates", false, map[string]float64{"kong": 0.1}, "configured", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			sink := new(consumertest.MetricsSink)
			h := start(t, sink, func(cfg *Config) { cfg.SamplingRates = c.rates })
			td, kept := sampledKong(n, th, t56, c.withThreshold)
			if code, body := post(t, h.httpAddr, pbContentType, protoBody(t, td)); code != http.StatusOK {
				t.Fatalf("export: %d %s", code, body)
			}
			if err := h.r.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			got := countsOf(t, sink.AllMetrics())["kong GET /sampled 200"]
			want := int64(kept)
			if c.estimates {
				want = int64(kept) * 10
				if rel := math.Abs(float64(got)-n) / n; rel > 0.09 {
					t.Errorf("estimated %d requests of %d (%.1f %% off; %d spans kept)", got, n, 100*rel, kept)
				}
			}
			if got != want {
				t.Errorf("counted %d, want %d (%d spans kept)", got, want, kept)
			}
			if m := testutil.Int64Sum(t, h.tel, "otelcol_receiver_gateway_span_sampling", attribute.String("sampling", c.sampling)); m != int64(kept) {
				t.Errorf("span_sampling{sampling=%q} = %d, want %d", c.sampling, m, kept)
			}
			t.Logf("%s: %d of %d spans kept, counted %d", c.name, kept, n, got)
		})
	}
}
