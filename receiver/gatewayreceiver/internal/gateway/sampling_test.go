package gateway

import "testing"

// The OpenTelemetry consistent-probability threshold (tracestate ot=th, 56
// bits of lower-case hex, trailing zeros omitted) gives a span's adjusted
// count 2^56 / (2^56 − T) (docs/gateways.md §5).
func TestThresholdWeight(t *testing.T) {
	cases := []struct {
		ts   string
		want uint64
		ok   bool
	}{
		{"ot=th:0", 1, true},                              // probability 1
		{"ot=th:8", 2, true},                              // 50 %
		{"ot=th:c", 4, true},                              // 25 %
		{"ot=th:e6666666666666", 10, true},                // 10 %
		{"ot=th:fd70a3d70a3d71", 100, true},               // 1 %
		{"vendor=x:1,ot=rv:abcdef01234567;th:8", 2, true}, // other members and sub-keys around it
		{" ot=th:8 ", 2, true},
		{"", 0, false},
		{"vendor=th:8", 0, false}, // not the ot member
		{"ot=rv:abcdef01234567", 0, false},
		{"ot=th:", 0, false},
		{"ot=th:8A", 0, false},              // upper case is not allowed
		{"ot=th:123456789abcdef", 0, false}, // more than 14 digits
	}
	for _, c := range cases {
		got, ok := thresholdWeight(c.ts)
		if got != c.want || ok != c.ok {
			t.Errorf("thresholdWeight(%q) = %d, %v; want %d, %v", c.ts, got, ok, c.want, c.ok)
		}
	}
	if n := testing.AllocsPerRun(100, func() { thresholdWeight("vendor=x,ot=rv:ab;th:e6666666666666") }); n != 0 {
		t.Errorf("thresholdWeight allocates %v times", n)
	}
}

// An event's weight: a threshold wins; without one, a configured rate gives
// an estimate; else one request, flagged unknown. Log entries are exact.
func TestEventWeight(t *testing.T) {
	rates := make([]float64, KindSemconv+1)
	rates[KindKong] = 0.01
	for _, c := range []struct {
		name     string
		e        Event
		want     uint64
		sampling Sampling
	}{
		{"threshold", Event{Kind: KindKong, Weight: 10, Sampling: SamplingThreshold}, 10, SamplingThreshold},
		{"configured", Event{Kind: KindKong, Weight: 1, Sampling: SamplingUnknown}, 100, SamplingConfigured},
		{"unknown", Event{Kind: KindEnvoy, Weight: 1, Sampling: SamplingUnknown}, 1, SamplingUnknown},
		{"log entry", Event{Kind: KindKong, Weight: 1, Sampling: SamplingNone}, 1, SamplingNone},
	} {
		e := c.e
		e.Weighted(rates)
		if e.Weight != c.want || e.Sampling != c.sampling {
			t.Errorf("%s: weight %d sampling %d, want %d %d", c.name, e.Weight, e.Sampling, c.want, c.sampling)
		}
	}
}
