package cumulativeprocessor

import (
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
)

// histState is the cumulative state of an explicit-bucket histogram.
//
// It is 64 bytes, one cache line (TestStreamSize): creating a stream writes
// all of it, and a steady-state point reads it. So the bounds and the
// counts are held by their data pointers (the counts are len(bounds)+1, so
// one length serves both), and the value before the last window (what a
// resent window is measured against) is made on the stream's second
// window, the first with a value before it: a stream that only ever sees
// one window (a route hit once, then stale) never needs it.
type histState struct {
	moments
	count    uint64
	boundsAt *[]float64 // shared, read-only (sharedBounds)
	countsAt *uint64    // len(*boundsAt)+1 counts
	prev     *histPrev  // nil until the first window with one before it (saveHist)
}

// histPrev is a histogram's value before its last window.
type histPrev struct {
	moments
	count  uint64
	counts []uint64
}

// bounds are h's explicit bounds.
func (h *histState) bounds() []float64 { return *h.boundsAt }

// counts are h's bucket counts, len(bounds)+1.
func (h *histState) counts() []uint64 { return unsafe.Slice(h.countsAt, len(*h.boundsAt)+1) }

// newHistState returns a zero state for bounds, its counts from take.
func newHistState(h *histState, bounds *[]float64, take func(n int) []uint64) *histState {
	h.boundsAt = bounds
	h.countsAt = unsafe.SliceData(take(len(*bounds) + 1))
	return h
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

// saveHist keeps s's value as the value before the window about to be
// folded, in its histPrev (made on the stream's second window).
func saveHist(s *stream) {
	h := s.hist
	if h == nil {
		s.fresh = true // nothing before: a replacement starts again
		return
	}
	if h.prev == nil {
		h.prev = s.shard.takePrev(len(*h.boundsAt) + 1)
	}
	h.prev.moments, h.prev.count = h.moments, h.count
	copy(h.prev.counts, h.counts())
}

// restoreHist puts back the value saveHist kept, for a window that
// replaces the last one.
func restoreHist(s *stream) {
	if h := s.hist; h != nil && h.prev != nil {
		h.moments, h.count = h.prev.moments, h.prev.count
		copy(h.counts(), h.prev.counts)
	}
}

// foldHist adds dp to s. Bounds that differ from the accumulated ones cannot
// be merged exactly, so the stream restarts from dp (a counter reset
// downstream) rather than guessing. The caller has checked invalidHist.
func foldHist(_ *cumulativeProcessor, s *stream, dp pmetric.HistogramDataPoint) reason {
	bounds, counts := dp.ExplicitBounds(), dp.BucketCounts()
	r := accepted
	h := s.hist
	if h != nil && !sameBounds(h.bounds(), bounds) {
		s.restart(dp.StartTimestamp(), dp.Timestamp())
		h, r = nil, boundsChanged
	}
	if h == nil {
		// First point: copy its shape, into the shard's slabs (we hold its
		// lock): the stream's state costs no allocation of its own.
		h = newHistState(&s.shard.histSlab.take(1, histChunk)[0], sharedBounds(s.desc, bounds), s.shard.takeCounts)
		h.moments = startMoments(dp)
		s.hist = h
	}
	h.count += dp.Count()
	foldMoments(&h.moments, dp)
	hc := h.counts()
	for i := 0; i < counts.Len(); i++ {
		hc[i] += counts.At(i)
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
	if b := dp.ExplicitBounds(); s.overflow || b.Len() != len(*h.boundsAt) {
		b.FromRaw(*h.boundsAt)
	}
	dp.BucketCounts().FromRaw(h.counts())
}

// sharedBounds returns the metric's shared bounds when bounds equal them,
// else a copy that becomes the shared one. They are never written after.
func sharedBounds(d *metricDesc, bounds pcommon.Float64Slice) *[]float64 {
	if b := d.bounds.Load(); b != nil && sameBounds(*b, bounds) {
		return b
	}
	b := bounds.AsRaw()
	d.bounds.Store(&b)
	return &b
}
