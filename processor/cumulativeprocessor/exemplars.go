package cumulativeprocessor

import (
	"math"
	"slices"
	"sort"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/internal/expohisto"
)

// Exemplars.
//
// With emit: per_batch a delta point is rewritten in place as its stream's
// cumulative point, so it keeps its own exemplars: nothing is stored. A
// stream holds exemplars only while they wait for an emission that is not
// the point's own:
//   - emit: interval, between two ticks: every exemplar of the points folded
//     since the last tick, the most recent one per bucket;
//   - an overflow stream within one per_batch batch, whose points leave as
//     one (the most recent exemplar per bucket of them all).
//
// "Bucket" is the bucket of the stream's cumulative point the exemplar's
// value falls in: an explicit histogram's (le semantics: (bound[i-1],
// bound[i]]), an exponential histogram's at the stream's current scale and
// zero threshold (re-placed when the stream downscales or widens its zero
// bucket, keeping the more recent of two that meet), and a single one for a
// sum (its latest exemplar: Prometheus counters carry one). At most
// maxExemplars are held per stream; a new bucket beyond that replaces the
// oldest exemplar held.
//
// The store is allocated on a stream's first kept exemplar: a stream that
// never gets one costs nothing (the pointer fits in the stream's size
// class). An emission moves the exemplars into the emitted point (no copy)
// and frees the store. Exemplars are not checkpointed: a restart
// loses those waiting for the next tick, never a value.

// maxExemplars bounds a stream's pending exemplars: one per bucket covers
// the explicit histograms gateways use (Kong's and APISIX's have fewer
// buckets), and bounds an exponential histogram's at a fraction of its
// max_buckets.
const maxExemplars = 64

// exemplarSet holds a stream's pending exemplars and the bucket (key) of
// each, in arrival order. Guarded by the stream's shard lock.
type exemplarSet struct {
	list pmetric.ExemplarSlice
	keys []int64
	// scale and zeroThreshold are those of the exponential histogram the
	// keys were computed against.
	scale         int32
	zeroThreshold float64
}

// zeroKey is the key of an exponential histogram's zero bucket.
const zeroKey = math.MinInt64

func exemplarValue(e pmetric.Exemplar) float64 {
	if e.ValueType() == pmetric.ExemplarValueTypeInt {
		return float64(e.IntValue())
	}
	return e.DoubleValue()
}

// exemplarKey is the bucket of s's cumulative point that v falls in.
func (s *stream) exemplarKey(v float64) int64 {
	switch {
	case s.hist != nil:
		return int64(sort.SearchFloat64s(s.hist.bounds(), v))
	case s.exp != nil:
		return expKey(s.exp.scale, s.exp.zeroThreshold, v)
	}
	return 0
}

func expKey(scale int32, zeroThreshold, v float64) int64 {
	a := math.Abs(v)
	if !(a > zeroThreshold) || math.IsInf(a, 0) {
		// The zero bucket (NaN and infinities too: no bucket holds them).
		return zeroKey
	}
	k := int64(expohisto.Index(a, scale)) << 1
	if v < 0 {
		k |= 1
	}
	return k
}

// keepExemplars adds in (a folded point's exemplars) to s's pending ones: an
// exemplar replaces the one held for its bucket. Call it after the point is
// folded, so buckets are those of the new cumulative state.
func (s *stream) keepExemplars(in pmetric.ExemplarSlice) {
	if in.Len() == 0 {
		return
	}
	x := s.ex
	if x == nil {
		x = &exemplarSet{list: pmetric.NewExemplarSlice()}
		s.ex = x
	}
	x.rekey(s)
	for i := 0; i < in.Len(); i++ {
		e := in.At(i)
		if e.ValueType() == pmetric.ExemplarValueTypeEmpty {
			continue
		}
		k := s.exemplarKey(exemplarValue(e))
		j := slices.Index(x.keys, k)
		switch {
		case j >= 0:
		case len(x.keys) < maxExemplars:
			x.keys = append(x.keys, k)
			x.list.AppendEmpty()
			j = len(x.keys) - 1
		default:
			j = x.oldest()
			x.keys[j] = k
		}
		e.CopyTo(x.list.At(j))
	}
}

// oldest returns the index of the held exemplar with the earliest timestamp.
func (x *exemplarSet) oldest() int {
	j := 0
	for i := 1; i < x.list.Len(); i++ {
		if x.list.At(i).Timestamp() < x.list.At(j).Timestamp() {
			j = i
		}
	}
	return j
}

// rekey re-places an exponential histogram's exemplars when its scale or
// zero threshold changed since their keys were computed; of two that now
// share a bucket the later one (more recent) stays.
func (x *exemplarSet) rekey(s *stream) {
	e := s.exp
	if e == nil || (x.scale == e.scale && x.zeroThreshold == e.zeroThreshold) {
		return
	}
	x.scale, x.zeroThreshold = e.scale, e.zeroThreshold
	if len(x.keys) == 0 {
		return
	}
	for i := range x.keys {
		x.keys[i] = expKey(e.scale, e.zeroThreshold, exemplarValue(x.list.At(i)))
	}
	// Keep, in order, the exemplars whose bucket no later one shares. keys
	// is compacted in place: position n < i is written only after it was
	// read, and only keys[i:] is read after.
	i, n := 0, 0
	x.list.RemoveIf(func(pmetric.Exemplar) bool {
		k := x.keys[i]
		i++
		if slices.Contains(x.keys[i:], k) {
			return true // superseded by a later exemplar of its bucket
		}
		x.keys[n] = k
		n++
		return false
	})
	x.keys = x.keys[:n]
}

// takeExemplars moves s's pending exemplars to the end of dst (no copy)
// and frees the store: a stream whose exemplars stop costs nothing again,
// and one that keeps getting them allocates its store once per emission,
// next to the emitted point's own allocations.
func (s *stream) takeExemplars(dst pmetric.ExemplarSlice) {
	x := s.ex
	if x == nil {
		return
	}
	x.rekey(s)
	x.list.MoveAndAppendTo(dst)
	s.ex = nil
}
