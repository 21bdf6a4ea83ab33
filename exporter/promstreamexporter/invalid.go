package promstreamexporter

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// What makes a distribution point impossible to write validly. Such a point
// is dropped (reason invalid_point) rather than written: Prometheus would
// read two buckets of one le (or two quantile lines of one quantile) as a
// duplicate series, and bounds that go down as counts that go down.

// invalidBounds reports why a histogram's explicit bounds cannot be its le
// bounds: they must increase strictly, as the data model requires, and not
// be NaN. A last bound of +Inf is accepted (fillHistogram leaves it to the
// +Inf bucket).
func invalidBounds(b pcommon.Float64Slice) string {
	for i := 0; i < b.Len(); i++ {
		v := b.At(i)
		switch {
		case math.IsNaN(v):
			return "a histogram bound is NaN"
		case i > 0 && v <= b.At(i-1):
			return "histogram bounds do not increase strictly"
		}
	}
	return ""
}

// invalidQuantiles reports why a summary's quantiles cannot be written: they
// must increase strictly and not be NaN (two lines of one quantile are one
// series twice).
func invalidQuantiles(qs pmetric.SummaryDataPointValueAtQuantileSlice) string {
	for i := 0; i < qs.Len(); i++ {
		q := qs.At(i).Quantile()
		switch {
		case math.IsNaN(q):
			return "a summary quantile is NaN"
		case i > 0 && q <= qs.At(i-1).Quantile():
			return "summary quantiles do not increase strictly"
		}
	}
	return ""
}

// invalidZeroThreshold reports why an exponential histogram's zero
// threshold cannot be written: it bounds the zero bucket, so it must be a
// number, not negative, and finite.
func invalidZeroThreshold(zt float64) string {
	if math.IsNaN(zt) || zt < 0 || math.IsInf(zt, 1) {
		return "the zero threshold of an exponential histogram is not a finite non-negative number"
	}
	return ""
}
