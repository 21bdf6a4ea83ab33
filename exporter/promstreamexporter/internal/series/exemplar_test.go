package series

import (
	"testing"
	"unsafe"
)

// TestSeriesSizeClass: Series stays in the 128-byte size class. The
// exemplar pointer and the sample timestamp (send_timestamps) took it from
// 112 to 120 bytes; a field more would cost every series 16 bytes.
func TestSeriesSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(Series{}); n > 128 {
		t.Fatalf("Series is %d bytes, past the 128-byte size class", n)
	}
}

func TestExemplarPlacement(t *testing.T) {
	var x exemplars
	bounds := []float64{1, 10}
	for _, e := range []Exemplar{{Value: 1, Time: 5}, {Value: 0.5, Time: 4}, {Value: 11, Time: 1}, {Value: 9, Time: 2}} {
		x.place(bounds)
		x.put(bucketOf(bounds, e.Value), e)
	}
	// 0.5 is older than 1 (same bucket): 1 stays.
	want := []bucketExemplar{{0, Exemplar{Value: 1, Time: 5}}, {1, Exemplar{Value: 9, Time: 2}}, {2, Exemplar{Value: 11, Time: 1}}}
	if len(x.list) != len(want) {
		t.Fatalf("got %v, want %v", x.list, want)
	}
	for i := range want {
		if x.list[i] != want[i] {
			t.Fatalf("got %v, want %v", x.list, want)
		}
	}
	x.place([]float64{100})
	if len(x.list) != 1 || x.list[0].Value != 1 || x.list[0].bucket != 0 {
		t.Fatalf("after new bounds: %v, want the most recent (1) alone in bucket 0", x.list)
	}
	var j int
	if e := x.at(1, &j); e != nil {
		t.Fatalf("bucket 1 has %v", e)
	}
	j = 0
	if e := x.at(0, &j); e == nil || e.Value != 1 {
		t.Fatalf("bucket 0 has %v", e)
	}
}
