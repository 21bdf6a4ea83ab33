// Package expohisto is the bucket maths of OpenTelemetry exponential
// histograms, shared by the cumulative processor (merging at a common
// scale, widening the zero bucket) and the promstream exporter (the `le`
// bounds of the classic form).
//
// At scale s the base is 2^(2^-s) and bucket i holds the values in
// (base^i, base^(i+1)]; base^i is its [LowerBoundary]
// (https://opentelemetry.io/docs/specs/otel/metrics/data-model/#exponentialhistogram).
//
// The bounds are exact, or correctly rounded where no float64 is exact:
//
//   - at scale ≤ 0 every bound is a power of two, 2^(i·2^-s), and is exact
//     (math.Ldexp);
//   - at scale > 0 the index splits into whole octaves and a fraction,
//     i = q·2^s + r with 0 ≤ r < 2^s, and the bound is 2^q · 2^(r/2^s), as
//     in the data model's reference LowerBoundary ("Producer
//     Expectations"): powers of two (r = 0) are exact, and 2^(r/2^s) is the
//     product of 2^(2^-k) over the set bits of r, multiplied in
//     double-double arithmetic (about 100 bits) from a table of those roots
//     worked out once at 256 bits, then rounded once. math.Exp2 alone is not
//     enough (math.Exp2(0.5) is one ulp below √2), and math.Pow(base, i)
//     multiplies the rounding of base by i.
//
// So bounds increase strictly (while they are normal floats) and equal what
// any correctly rounded implementation prints.
//
// [Index] maps a value to its bucket with a fast estimate that it then
// corrects against [LowerBoundary] itself, so the two always agree:
// LowerBoundary(Index(v)) < v ≤ UpperBoundary(Index(v)), bounds included.
package expohisto // import "github.com/otelgateway/otelgateway/internal/expohisto"

import (
	"math"
	"math/big"
)

// MinScale and MaxScale are the scales the data model allows; the functions
// accept any scale, but outside this range bounds over- or underflow
// quickly.
const (
	MinScale = -10
	MaxScale = 20
)

// LowerBoundary returns base^index at scale, the exclusive lower bound of
// bucket index. It is +Inf or 0 where the bound overflows or underflows a
// float64.
func LowerBoundary(index, scale int32) float64 {
	return lower(int64(index), scale)
}

// UpperBoundary returns base^(index+1) at scale, the inclusive upper bound
// of bucket index (the lower bound of index+1, without int32 overflow).
func UpperBoundary(index, scale int32) float64 {
	return lower(int64(index)+1, scale)
}

func lower(i int64, scale int32) float64 {
	switch {
	case scale <= 0:
		// 2^(i·2^-scale). |i| ≤ 2^31, so a shift up to 32 stays within
		// int64, and every exponent beyond ±2^32 gives +Inf or 0 anyway.
		return math.Ldexp(1, int(i<<min(-scale, 32)))
	case scale < int32(len(roots)):
		q, r := i>>scale, i&(1<<scale-1)
		hi, lo := 1.0, 0.0
		for k := scale; r != 0; k, r = k-1, r>>1 {
			if r&1 != 0 { // bit b of r contributes 2^(2^b/2^s) = 2^(2^-(s-b))
				hi, lo = mul(hi, lo, roots[k].hi, roots[k].lo)
			}
		}
		return math.Ldexp(hi, int(q))
	default:
		// Far past MaxScale (no valid data): i·2^-scale is exact, and
		// math.Exp2's last bit does not matter there.
		return math.Exp2(math.Ldexp(float64(i), -int(scale)))
	}
}

// roots[k] is 2^(2^-k) as a double-double: hi + lo, |lo| ≤ ulp(hi)/2.
var roots = func() (t [63]struct{ hi, lo float64 }) {
	x := new(big.Float).SetPrec(256).SetInt64(2)
	for k := 1; k < len(t); k++ {
		x.Sqrt(x)
		t[k].hi, _ = x.Float64()
		t[k].lo, _ = new(big.Float).Sub(x, new(big.Float).SetFloat64(t[k].hi)).Float64()
	}
	return t
}()

// mul returns the double-double product of ah+al and bh+bl, normalized so
// that hi is the product rounded to a float64.
func mul(ah, al, bh, bl float64) (hi, lo float64) {
	p := ah * bh
	e := math.FMA(ah, bh, -p) + (ah*bl + al*bh)
	hi = p + e
	return hi, e - (hi - p)
}

// Index returns the index of the bucket at scale that holds v > 0: the i
// with LowerBoundary(i) < v ≤ UpperBoundary(i). It returns math.MinInt32 for
// v ≤ 0 or NaN (no bucket holds them) and math.MaxInt32 for +Inf.
func Index(v float64, scale int32) int32 {
	switch {
	case !(v > 0):
		return math.MinInt32
	case math.IsInf(v, 1):
		return math.MaxInt32
	case scale <= 0:
		// Exact: v = frac × 2^exp with frac in [0.5, 1), and an exact power
		// of two is the upper bound of the bucket below.
		frac, exp := math.Frexp(v)
		i := int64(exp - 1)
		if frac == 0.5 {
			i--
		}
		return int32(i >> min(-scale, 32))
	}
	// Estimate, then step to the bucket LowerBoundary agrees with: the
	// estimate is off by at most one near a bound.
	est := math.Floor(math.Log2(v) * math.Ldexp(1, int(scale)))
	i := int64(max(min(est, math.MaxInt32), math.MinInt32))
	for i > math.MinInt32 && v <= lower(i, scale) {
		i--
	}
	for i < math.MaxInt32 && v > lower(i+1, scale) {
		i++
	}
	return int32(i)
}
