package traffic

import (
	"math"

	"github.com/otelgateway/otelgateway/internal/expohisto"
)

// Exponential (native) histograms of the otel profile's durations
// (`histogram: exponential`), as the spanmetrics connector builds them: at
// most maxSize positive buckets, starting at the finest scale and halving
// the resolution (scale − 1 merges bucket pairs) whenever a value falls
// outside what maxSize buckets can span. Durations are never negative, so
// there is no negative range; 0 goes to the zero bucket.

// expoMaxScale is the scale a series starts at: the data model's finest,
// as the spanmetrics connector's default.
const expoMaxScale = 20

// expoHist holds one series' exponential buckets over one flush window.
//
// counts[i] is the bucket index base+i; lo..hi is the range that holds
// counts (valid while any). The scale and base carry over from window to
// window, so a series' resolution settles once and later windows cost no
// rescaling.
type expoHist struct {
	counts []uint64 // len maxSize, allocated with the series
	scale  int32
	base   int32
	lo, hi int32
	any    bool
	zero   uint64
}

func newExpoHist(maxSize int) *expoHist {
	return &expoHist{counts: make([]uint64, maxSize), scale: expoMaxScale}
}

// observe counts v (≥ 0, finite) w times.
func (h *expoHist) observe(v float64, w uint64) {
	if !(v > 0) || math.IsInf(v, 0) {
		h.zero += w
		return
	}
	h.add(expohisto.Index(v, h.scale), h.scale, w)
}

// add counts w in bucket i at scale (≥ h.scale after a merge may have lowered
// h.scale: the index is brought down to h.scale first).
func (h *expoHist) add(i, scale int32, w uint64) {
	if scale > h.scale {
		i >>= scale - h.scale
	}
	if !h.any {
		h.lo, h.hi, h.any = i, i, true
		if i < h.base || i >= h.base+int32(len(h.counts)) {
			h.base = i
		}
		h.counts[i-h.base] += w
		return
	}
	lo, hi := min(h.lo, i), max(h.hi, i)
	var c int32
	for int64(hi>>c)-int64(lo>>c) >= int64(len(h.counts)) {
		c++
	}
	if c > 0 {
		h.downscale(c)
		i >>= c
		lo, hi = lo>>c, hi>>c
	}
	if lo < h.base || hi >= h.base+int32(len(h.counts)) {
		h.rebase(lo)
	}
	h.lo, h.hi = lo, hi
	h.counts[i-h.base] += w
}

// downscale lowers the scale by c, merging each 2^c adjacent buckets into
// one. In place: the merged bucket of j is at or before j's slot.
func (h *expoHist) downscale(c int32) {
	newBase := h.lo >> c
	for j := h.lo; j <= h.hi; j++ {
		v := h.counts[j-h.base]
		h.counts[j-h.base] = 0
		h.counts[(j>>c)-newBase] += v
	}
	h.base, h.lo, h.hi = newBase, h.lo>>c, h.hi>>c
	h.scale -= c
}

// rebase moves the held range so that the array starts at lo (the caller
// made sure the new range is less than len(counts) wide).
func (h *expoHist) rebase(lo int32) {
	newBase := lo
	if h.any {
		n := h.hi - h.lo + 1
		from, to := h.lo-h.base, h.lo-newBase
		copy(h.counts[to:to+n], h.counts[from:from+n])
		// Zero what the move left behind outside the new slots.
		for j := from; j < from+n; j++ {
			if j < to || j >= to+n {
				h.counts[j] = 0
			}
		}
	}
	h.base = newBase
}

// buckets returns the counts lo..hi and the index of the first (the
// positive range's offset); empty when only the zero bucket counted.
func (h *expoHist) buckets() (offset int32, counts []uint64) {
	if !h.any {
		return 0, nil
	}
	return h.lo, h.counts[h.lo-h.base : h.hi-h.base+1]
}

// reset empties the window, keeping scale and base.
func (h *expoHist) reset() {
	if h.any {
		clear(h.counts[h.lo-h.base : h.hi-h.base+1])
	}
	h.any, h.zero = false, 0
}

// merge adds a snapshot's buckets back (a flush that failed and is retried).
func (h *expoHist) merge(scale, offset int32, counts []uint64, zero uint64) {
	if scale < h.scale && h.any {
		h.downscale(h.scale - scale)
	} else if scale < h.scale {
		h.scale = scale
	}
	for j, n := range counts {
		if n > 0 {
			h.add(offset+int32(j), scale, n)
		}
	}
	h.zero += zero
}
