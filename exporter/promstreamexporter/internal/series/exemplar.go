package series

import (
	"encoding/hex"
	"slices"
	"sort"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// Exemplars.
//
// A series keeps, per bucket, the latest exemplar it was given: a
// histogram one per bucket of Dist.Counts plus one for +Inf (the bucket
// whose range, (bound[i-1], bound[i]], holds the exemplar's value), a
// counter one. They live behind Series.ex, allocated with the series' first
// exemplar: a series that never gets one pays nothing (the pointer fits in
// Series' size class). They are read and written under the series' page
// lock, as a distribution is.
//
// Written only by the formats whose Body.Exemplars is set (OpenMetrics),
// and by protobuf: OpenMetrics as ` # {trace_id="…",span_id="…"} value
// timestamp` after the counter's _total sample or the histogram's _bucket
// line, protobuf as Counter.exemplar, Bucket.exemplar and, for a native
// histogram, Histogram.exemplars. The Prometheus text formats (0.0.4,
// 1.0.0) have no exemplars.

// Exemplar is one exemplar: a traced measurement of Value at Time.
type Exemplar struct {
	TraceID [16]byte // all zero: none
	SpanID  [8]byte  // all zero: none
	Value   float64
	Time    int64 // unix nanoseconds; 0: unknown
}

// exemplars holds a series' exemplars, sorted by bucket, at most one per
// bucket.
type exemplars struct {
	list []bucketExemplar
	// bounds are the Dist.Bounds the buckets were placed against (a
	// histogram's); when they change, every exemplar is placed again by its
	// value.
	bounds []float64
}

type bucketExemplar struct {
	bucket int // index into Dist.Counts; len(Counts) is +Inf
	Exemplar
}

// bucketOf is the bucket of bounds whose range holds v: the first bound ≥ v
// (le), len(bounds) for +Inf (NaN included).
func bucketOf(bounds []float64, v float64) int { return sort.SearchFloat64s(bounds, v) }

// put keeps e in its bucket unless the exemplar held there is more recent
// (both timestamps known).
func (x *exemplars) put(bucket int, e Exemplar) {
	i, found := slices.BinarySearchFunc(x.list, bucket, func(b bucketExemplar, k int) int { return b.bucket - k })
	switch {
	case !found:
		x.list = slices.Insert(x.list, i, bucketExemplar{bucket, e})
	case e.Time == 0 || x.list[i].Time == 0 || e.Time >= x.list[i].Time:
		x.list[i].Exemplar = e
	}
}

// place re-places every exemplar against new bounds; of two that meet in a
// bucket the more recent stays.
func (x *exemplars) place(bounds []float64) {
	if sameSlice(x.bounds, bounds) {
		return
	}
	x.bounds = bounds
	old := x.list
	x.list = nil
	for _, b := range old {
		x.put(bucketOf(bounds, b.Value), b.Exemplar)
	}
}

func sameSlice(a, b []float64) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// SetExemplars stores a counter's exemplars: it keeps the latest of ex (by
// timestamp, the last one given among equals). It takes the page lock; a
// point without exemplars should not call it.
func (s *Series) SetExemplars(ex []Exemplar) {
	if len(ex) == 0 {
		return
	}
	s.page.mu.Lock()
	if s.ex == nil {
		s.ex = new(exemplars)
	}
	for _, e := range ex {
		s.ex.put(0, e)
	}
	s.page.touch()
	s.page.mu.Unlock()
}

// histogramExemplars places a histogram's new exemplars against its
// (possibly new) bounds; the caller holds the page lock and has filled d.
func (s *Series) histogramExemplars(d *Dist, ex []Exemplar) {
	if s.ex == nil {
		if len(ex) == 0 {
			return
		}
		s.ex = new(exemplars)
	}
	s.ex.place(d.Bounds)
	for _, e := range ex {
		s.ex.put(bucketOf(d.Bounds, e.Value), e)
	}
}

// at returns the exemplar of bucket i, advancing *j (the caller's
// cursor into the sorted list); nil when the bucket has none.
func (x *exemplars) at(i int, j *int) *Exemplar {
	for *j < len(x.list) && x.list[*j].bucket < i {
		*j++
	}
	if *j < len(x.list) && x.list[*j].bucket == i {
		return &x.list[*j].Exemplar
	}
	return nil
}

// appendExemplar replaces the newline that ends a sample line with
// OpenMetrics' exemplar: ` # {trace_id="…",span_id="…"} value [timestamp]`.
// Its label set is at most 63 characters (both ids in hex), within the 128
// OpenMetrics allows.
func appendExemplar(dst []byte, e *Exemplar) []byte {
	dst = append(dst[:len(dst)-1], " # {"...)
	comma := false
	if e.TraceID != ([16]byte{}) {
		dst = append(dst, `trace_id="`...)
		dst = hex.AppendEncode(dst, e.TraceID[:])
		dst = append(dst, '"')
		comma = true
	}
	if e.SpanID != ([8]byte{}) {
		if comma {
			dst = append(dst, ',')
		}
		dst = append(dst, `span_id="`...)
		dst = hex.AppendEncode(dst, e.SpanID[:])
		dst = append(dst, '"')
	}
	dst = append(dst, "} "...)
	dst = exposition.AppendFloat(dst, e.Value)
	if e.Time > 0 {
		return exposition.AppendCreated(dst, e.Time) // ` <exact seconds>\n`
	}
	return append(dst, '\n')
}

// hasExemplars reports whether the family's samples may carry exemplars in
// OpenMetrics: a histogram's buckets, a counter's _total. A counter whose
// written name (base, as the header gets it) does not end in _total is
// written as unknown, which has none.
func (f *Family) hasExemplars(base string) bool {
	switch f.typ {
	case exposition.TypeHistogram:
		return true
	case exposition.TypeCounter:
		return exposition.IsTotalName(base)
	}
	return false
}
