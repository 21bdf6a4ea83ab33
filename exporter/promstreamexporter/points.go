package promstreamexporter

import (
	"context"
	"errors"
	"math"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"
	"github.com/otelgateway/otelgateway/internal/expohisto"
	"github.com/otelgateway/otelgateway/internal/identity"
)

// pointWriter stores the points of one metric into its family. It is the
// series.LabelSource of the point being stored, so creating a series needs no
// closure and the hit path allocates nothing.
type pointWriter struct {
	e      *promStreamExporter
	ctx    context.Context
	f      *series.Family
	c      *labelContext
	now    int64
	attrs  pcommon.Map
	labels []exposition.Label
	// The distribution point being stored, read by Fill.
	hist    pmetric.HistogramDataPoint
	summary pmetric.SummaryDataPoint
	expo    pmetric.ExponentialHistogramDataPoint
	fill    func(*pointWriter, *series.Dist)
	// ex holds the current point's exemplars (reused: no allocation once
	// grown).
	ex []series.Exemplar
}

// exemplars converts a point's exemplars into p.ex (those without a value
// left out) and returns them.
func (p *pointWriter) exemplars(in pmetric.ExemplarSlice) []series.Exemplar {
	p.ex = p.ex[:0]
	for i := 0; i < in.Len(); i++ {
		e := in.At(i)
		var v float64
		switch e.ValueType() {
		case pmetric.ExemplarValueTypeDouble:
			v = e.DoubleValue()
		case pmetric.ExemplarValueTypeInt:
			v = float64(e.IntValue())
		default:
			continue
		}
		p.ex = append(p.ex, series.Exemplar{TraceID: e.TraceID(), SpanID: e.SpanID(), Value: v, Time: int64(e.Timestamp())})
	}
	return p.ex
}

// Fill implements series.DistFiller for the current distribution point.
func (p *pointWriter) Fill(d *series.Dist) { p.fill(p, d) }

// Labels implements series.LabelSource for the current point.
func (p *pointWriter) Labels() []exposition.Label {
	p.labels = p.e.namer.seriesLabels(p.labels, p.c, p.attrs)
	return p.labels
}

// series finds or creates the series of a point; nil when the point must not
// be stored: it was flagged "no recorded value" (its series is removed, as
// the data model says the stream ended) or the table is full.
func (p *pointWriter) series(attrs pcommon.Map, flags pmetric.DataPointFlags) *series.Series {
	key := series.Key{Context: p.c.ctx, Attrs: attrs}
	hash := identity.Combine(p.c.hash, identity.OfMap(attrs))
	if flags.NoRecordedValue() {
		p.f.Remove(hash, &key)
		return nil
	}
	p.attrs = attrs
	s, err := p.f.Series(hash, &key, p.now, p)
	if errors.Is(err, series.ErrLimit) {
		p.e.limited(p.ctx, p.f.Name(), 1)
		return nil
	}
	return s
}

func (p *pointWriter) numbers(dps pmetric.NumberDataPointSlice) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if s := p.series(dp.Attributes(), dp.Flags()); s != nil {
			v := dp.DoubleValue()
			if dp.ValueType() == pmetric.NumberDataPointValueTypeInt {
				v = float64(dp.IntValue())
			}
			if p.e.cfg.SendTimestamps {
				s.SetTimestamp(int64(dp.Timestamp()))
			}
			if p.f.Type() == exposition.TypeCounter {
				// The start time is the stream's (the cumulative processor
				// sets it): OpenMetrics' _created, protobuf's
				// created_timestamp.
				s.SetCounter(v, int64(dp.StartTimestamp()), p.now)
				if dp.Exemplars().Len() > 0 {
					s.SetExemplars(p.exemplars(dp.Exemplars()))
				}
			} else {
				s.SetValue(v, p.now)
			}
		}
	}
}

// pointSlice and distPoint are what the pmetric slices and points of the
// three distribution types have in common.
type pointSlice[P any] interface {
	Len() int
	At(int) P
}

type distPoint interface {
	Attributes() pcommon.Map
	Flags() pmetric.DataPointFlags
	StartTimestamp() pcommon.Timestamp
	Timestamp() pcommon.Timestamp
}

// storeDists stores the points of a distribution metric: hold keeps the
// point where fill (run under the series' page lock) reads it and its
// exemplars in p.ex; the series keeps the point's times (pointTimes).
func storeDists[P distPoint, S pointSlice[P]](p *pointWriter, dps S, hold func(*pointWriter, P), fill func(*pointWriter, *series.Dist)) {
	for i := 0; i < dps.Len(); i++ {
		dp := dps.At(i)
		if s := p.series(dp.Attributes(), dp.Flags()); s != nil {
			p.ex = p.ex[:0]
			hold(p, dp)
			p.fill = fill
			s.UpdateHistogram(p.now, p.pointTimes(dp.StartTimestamp(), dp.Timestamp()), p, p.ex)
		}
	}
}

// pointTimes are a distribution point's times as its series keeps them:
// the timestamp only with send_timestamps (a gauge's or counter's is set
// only then too), so that without it an update writes none.
func (p *pointWriter) pointTimes(start, ts pcommon.Timestamp) series.PointTimes {
	t := series.PointTimes{Created: int64(start)}
	if p.e.cfg.SendTimestamps {
		t.Timestamp = int64(ts)
	}
	return t
}

func (p *pointWriter) histograms(dps pmetric.HistogramDataPointSlice) {
	storeDists(p, dps, func(p *pointWriter, dp pmetric.HistogramDataPoint) {
		p.hist = dp
		p.exemplars(dp.Exemplars())
	}, fillHistogram)
}

func fillHistogram(p *pointWriter, d *series.Dist) {
	dp := p.hist
	setBounds(p.f, d, dp.ExplicitBounds())
	d.Counts = resize(d.Counts, len(d.Bounds))
	var cum uint64
	counts := dp.BucketCounts()
	for j := range d.Bounds {
		if j < counts.Len() {
			cum += counts.At(j)
		}
		d.Counts[j] = cum
	}
	d.Count, d.Sum, d.HasSum = dp.Count(), dp.Sum(), dp.HasSum()
}

func (p *pointWriter) summaries(dps pmetric.SummaryDataPointSlice) {
	storeDists(p, dps, func(p *pointWriter, dp pmetric.SummaryDataPoint) { p.summary = dp }, fillSummary)
}

func fillSummary(p *pointWriter, d *series.Dist) {
	dp := p.summary
	qs := dp.QuantileValues()
	if !sameQuantiles(d.Bounds, qs) {
		d.Bounds = make([]float64, qs.Len())
		for j := range d.Bounds {
			d.Bounds[j] = qs.At(j).Quantile()
		}
	}
	values := d.ResizeValues(qs.Len())
	for j := range values {
		values[j] = qs.At(j).Value()
	}
	d.Count, d.Sum, d.HasSum = dp.Count(), dp.Sum(), true
}

// exponential stores exponential histograms. In the text formats they are
// written as classic histograms whose le bounds are the upper boundaries of
// the exponential buckets: negative buckets (as negative bounds), the zero
// bucket (le = zero threshold), then positive buckets, each cumulative; +Inf
// equals the count. Nothing is dropped; only resolution within a bucket is
// lost, as with any classic histogram.
func (p *pointWriter) exponential(dps pmetric.ExponentialHistogramDataPointSlice) {
	storeDists(p, dps, func(p *pointWriter, dp pmetric.ExponentialHistogramDataPoint) {
		p.expo = dp
		p.exemplars(dp.Exemplars())
	}, fillExponential)
}

func fillExponential(p *pointWriter, d *series.Dist) {
	dp := p.expo
	scale := dp.Scale()
	var bounds []float64
	var counts []uint64
	var cum uint64
	neg := dp.Negative()
	for j := neg.BucketCounts().Len() - 1; j >= 0; j-- {
		cum += neg.BucketCounts().At(j)
		// Negative bucket index i holds [-base^(i+1), -base^i): its upper
		// bound is -base^i.
		bounds = append(bounds, -expohisto.LowerBoundary(neg.Offset()+int32(j), scale))
		counts = append(counts, cum)
	}
	cum += dp.ZeroCount()
	bounds = append(bounds, dp.ZeroThreshold())
	counts = append(counts, cum)
	pos := dp.Positive()
	for j := 0; j < pos.BucketCounts().Len(); j++ {
		cum += pos.BucketCounts().At(j)
		// Positive bucket index i holds (base^i, base^(i+1)].
		bounds = append(bounds, expohisto.UpperBoundary(pos.Offset()+int32(j), scale))
		counts = append(counts, cum)
	}
	// le must strictly increase: drop a bound that does not (a zero
	// threshold wider than the first positive bucket), folding its count
	// into the next bucket, which is cumulative anyway.
	w := 0
	for j := range bounds {
		if w > 0 && bounds[j] <= bounds[w-1] {
			bounds[w-1], counts[w-1] = math.Max(bounds[w-1], bounds[j]), counts[j]
			continue
		}
		bounds[w], counts[w] = bounds[j], counts[j]
		w++
	}
	bounds, counts = bounds[:w], counts[:w]
	if !slices.Equal(d.Bounds, bounds) {
		d.Bounds = bounds
	}
	d.Counts = counts
	d.Count, d.Sum, d.HasSum = dp.Count(), dp.Sum(), dp.HasSum()
	d.SetNative(nativeOf(d.Native(), dp))
}

// Prometheus native histograms take schemas -4 to 8; OTel scales go to 20.
const maxNativeSchema, minNativeSchema = 8, -4

// nativeOf converts an exponential histogram point into a native histogram,
// merging buckets down to schema 8 when the scale is finer (each step halves
// the resolution: OTel index i goes to i>>1). A scale below -4 has no native
// form; the point is then only written with classic buckets.
func nativeOf(n *series.Native, dp pmetric.ExponentialHistogramDataPoint) *series.Native {
	scale := dp.Scale()
	if scale < minNativeSchema {
		return nil
	}
	shift := max(scale-maxNativeSchema, 0)
	if n == nil {
		n = new(series.Native)
	}
	n.Schema = scale - shift
	n.ZeroThreshold = dp.ZeroThreshold()
	n.ZeroCount = dp.ZeroCount()
	n.PosOffset, n.Pos = downscale(n.Pos[:0], dp.Positive(), shift)
	n.NegOffset, n.Neg = downscale(n.Neg[:0], dp.Negative(), shift)
	return n
}

// downscale merges buckets by 2^shift and returns the Prometheus index of the
// first bucket (OTel index + 1: OTel's bucket i is (base^i, base^(i+1)],
// Prometheus's i is (base^(i-1), base^i]).
func downscale(dst []uint64, b pmetric.ExponentialHistogramDataPointBuckets, shift int32) (int32, []uint64) {
	counts := b.BucketCounts()
	if counts.Len() == 0 {
		return 0, dst
	}
	first := b.Offset() >> shift
	for j := 0; j < counts.Len(); j++ {
		idx := int((b.Offset()+int32(j))>>shift - first)
		for len(dst) <= idx {
			dst = append(dst, 0)
		}
		dst[idx] += counts.At(j)
	}
	return first + 1, dst
}

// setBounds keeps d.Bounds when they did not change (the rendered le texts
// are reused) and replaces the slice when they did.
func setBounds(f *series.Family, d *series.Dist, bounds pcommon.Float64Slice) {
	if len(d.Bounds) == bounds.Len() {
		same := true
		for j, b := range d.Bounds {
			if b != bounds.At(j) {
				same = false
				break
			}
		}
		if same {
			return
		}
	}
	d.Bounds = f.SharedBounds(bounds)
}

func sameQuantiles(have []float64, qs pmetric.SummaryDataPointValueAtQuantileSlice) bool {
	if len(have) != qs.Len() {
		return false
	}
	for j, q := range have {
		if q != qs.At(j).Quantile() {
			return false
		}
	}
	return true
}

func resize(s []uint64, n int) []uint64 {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]uint64, n)
}
