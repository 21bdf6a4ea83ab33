package gatewayreceiver

import (
	"context"
	"math"
	"math/rand/v2"
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
		if err := h.r.ingest(ctx, td); err != nil {
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
			if !(expohisto.LowerBoundary(i, s) < 0.042 && 0.042 <= expohisto.UpperBoundary(i, s)) || s != expoMaxScale {
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
	p := otelProfile.withDurationHistograms(nil, 160)
	for _, f := range p.families {
		if want := f.hist && f.scale == 1e-3; (f.expoSize > 0) != want {
			t.Errorf("%s: expoSize %d; only the duration histograms are exponential", f.name, f.expoSize)
		}
	}
}
