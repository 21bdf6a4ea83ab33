package cumulativeprocessor

// moments are the count-free summary fields both histogram kinds carry:
// sum, min and max, each known only while every folded delta had it.
type moments struct {
	sum, min, max          float64
	hasSum, hasMin, hasMax bool
}

// momentPoint is what explicit and exponential histogram points share. The
// helpers below are generic over it rather than taking the interface, so a
// point is never boxed (that would allocate once per point).
type momentPoint interface {
	Sum() float64
	HasSum() bool
	SetSum(float64)
	RemoveSum()
	Min() float64
	HasMin() bool
	SetMin(float64)
	RemoveMin()
	Max() float64
	HasMax() bool
	SetMax(float64)
	RemoveMax()
}

// startMoments begins a window at its first point.
func startMoments[P momentPoint](dp P) moments {
	return moments{hasSum: true, hasMin: dp.HasMin(), hasMax: dp.HasMax(), min: dp.Min(), max: dp.Max()}
}

// foldMoments adds dp's sum and combines its min and max: each stays known only
// while every delta of the window had it.
func foldMoments[P momentPoint](m *moments, dp P) {
	if m.hasSum = m.hasSum && dp.HasSum(); m.hasSum {
		m.sum += dp.Sum()
	}
	if m.hasMin = m.hasMin && dp.HasMin(); m.hasMin {
		m.min = min(m.min, dp.Min())
	}
	if m.hasMax = m.hasMax && dp.HasMax(); m.hasMax {
		m.max = max(m.max, dp.Max())
	}
}

// writeMoments sets (or removes) dp's sum, min and max.
func writeMoments[P momentPoint](m *moments, dp P) {
	if m.hasSum {
		dp.SetSum(m.sum)
	} else {
		dp.RemoveSum()
	}
	if m.hasMin {
		dp.SetMin(m.min)
	} else {
		dp.RemoveMin()
	}
	if m.hasMax {
		dp.SetMax(m.max)
	} else {
		dp.RemoveMax()
	}
}
