package cumulativeprocessor

import (
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/internal/expohisto"
)

// expState is the cumulative state of an exponential histogram: one scale
// for both ranges, a zero bucket of width zeroThreshold, and the positive
// and negative ranges as offset + dense counts.
type expState struct {
	moments
	count, zeroCount uint64
	scale            int32
	zeroThreshold    float64
	pos, neg         expBuckets
	// prev is the state before the last window (its own prev unused),
	// allocated at the stream's second window and reused after.
	prev *expState
}

// expBuckets holds counts[i] for bucket index offset+i.
type expBuckets struct {
	offset int32
	counts []uint64
}

// expKind folds delta exponential histograms.
var expKind = kind[pmetric.ExponentialHistogramDataPoint]{
	fold: foldExp, write: writeExp, save: saveExp, restore: restoreExp,
	exemplars: pmetric.ExponentialHistogramDataPoint.Exemplars,
}

func saveExp(s *stream) {
	e := s.exp
	if e == nil {
		s.fresh = true // nothing before: a replacement starts again
		return
	}
	if e.prev == nil {
		e.prev = new(expState)
	}
	e.prev.copyFrom(e)
}

func restoreExp(s *stream) {
	if e := s.exp; e != nil && e.prev != nil {
		e.copyFrom(e.prev)
	}
}

// copyFrom sets e's value to o's, reusing e's bucket arrays (prev excepted).
func (e *expState) copyFrom(o *expState) {
	e.moments, e.count, e.zeroCount = o.moments, o.count, o.zeroCount
	e.scale, e.zeroThreshold = o.scale, o.zeroThreshold
	e.pos.offset, e.pos.counts = o.pos.offset, append(e.pos.counts[:0], o.pos.counts...)
	e.neg.offset, e.neg.counts = o.neg.offset, append(e.neg.counts[:0], o.neg.counts...)
}

// foldExp merges dp into s's histogram (the spec's merge of exponential
// histograms, as contrib's deltatocumulative does it):
//  1. the common scale is the lower of the two, lowered further until each
//     range of the union spans at most max_buckets buckets (downscaling by
//     one merges bucket pairs: index i becomes i>>1);
//  2. when the zero thresholds differ, the zero bucket widens to the larger
//     one, rounded up to the upper bound of the bucket that contains it,
//     and every bucket at or below that bucket moves into the zero count;
//  3. counts, sums and the zero count add; min and max combine.
func foldExp(p *cumulativeProcessor, s *stream, dp pmetric.ExponentialHistogramDataPoint) reason {
	e := s.exp
	if e == nil {
		e = &expState{
			scale: dp.Scale(), zeroThreshold: dp.ZeroThreshold(),
			moments: startMoments(dp),
		}
		s.exp = e
	}
	pos, neg := dp.Positive(), dp.Negative()

	// 1. Scale.
	t := min(e.scale, dp.Scale())
	plo, phi, pok := unionRange(&e.pos, e.scale, pos, dp.Scale(), t)
	nlo, nhi, nok := unionRange(&e.neg, e.scale, neg, dp.Scale(), t)
	maxB := int64(p.cfg.Limits.MaxBuckets)
	for (pok && phi-plo+1 > maxB) || (nok && nhi-nlo+1 > maxB) {
		t--
		plo, phi, nlo, nhi = plo>>1, phi>>1, nlo>>1, nhi>>1
	}
	e.pos.downscale(e.scale - t)
	e.neg.downscale(e.scale - t)
	e.scale = t

	// 2. Zero threshold.
	widen := dp.ZeroThreshold() != e.zeroThreshold
	var zi int32
	if widen {
		zi = expohisto.Index(max(dp.ZeroThreshold(), e.zeroThreshold), t)
		e.zeroThreshold = expohisto.UpperBoundary(zi, t)
		e.zeroCount += e.pos.takeUpTo(zi) + e.neg.takeUpTo(zi)
	}

	// 3. Add.
	shift := dp.Scale() - t
	e.zeroCount += dp.ZeroCount()
	e.zeroCount += addBuckets(&e.pos, pos, shift, widen, zi)
	e.zeroCount += addBuckets(&e.neg, neg, shift, widen, zi)
	e.count += dp.Count()
	foldMoments(&e.moments, dp)
	return accepted
}

// unionRange returns the index range, at scale t, covered by the buckets of
// b (at scale bs) and of in (at scale is); ok is false when both are empty.
func unionRange(b *expBuckets, bs int32, in pmetric.ExponentialHistogramDataPointBuckets, is, t int32) (lo, hi int64, ok bool) {
	if n := len(b.counts); n > 0 {
		lo, hi, ok = int64(b.offset>>(bs-t)), int64((b.offset+int32(n)-1)>>(bs-t)), true
	}
	if n := in.BucketCounts().Len(); n > 0 {
		l, h := int64(in.Offset()>>(is-t)), int64((in.Offset()+int32(n)-1)>>(is-t))
		if !ok {
			return l, h, true
		}
		lo, hi = min(lo, l), max(hi, h)
	}
	return lo, hi, ok
}

// downscale lowers the scale by d: bucket i becomes bucket i>>d. In place:
// the target of a bucket is never after it.
func (b *expBuckets) downscale(d int32) {
	if d == 0 || len(b.counts) == 0 {
		return
	}
	last := b.offset + int32(len(b.counts)) - 1
	off := b.offset >> d
	for i, c := range b.counts {
		if j := int((b.offset+int32(i))>>d - off); j != i {
			b.counts[j] += c
			b.counts[i] = 0
		}
	}
	b.counts = b.counts[:last>>d-off+1]
	b.offset = off
}

// takeUpTo removes the buckets with index ≤ zi and returns their total.
func (b *expBuckets) takeUpTo(zi int32) uint64 {
	var n uint64
	for len(b.counts) > 0 && b.offset <= zi {
		n += b.counts[0]
		b.counts = b.counts[1:]
		b.offset++
	}
	if len(b.counts) == 0 {
		b.counts = b.counts[:0]
	}
	return n
}

// addBuckets adds in's counts (shifted down by shift scales) to b and
// returns what falls into the zero bucket (index ≤ zi when widen).
func addBuckets(b *expBuckets, in pmetric.ExponentialHistogramDataPointBuckets, shift int32, widen bool, zi int32) uint64 {
	counts := in.BucketCounts()
	var zero uint64
	for j := 0; j < counts.Len(); j++ {
		c := counts.At(j)
		if c == 0 {
			continue
		}
		idx := (in.Offset() + int32(j)) >> shift
		if widen && idx <= zi {
			zero += c
			continue
		}
		b.add(idx, c)
	}
	return zero
}

// add adds c to bucket idx, growing the range as needed (allocation only
// when a stream's range grows).
func (b *expBuckets) add(idx int32, c uint64) {
	switch {
	case len(b.counts) == 0:
		b.offset = idx
		b.counts = append(b.counts[:0], c)
		return
	case idx < b.offset:
		grow := int(b.offset - idx)
		b.counts = append(make([]uint64, grow, grow+len(b.counts)), b.counts...)
		b.offset = idx
	case int(idx-b.offset) >= len(b.counts):
		for int(idx-b.offset) >= len(b.counts) {
			b.counts = append(b.counts, 0)
		}
	}
	b.counts[idx-b.offset] += c
}

func writeExp(s *stream, dp pmetric.ExponentialHistogramDataPoint) {
	e := s.exp
	dp.SetCount(e.count)
	writeMoments(&e.moments, dp)
	dp.SetScale(e.scale)
	dp.SetZeroThreshold(e.zeroThreshold)
	dp.SetZeroCount(e.zeroCount)
	dp.Positive().SetOffset(e.pos.offset)
	dp.Positive().BucketCounts().FromRaw(e.pos.counts)
	dp.Negative().SetOffset(e.neg.offset)
	dp.Negative().BucketCounts().FromRaw(e.neg.counts)
}
