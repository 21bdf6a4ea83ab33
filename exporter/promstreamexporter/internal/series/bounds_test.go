package series

import (
	"math"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// A family's series with the same bounds share one slice (the family's,
// whose texts a scrape writes); other bounds get their own copy, and the
// family's stays the first seen.
func TestSharedBounds(t *testing.T) {
	f, err := New(Options{}).Family("latency_seconds", "", exposition.TypeHistogram)
	if err != nil {
		t.Fatal(err)
	}
	slice := func(v ...float64) pcommon.Float64Slice {
		s := pcommon.NewFloat64Slice()
		s.FromRaw(v)
		return s
	}
	a := f.SharedBounds(slice(0.005, 0.01, 0.025))
	b := f.SharedBounds(slice(0.005, 0.01, 0.025))
	if &a[0] != &b[0] {
		t.Fatal("two series with the same bounds hold two slices")
	}
	c := f.SharedBounds(slice(0.005, 0.01, 0.05))
	if &c[0] == &a[0] || c[2] != 0.05 {
		t.Fatalf("other bounds %v share the family's slice", c)
	}
	if d := f.SharedBounds(slice(0.005, 0.01, 0.025)); &d[0] != &a[0] {
		t.Fatal("the family's bounds changed after other bounds were seen")
	}
	// Bit for bit: -0 renders differently from 0.
	g, _ := New(Options{}).Family("size_bytes", "", exposition.TypeHistogram)
	zero := g.SharedBounds(slice(0, 1))
	if neg := g.SharedBounds(slice(math.Copysign(0, -1), 1)); &neg[0] == &zero[0] {
		t.Fatal("-0 shares the slice of 0's bounds")
	}
	if e := f.SharedBounds(slice()); len(e) != 0 {
		t.Fatalf("no bounds gave %v", e)
	}
	// A Dist with its own bounds renders its own texts; one with the
	// family's renders the family's.
	own := &Dist{Bounds: c}
	if got := string(own.ownTexts(false).canonical.at(2)); got != "0.05" {
		t.Fatalf("own bound text %q, want 0.05", got)
	}
	if texts := f.bounds.Load(); texts == nil || !texts.same(a) || string(texts.canonical.at(2)) != "0.025" {
		t.Fatal("the family's texts are not those of its shared bounds")
	}
}
