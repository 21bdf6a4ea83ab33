package gatewayreceiver

import (
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/internal/expohisto"
)

func TestExponentialHistogramConfig(t *testing.T) {
	runConfigCases(t, []configCase{
		{file: "histogram_exponential.yaml", check: func(t *testing.T, c *Config) {
			if c.expoSize() != 40 {
				t.Errorf("expoSize = %d, want 40", c.expoSize())
			}
		}},
		{file: "histogram_exponential_default.yaml", check: func(t *testing.T, c *Config) {
			if c.expoSize() != defaultExpoMaxSize {
				t.Errorf("expoSize = %d, want the default %d", c.expoSize(), defaultExpoMaxSize)
			}
		}},
		{file: "default.yaml", check: func(t *testing.T, c *Config) {
			if c.expoSize() != 0 {
				t.Errorf("expoSize = %d without histogram.exponential, want 0 (explicit)", c.expoSize())
			}
		}},
		{file: "histogram_both.yaml", wantError: "histogram: set explicit or exponential, not both"},
		{file: "histogram_exponential_kong.yaml", wantError: `histogram applies to the "otel" profile only; the kong and apisix profiles keep their gateway's buckets` +
			"\nhistogram.exponential.max_size must be in [2, 1024], got 1"},
	})
}

// With histogram.exponential the otel profile's duration families are
// exponential histograms whose buckets hold what was sent (a span of 42 ms
// lands in the bucket around 0.042 s), with the exemplar of the traced
// request; the token histograms stay explicit.
func TestExponentialDurationHistograms(t *testing.T) {
	sink := new(consumertest.MetricsSink)
	h := start(t, sink, func(c *Config) {
		c.Histogram.Exponential.GetOrInsertDefault().MaxSize = 160
	})
	td := kongExport("GET", "/expo", 200)
	root := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	trace := pcommon.TraceID{0xab, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	root.SetTraceID(trace)
	root.SetStartTimestamp(1_700_000_000_000_000_000)
	root.SetEndTimestamp(1_700_000_000_042_000_000) // 42 ms
	ctx := context.Background()
	for range 3 {
		if err := h.r.ingest.traces(ctx, td); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.r.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	types := map[string]pmetric.MetricType{}
	for _, md := range sink.AllMetrics() {
		ms := md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics()
		for i := 0; i < ms.Len(); i++ {
			m := ms.At(i)
			types[m.Name()] = m.Type()
			if m.Name() != "http.server.request.duration" {
				continue
			}
			if m.Type() != pmetric.MetricTypeExponentialHistogram {
				t.Fatalf("%s is a %v, want an exponential histogram", m.Name(), m.Type())
			}
			dp := m.ExponentialHistogram().DataPoints().At(0)
			if dp.Count() != 3 || math.Abs(dp.Sum()-0.126) > 1e-12 || dp.Positive().BucketCounts().Len() != 1 {
				t.Fatalf("count %d sum %v buckets %v, want 3, 0.126, one bucket", dp.Count(), dp.Sum(), dp.Positive().BucketCounts().AsRaw())
			}
			i, s := dp.Positive().Offset(), dp.Scale()
			// 20, the data model's finest scale: a series starts there, and
			// one value never lowers it.
			if !(expohisto.LowerBoundary(i, s) < 0.042 && 0.042 <= expohisto.UpperBoundary(i, s)) || s != 20 {
				t.Errorf("bucket %d at scale %d does not hold 0.042", i, s)
			}
			if dp.Exemplars().Len() != 1 || dp.Exemplars().At(0).TraceID() != trace {
				t.Errorf("exemplars %d, want the traced request's", dp.Exemplars().Len())
			}
		}
	}
	if types["http.server.request.duration"] != pmetric.MetricTypeExponentialHistogram {
		t.Errorf("metric types %v, want an exponential request duration histogram", types)
	}
}
