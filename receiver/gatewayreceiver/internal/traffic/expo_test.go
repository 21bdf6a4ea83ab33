package traffic

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/otelgateway/otelgateway/internal/expohisto"
)

// expoRef counts values at one scale, the reference an expoHist must equal
// once it has settled at that scale (bucket i at scale s-c is buckets
// i<<c … (i+1)<<c - 1 at scale s, so rescaling loses nothing but resolution).
func expoRef(values []float64, scale int32) (zero uint64, counts map[int32]uint64) {
	counts = map[int32]uint64{}
	for _, v := range values {
		if v > 0 {
			counts[expohisto.Index(v, scale)]++
		} else {
			zero++
		}
	}
	return zero, counts
}

// Random latency mixes (narrow, wide, with zeros, values arriving from low
// to high and back): the histogram holds at most max_size buckets, every
// value is counted in the bucket that holds it at the final scale, and that
// scale is the finest at which all values fit in max_size buckets.
func TestExpoHistCountsEveryValueAtTheFinestScaleThatFits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		size := 2 + rng.IntN(200)
		h := newExpoHist(size)
		var values []float64
		spread := math.Pow(10, float64(rng.IntN(12))) // 1 … 1e11 wide
		for range 1 + rng.IntN(2000) {
			v := 1e-4 * math.Pow(spread, rng.Float64())
			switch rng.IntN(20) {
			case 0:
				v = 0
			case 1:
				v = math.Ldexp(1, rng.IntN(40)-20) // exact powers of two: bucket upper bounds
			}
			values = append(values, v)
			h.observe(v, 1)
		}
		off, counts := h.buckets()
		if len(counts) > size {
			t.Fatalf("trial %d: %d buckets, max_size %d", trial, len(counts), size)
		}
		zero, want := expoRef(values, h.scale)
		if h.zero != zero {
			t.Fatalf("trial %d: zero count %d, want %d", trial, h.zero, zero)
		}
		for i, n := range counts {
			if n != want[off+int32(i)] {
				t.Fatalf("trial %d scale %d: bucket %d = %d, want %d", trial, h.scale, off+int32(i), n, want[off+int32(i)])
			}
			delete(want, off+int32(i))
		}
		for i, n := range want {
			if n > 0 {
				t.Fatalf("trial %d: bucket %d (%d values) outside the emitted range", trial, i, n)
			}
		}
		if h.scale < expoMaxScale && len(values) > int(zero) {
			_, finer := expoRef(values, h.scale+1)
			lo, hi := int32(math.MaxInt32), int32(math.MinInt32)
			for i := range finer {
				lo, hi = min(lo, i), max(hi, i)
			}
			if int(hi-lo) < size {
				t.Fatalf("trial %d: scale %d, but scale %d fits (%d buckets ≤ %d)", trial, h.scale, h.scale+1, hi-lo+1, size)
			}
		}
	}
}

// A window's snapshot merged back (a retried flush) into the same series,
// now at another scale and with other values, counts both.
func TestExpoHistMergeAcrossScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		a, b := newExpoHist(20), newExpoHist(20)
		var all []float64
		for range 50 {
			v := math.Pow(10, rng.Float64()*float64(1+trial%6))
			a.observe(v, 1)
			all = append(all, v)
		}
		off, counts := a.buckets()
		snap := append([]uint64(nil), counts...)
		for range 50 {
			v := math.Pow(10, rng.Float64()*float64(1+trial%4)-2)
			b.observe(v, 1)
			all = append(all, v)
		}
		b.merge(a.scale, off, snap, a.zero)
		boff, bcounts := b.buckets()
		_, want := expoRef(all, b.scale)
		var total uint64
		for i, n := range bcounts {
			if n != want[boff+int32(i)] {
				t.Fatalf("trial %d: bucket %d = %d, want %d", trial, boff+int32(i), n, want[boff+int32(i)])
			}
			total += n
		}
		if total != uint64(len(all)) {
			t.Fatalf("trial %d: %d counted, want %d", trial, total, len(all))
		}
	}
}

// With histogram.exponential only the otel profile's duration histograms
// (recorded in ms, emitted in seconds) are exponential; the token
// histograms stay explicit.
func TestOnlyDurationHistogramsAreExponential(t *testing.T) {
	p := otelProfile.withDurationHistograms(nil, 160)
	for _, f := range p.families {
		if want := f.hist && f.scale == 1e-3; (f.expoSize > 0) != want {
			t.Errorf("%s: expoSize %d; only the duration histograms are exponential", f.name, f.expoSize)
		}
	}
}
