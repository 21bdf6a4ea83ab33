package traffic

import "testing"

// An exponential point's layout round-trips through a window's buckets,
// negative scale and offset included.
func TestExpoLayoutInBuckets(t *testing.T) {
	want := expoPoint{scale: -3, offset: -70000, n: 2, zero: 9}
	buf := appendExpo([]uint64{42}, want, []uint64{5, 6})
	p := point{bucketsStart: 1}
	got, counts := p.expo(buf)
	if got != want || len(counts) != 2 || counts[0] != 5 || counts[1] != 6 {
		t.Errorf("layout %+v counts %v, want %+v [5 6]", got, counts, want)
	}
}
