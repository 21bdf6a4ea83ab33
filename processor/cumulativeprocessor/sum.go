package cumulativeprocessor

import (
	"math"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

// sumKind folds delta sums (monotonic or not) into running totals.
var sumKind = kind[pmetric.NumberDataPoint]{
	fold: foldSum, write: writeSum, save: saveSum, restore: restoreSum,
	exemplars: pmetric.NumberDataPoint.Exemplars,
}

func foldSum(_ *cumulativeProcessor, s *stream, dp pmetric.NumberDataPoint) reason {
	isInt := dp.ValueType() == pmetric.NumberDataPointValueTypeInt
	r := accepted
	switch {
	case s.last == 0: // first point since (re)start: it sets the value type
		s.isInt = isInt
	case isInt != s.isInt:
		// A switch of value type cannot be summed exactly: restart the
		// stream from this point, as a counter reset.
		s.restart(dp.StartTimestamp(), dp.Timestamp())
		s.isInt = isInt
		r = typeChanged
	}
	if isInt {
		s.total = uint64(int64(s.total) + dp.IntValue())
	} else {
		s.total = math.Float64bits(math.Float64frombits(s.total) + dp.DoubleValue())
	}
	return r
}

func writeSum(s *stream, dp pmetric.NumberDataPoint) {
	if s.isInt {
		dp.SetIntValue(int64(s.total))
	} else {
		dp.SetDoubleValue(math.Float64frombits(s.total))
	}
}

// saveSum keeps the total before a window in s.prev: one word per stream.
// The value type cannot change within the window without a restart (which
// makes the stream fresh), so restoreSum puts back a total of the same type.
func saveSum(s *stream) { s.prev = s.total }

func restoreSum(s *stream) { s.total = s.prev }
