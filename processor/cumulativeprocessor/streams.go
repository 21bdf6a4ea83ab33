package cumulativeprocessor

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/otelgateway/otelgateway/internal/identity"
)

// Drop reasons, the bounded `reason` attribute of
// otelcol_processor_cumulative_points.
const (
	reasonOutOfOrder  = "out_of_order" // timestamp not after the last accepted one
	reasonOlderStart  = "older_start"  // window overlaps what is already accumulated
	reasonTypeChanged = "type_changed" // int ↔ double switch: the stream restarts
)

// metricStreams holds the streams of one metric of one resource and scope.
// Its identity (resource attributes, scope name, version and attributes,
// metric name, unit and monotonicity) is kept as copies, to confirm that a
// hash hit really is this metric.
type metricStreams struct {
	resource     pcommon.Map
	scopeName    string
	scopeVersion string
	scopeAttrs   pcommon.Map
	name, unit   string
	monotonic    bool
	// streams maps the attribute hash to the streams with that hash; a slice,
	// because two attribute sets may collide and must stay two streams.
	streams map[uint64][]*stream
}

// stream is the cumulative state of one delta stream.
type stream struct {
	attrs pcommon.Map
	start pcommon.Timestamp // emitted start time, fixed for the stream's life
	last  pcommon.Timestamp // timestamp of the last accepted point
	isInt bool
	i     int64
	f     float64
	// seen is the wall-clock time (unix nanos) of the last accepted point,
	// read by the stale sweep.
	seen int64
}

func (ms *metricStreams) matches(res pcommon.Resource, scope pcommon.InstrumentationScope, m pmetric.Metric) bool {
	return ms.name == m.Name() && ms.unit == m.Unit() && ms.monotonic == m.Sum().IsMonotonic() &&
		ms.scopeName == scope.Name() && ms.scopeVersion == scope.Version() &&
		ms.scopeAttrs.Equal(scope.Attributes()) && ms.resource.Equal(res.Attributes())
}

func newMetricStreams(res pcommon.Resource, scope pcommon.InstrumentationScope, m pmetric.Metric) *metricStreams {
	ms := &metricStreams{
		resource:     pcommon.NewMap(),
		scopeName:    scope.Name(),
		scopeVersion: scope.Version(),
		scopeAttrs:   pcommon.NewMap(),
		name:         m.Name(),
		unit:         m.Unit(),
		monotonic:    m.Sum().IsMonotonic(),
		streams:      make(map[uint64][]*stream),
	}
	res.Attributes().CopyTo(ms.resource)
	scope.Attributes().CopyTo(ms.scopeAttrs)
	return ms
}

// find returns the stream with exactly these attributes, or nil.
func (ms *metricStreams) find(h uint64, attrs pcommon.Map) *stream {
	for _, s := range ms.streams[h] {
		if s.attrs.Equal(attrs) {
			return s
		}
	}
	return nil
}

func (ms *metricStreams) add(h uint64, attrs pcommon.Map) *stream {
	s := &stream{attrs: pcommon.NewMap()}
	attrs.CopyTo(s.attrs)
	ms.streams[h] = append(ms.streams[h], s)
	return s
}

// accumulate folds one delta point into s and rewrites dp as the cumulative
// point. It returns the drop reason, or "" when the point was accumulated.
func (s *stream) accumulate(dp pmetric.NumberDataPoint, now int64) string {
	isInt := dp.ValueType() == pmetric.NumberDataPointValueTypeInt
	if s.last != 0 {
		switch {
		case dp.Timestamp() <= s.last:
			return reasonOutOfOrder
		case dp.StartTimestamp() != 0 && dp.StartTimestamp() < s.last:
			return reasonOlderStart
		}
	}
	reason := ""
	if s.last != 0 && isInt != s.isInt {
		// A switch of value type cannot be summed exactly: restart the stream
		// from this point, as a counter reset.
		s.last, s.i, s.f = 0, 0, 0
		reason = reasonTypeChanged
	}
	if s.last == 0 {
		s.start = dp.StartTimestamp()
		if s.start == 0 {
			s.start = dp.Timestamp()
		}
		s.isInt = isInt
	}
	s.last = dp.Timestamp()
	s.seen = now
	dp.SetStartTimestamp(s.start)
	if isInt {
		s.i += dp.IntValue()
		dp.SetIntValue(s.i)
	} else {
		s.f += dp.DoubleValue()
		dp.SetDoubleValue(s.f)
	}
	return reason
}

// sortByTimestamp orders a metric's points by time when they are not already,
// so a batch that arrives newest-first is accumulated oldest-first instead of
// losing all but its newest point. The sort is stable: points of one stream
// with equal timestamps keep their order (and the later one is then dropped).
func sortByTimestamp(dps pmetric.NumberDataPointSlice) {
	for i := 1; i < dps.Len(); i++ {
		if dps.At(i).Timestamp() < dps.At(i-1).Timestamp() {
			dps.Sort(func(a, b pmetric.NumberDataPoint) bool { return a.Timestamp() < b.Timestamp() })
			return
		}
	}
}

// identityOf hashes what makes a metric's streams distinct from those of
// other metrics (all but the point attributes).
func identityOf(scopeHash uint64, m pmetric.Metric) uint64 {
	h := identity.Combine(scopeHash, identity.OfString(m.Name()))
	h = identity.Combine(h, identity.OfString(m.Unit()))
	if m.Sum().IsMonotonic() {
		h = identity.Combine(h, 1)
	}
	return h
}
