package expohisto

import (
	"math"
	"math/big"
	"testing"
)

// The scales and indexes every property is checked on.
const (
	testMinScale, testMaxScale = -4, 20
	testIndexes                = 2000
)

// exactBound returns 2^(i/2^scale) correctly rounded to a float64: from
// 2^q times the product of 2^(2^-k) for the set bits of r, each a k-fold
// square root of 2, all at 256 bits.
func exactBound(i int64, scale int32, roots []*big.Float) float64 {
	if scale <= 0 {
		return math.Ldexp(1, int(i<<-scale))
	}
	q, r := i>>scale, i&(1<<scale-1)
	x := new(big.Float).SetPrec(256).SetInt64(1)
	for b := range scale {
		if r&(1<<b) != 0 {
			x.Mul(x, roots[scale-b])
		}
	}
	x.SetMantExp(x, int(q))
	f, _ := x.Float64()
	return f
}

// sqrtChain returns roots[k] = 2^(2^-k) for k up to n, at 256 bits.
func sqrtChain(n int) []*big.Float {
	roots := make([]*big.Float, n+1)
	roots[0] = new(big.Float).SetPrec(256).SetInt64(2)
	for k := 1; k <= n; k++ {
		roots[k] = new(big.Float).SetPrec(256).Sqrt(roots[k-1])
	}
	return roots
}

func ulps(a, b float64) int64 {
	d := int64(math.Float64bits(a)) - int64(math.Float64bits(b))
	return max(d, -d)
}

// normal reports whether bucket i's bounds are both normal floats, where
// exactness and strict order are promised.
func normal(i int64, scale int32) bool {
	lo, hi := lower(i, scale), lower(i+1, scale)
	return lo >= 0x1p-1022 && !math.IsInf(hi, 1)
}

// TestBoundsExact checks every bound against 2^(i/2^scale) worked out at
// 256 bits and rounded once: it must be that float64 exactly, whether it is
// a power of two (all of scale ≤ 0, every 2^scale-th index above) or not.
func TestBoundsExact(t *testing.T) {
	roots := sqrtChain(testMaxScale)
	for scale := int32(testMinScale); scale <= testMaxScale; scale++ {
		for i := int64(-testIndexes); i <= testIndexes; i++ {
			if !normal(i, scale) {
				continue
			}
			got, want := LowerBoundary(int32(i), scale), exactBound(i, scale, roots)
			if got != want {
				t.Errorf("LowerBoundary(%d, %d) = %v, want %v (%d ulps off)", i, scale, got, want, ulps(got, want))
			}
			if u := UpperBoundary(int32(i), scale); u != LowerBoundary(int32(i+1), scale) {
				t.Errorf("UpperBoundary(%d, %d) = %v, LowerBoundary(%d) = %v", i, scale, u, i+1, LowerBoundary(int32(i+1), scale))
			}
		}
	}
}

// TestBoundsIncrease checks that bounds strictly increase with the index,
// across octaves too, and run to +Inf and 0 rather than wrapping.
func TestBoundsIncrease(t *testing.T) {
	for scale := int32(testMinScale); scale <= testMaxScale; scale++ {
		for i := int64(-testIndexes); i < testIndexes; i++ {
			lo, hi := lower(i, scale), lower(i+1, scale)
			if normal(i, scale) && !(lo < hi) {
				t.Errorf("scale %d: bound %d = %v, bound %d = %v: not increasing", scale, i, lo, i+1, hi)
			}
			if lo > hi {
				t.Errorf("scale %d: bound %d = %v > bound %d = %v", scale, i, lo, i+1, hi)
			}
		}
	}
	if got := UpperBoundary(math.MaxInt32, 0); !math.IsInf(got, 1) {
		t.Errorf("UpperBoundary(MaxInt32, 0) = %v, want +Inf", got)
	}
	if got := LowerBoundary(math.MinInt32, 0); got != 0 {
		t.Errorf("LowerBoundary(MinInt32, 0) = %v, want 0", got)
	}
}

// TestIndexAgreesWithBounds maps each bound, and the floats either side of
// it, back to an index: a bound belongs to the bucket below it (buckets are
// (lower, upper]), the next float up to the bucket it starts.
func TestIndexAgreesWithBounds(t *testing.T) {
	for scale := int32(testMinScale); scale <= testMaxScale; scale++ {
		for i := int64(-testIndexes); i <= testIndexes; i++ {
			if !normal(i-1, scale) || !normal(i, scale) {
				continue
			}
			b := LowerBoundary(int32(i), scale)
			if got := Index(b, scale); int64(got) != i-1 {
				t.Errorf("Index(LowerBoundary(%d, %d) = %v) = %d, want %d", i, scale, b, got, i-1)
			}
			if up := math.Nextafter(b, math.Inf(1)); int64(Index(up, scale)) != i {
				t.Errorf("Index(%v, %d) = %d, want %d", up, scale, Index(up, scale), i)
			}
			if down := math.Nextafter(b, 0); down > LowerBoundary(int32(i-1), scale) && int64(Index(down, scale)) != i-1 {
				t.Errorf("Index(%v, %d) = %d, want %d", down, scale, Index(down, scale), i-1)
			}
			// And a value inside the bucket.
			mid := (b + UpperBoundary(int32(i), scale)) / 2
			j := Index(mid, scale)
			if !(LowerBoundary(j, scale) < mid && mid <= UpperBoundary(j, scale)) || int64(j) != i {
				t.Errorf("Index(%v, %d) = %d, want %d", mid, scale, j, i)
			}
		}
	}
}

func TestIndexCases(t *testing.T) {
	cases := []struct {
		v     float64
		scale int32
		want  int32
	}{
		{1, 0, -1}, {1.5, 0, 0}, {2, 0, 0}, {3, 0, 1}, {4, 0, 1},
		{4, -1, 0}, {5, -1, 1}, {16, -1, 1}, {17, -1, 2},
		{2, 1, 1}, {1.5, 1, 1}, {1.4, 1, 0}, {0.5, 0, -2},
		{0, 0, math.MinInt32}, {-1, 3, math.MinInt32}, {math.NaN(), 0, math.MinInt32},
		{math.Inf(1), 3, math.MaxInt32},
	}
	for _, c := range cases {
		if got := Index(c.v, c.scale); got != c.want {
			t.Errorf("Index(%g, %d) = %d, want %d", c.v, c.scale, got, c.want)
		}
	}
	bounds := []struct {
		i, scale int32
		want     float64
	}{
		{1, 0, 4}, {0, -1, 4}, {1, 1, 2},
	}
	for _, c := range bounds {
		if got := UpperBoundary(c.i, c.scale); got != c.want {
			t.Errorf("UpperBoundary(%d, %d) = %g, want %g", c.i, c.scale, got, c.want)
		}
	}
}
