package promstreamexporter

import (
	"slices"
	"testing"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/expohisto"
)

// TestExponentialBoundsExact pins the le bounds of an exponential histogram
// at a positive scale to internal/expohisto's: 2^(8/8) is 2, not the
// 1.9999999999999996 that math.Pow(2^(1/8), 8) gave.
func TestExponentialBoundsExact(t *testing.T) {
	dp := pmetric.NewExponentialHistogramDataPoint()
	dp.SetScale(3)
	dp.Positive().SetOffset(7) // (2^(7/8), 2], (2, 2^(9/8)]
	dp.Positive().BucketCounts().FromRaw([]uint64{1, 1})
	dp.Negative().SetOffset(8) // [-2^(9/8), -2)
	dp.Negative().BucketCounts().FromRaw([]uint64{1})
	dp.SetCount(3)
	p := &pointWriter{expo: dp}
	var d series.Dist
	fillExponential(p, &d)
	want := []float64{-2, 0, 2, expohisto.UpperBoundary(8, 3)}
	if !slices.Equal(d.Bounds, want) {
		t.Fatalf("bounds = %v, want %v", d.Bounds, want)
	}
}
