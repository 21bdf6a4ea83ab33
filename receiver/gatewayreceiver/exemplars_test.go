package gatewayreceiver

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// A traced request leaves its trace and span ids as the exemplar of the
// bucket it fell in, on every latency histogram point of its window; the
// value is the observation in the emitted unit.
func TestHistogramPointsCarryExemplars(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, nil)
	td := kongExport("GET", "/traced", 200)
	root := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	trace := pcommon.TraceID{0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	root.SetTraceID(trace)
	root.SetStartTimestamp(1_700_000_000_000_000_000)
	root.SetEndTimestamp(1_700_000_000_042_000_000) // 42 ms
	ctx := context.Background()
	if err := h.r.ingest.traces(ctx, td); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, md := range sink.AllMetrics() {
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for i := 0; i < ms.Len(); i++ {
			m := ms.At(i)
			if m.Type() != pmetric.MetricTypeHistogram || m.Name() != "http.server.request.duration" {
				continue
			}
			dp := m.Histogram().DataPoints().At(0)
			if dp.Exemplars().Len() != 1 {
				t.Fatalf("%d exemplars, want 1", dp.Exemplars().Len())
			}
			ex := dp.Exemplars().At(0)
			if ex.TraceID() != trace || ex.SpanID() != root.SpanID() || ex.DoubleValue() != float64(root.EndTimestamp()-root.StartTimestamp())/1e9 {
				t.Errorf("exemplar trace %v span %v value %v", ex.TraceID(), ex.SpanID(), ex.DoubleValue())
			}
			found++
		}
	}
	if found != 1 {
		t.Fatalf("%d request duration points, want 1", found)
	}
}
