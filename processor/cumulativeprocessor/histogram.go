package cumulativeprocessor

import (
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// histState is the cumulative state of an explicit-bucket histogram, and
// its value before the last window (for a window that replaces it).
//
// counts has len(bounds)+1 buckets. The counts before the last window
// (prevCounts) are made on the stream's second window, the first with a
// value before it: a stream that only ever sees one window (a route hit
// once, then stale) never needs them, and creating a stream writes half
// the buckets. prevAt points at them, len(counts) of them: a pointer, not
// a second slice header, keeps the state of a long-lived stream 8 bytes
// larger than one allocation for both halves would, not 24.
type histState struct {
	moments
	count     uint64
	prev      moments
	prevCount uint64
	bounds    []float64
	counts    []uint64
	prevAt    *uint64 // nil until the first window with one before it (saveHist)
}

// histKind folds delta explicit-bucket histograms.
var histKind = kind[pmetric.HistogramDataPoint]{
	invalid: invalidHist, fold: foldHist, write: writeHist, save: saveHist, restore: restoreHist,
	exemplars: pmetric.HistogramDataPoint.Exemplars,
}

// invalidHist: bucket counts that do not match the bounds.
func invalidHist(dp pmetric.HistogramDataPoint) bool {
	n := dp.BucketCounts().Len()
	return n != 0 && n != dp.ExplicitBounds().Len()+1
}

// prevCounts are the counts before the last window; nil before the
// stream's second window (while it is fresh, nothing reads them).
func (h *histState) prevCounts() []uint64 {
	if h.prevAt == nil {
		return nil
	}
	return unsafe.Slice(h.prevAt, len(h.counts))
}

// makePrevCounts gives h its prevCounts, from take (len(counts) zero
// counts).
func (h *histState) makePrevCounts(take func(n int) []uint64) {
	if h.prevAt == nil {
		h.prevAt = unsafe.SliceData(take(len(h.counts)))
	}
}

func saveHist(s *stream) {
	h := s.hist
	if h == nil {
		s.fresh = true // nothing before: a replacement starts again
		return
	}
	h.makePrevCounts(s.shard.takeCounts)
	h.prev, h.prevCount = h.moments, h.count
	copy(h.prevCounts(), h.counts)
}

func restoreHist(s *stream) {
	if h := s.hist; h != nil {
		h.moments, h.count = h.prev, h.prevCount
		copy(h.counts, h.prevCounts())
	}
}

// foldHist adds dp to s. Bounds that differ from the accumulated ones cannot
// be merged exactly, so the stream restarts from dp (a counter reset
// downstream) rather than guessing. The caller has checked invalidHist.
func foldHist(_ *cumulativeProcessor, s *stream, dp pmetric.HistogramDataPoint) reason {
	bounds, counts := dp.ExplicitBounds(), dp.BucketCounts()
	r := accepted
	h := s.hist
	if h != nil && !sameBounds(h.bounds, bounds) {
		s.restart(dp.StartTimestamp(), dp.Timestamp())
		h, r = nil, boundsChanged
	}
	if h == nil {
		// First point: copy its shape, into the shard's slabs (we hold its
		// lock): the stream's state costs no allocation of its own.
		n := bounds.Len() + 1
		h = &s.shard.histSlab.take(1, histChunk)[0]
		h.bounds = sharedBounds(s.desc, bounds)
		h.counts = s.shard.takeCounts(n)
		h.moments = startMoments(dp)
		s.hist = h
	}
	h.count += dp.Count()
	foldMoments(&h.moments, dp)
	for i := 0; i < counts.Len(); i++ {
		h.counts[i] += counts.At(i)
	}
	return r
}

func sameBounds(have []float64, bounds pcommon.Float64Slice) bool {
	if len(have) != bounds.Len() {
		return false
	}
	for i, b := range have {
		if bounds.At(i) != b {
			return false
		}
	}
	return true
}

func writeHist(s *stream, dp pmetric.HistogramDataPoint) {
	h := s.hist
	dp.SetCount(h.count)
	writeMoments(&h.moments, dp)
	// FromRaw copies into the point's own storage, reusing it when the
	// length matches. The bounds of a point folded into its own stream are
	// the stream's (foldHist checked); only an overflow stream, fed by many
	// streams, or a fresh emitted point needs them written.
	if b := dp.ExplicitBounds(); s.overflow || b.Len() != len(h.bounds) {
		b.FromRaw(h.bounds)
	}
	dp.BucketCounts().FromRaw(h.counts)
}

// sharedBounds returns the metric's shared bounds slice when bounds equal it,
// else a copy that becomes the shared one. The slice is never written after.
func sharedBounds(d *metricDesc, bounds pcommon.Float64Slice) []float64 {
	if b := d.bounds.Load(); b != nil && sameBounds(*b, bounds) {
		return *b
	}
	b := bounds.AsRaw()
	d.bounds.Store(&b)
	return b
}
