package promstreamexporter

import (
	"context"
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/internal/testutil"
)

// TestPointsThatCannotBeWrittenValidly: histogram bounds that repeat, go
// down or are NaN, summary quantiles that repeat, and an exponential
// histogram's NaN zero threshold would write one series twice (two lines of
// one le) or a bucket that is not one; such points are dropped and counted
// (invalid_point), their series kept as they were. A last explicit bound of
// +Inf, and exponential buckets past the largest float64, are the +Inf
// bucket: written once. Before, each wrote `le="+Inf"` twice.
func TestPointsThatCannotBeWrittenValidly(t *testing.T) {
	e, tel := newTestExporter(t)
	md := pmetric.NewMetrics()
	ms := md.ResourceMetrics().AppendEmpty().ScopeMetrics().AppendEmpty().Metrics()
	h := ms.AppendEmpty()
	h.SetName("h")
	hh := h.SetEmptyHistogram()
	hh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	for i, bounds := range [][]float64{{1, 1}, {2, 1}, {math.NaN()}, {1, math.Inf(1)}} {
		dp := hh.DataPoints().AppendEmpty()
		dp.Attributes().PutInt("case", int64(i))
		dp.ExplicitBounds().FromRaw(bounds)
		dp.BucketCounts().FromRaw(make([]uint64, len(bounds)+1))
		dp.BucketCounts().SetAt(0, 2)
		dp.SetCount(2)
	}
	s := ms.AppendEmpty()
	s.SetName("s")
	sdp := s.SetEmptySummary().DataPoints().AppendEmpty()
	for range 2 {
		q := sdp.QuantileValues().AppendEmpty()
		q.SetQuantile(0.5)
	}
	x := ms.AppendEmpty()
	x.SetName("x")
	xh := x.SetEmptyExponentialHistogram()
	xh.SetAggregationTemporality(pmetric.AggregationTemporalityCumulative)
	nan := xh.DataPoints().AppendEmpty()
	nan.Attributes().PutStr("case", "nan")
	nan.SetZeroThreshold(math.NaN())
	huge := xh.DataPoints().AppendEmpty()
	huge.Attributes().PutStr("case", "huge")
	huge.SetScale(-10) // base 2^1024: bucket 0 is (1, +Inf]
	huge.Positive().BucketCounts().FromRaw([]uint64{1, 1, 1})
	huge.SetCount(3)
	if err := e.consumeMetrics(context.Background(), md); err != nil {
		t.Fatal(err)
	}
	want := `# TYPE h histogram
h_bucket{case="3",le="1.0"} 2
h_bucket{case="3",le="+Inf"} 2
h_count{case="3"} 2
# TYPE x histogram
x_bucket{case="huge",le="0.0"} 0
x_bucket{case="huge",le="+Inf"} 3
x_count{case="huge"} 3
`
	if got := scrape(t, e); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	assertParses(t, []byte(want))
	if got := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_dropped_points", attribute.String("reason", reasonInvalid)); got != 5 {
		t.Errorf("dropped{reason=invalid_point} = %d, want 5", got)
	}
}
