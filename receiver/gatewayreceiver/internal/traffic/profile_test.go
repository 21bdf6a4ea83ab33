package traffic

import (
	"slices"
	"testing"
)

// Duration bounds (histogram.explicit.buckets) apply to the otel profile's
// duration histograms only, on a copy: the token histogram keeps its own,
// and the shared profile is unchanged.
func TestDurationBounds(t *testing.T) {
	want := []float64{0.002, 0.01, 0.1, 1, 30}
	p := otelProfile.withDurationHistograms(want, 0)
	for _, f := range p.families {
		switch {
		case f.hist && f.scale == 1e-3 && !slices.Equal(f.bounds, want):
			t.Errorf("%s bounds %v, want %v", f.name, f.bounds, want)
		case f.name == "gen_ai.client.token.usage" && slices.Equal(f.bounds, want):
			t.Errorf("the token histogram took the duration buckets")
		}
	}
	if slices.Equal(otelProfile.families[1].bounds, want) {
		t.Error("the shared otel profile was changed")
	}
}
