package series

import (
	"runtime"
	"strconv"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

func TestPackedAttrsEquality(t *testing.T) {
	a := pcommon.NewMap()
	a.PutStr("route", "/a")
	a.PutInt("code", 200)
	a.PutDouble("ratio", 0.5)
	a.PutBool("ok", true)
	a.PutEmptySlice("tags").AppendEmpty().SetStr("x")
	var sc schemas
	n, _ := sc.of(a, nil)
	p := newText(pack(nil, n, a))

	same := pcommon.NewMap()
	a.CopyTo(same)
	if !p.equalAttrs(&sc, same) {
		t.Fatal("a copy compares unequal")
	}
	reordered := pcommon.NewMap()
	reordered.PutInt("code", 200)
	reordered.PutStr("route", "/a")
	reordered.PutDouble("ratio", 0.5)
	reordered.PutBool("ok", true)
	reordered.PutEmptySlice("tags").AppendEmpty().SetStr("x")
	if p.equalAttrs(&sc, reordered) {
		t.Fatal("another key order compares equal: entries are per order by design")
	}
	if m, _ := sc.of(reordered, nil); m == n {
		t.Fatal("two key orders share a schema")
	}
	mutations := map[string]func(pcommon.Map){
		"other string":  func(m pcommon.Map) { m.PutStr("route", "/b") },
		"int as string": func(m pcommon.Map) { m.PutStr("code", "200") },
		"other double":  func(m pcommon.Map) { m.PutDouble("ratio", 0.25) },
		"other bool":    func(m pcommon.Map) { m.PutBool("ok", false) },
		"extra key":     func(m pcommon.Map) { m.PutStr("more", "x") },
		"missing key":   func(m pcommon.Map) { m.Remove("ok") },
		"other slice":   func(m pcommon.Map) { m.PutEmptySlice("tags").AppendEmpty().SetStr("y") },
	}
	for name, mutate := range mutations {
		m := pcommon.NewMap()
		a.CopyTo(m)
		mutate(m)
		if p.equalAttrs(&sc, m) {
			t.Errorf("%s: compares equal", name)
		}
	}
	empty := pcommon.NewMap()
	en, _ := sc.of(empty, nil)
	if pe := newText(pack(nil, en, empty)); !pe.equalAttrs(&sc, pcommon.NewMap()) {
		t.Error("empty maps compare unequal")
	}
}

func TestPackedEqualDoesNotAllocate(t *testing.T) {
	a := pcommon.NewMap()
	for i := range 6 {
		a.PutStr("k"+strconv.Itoa(i), "value-"+strconv.Itoa(i))
	}
	var sc schemas
	n, _ := sc.of(a, nil)
	p := newText(pack(nil, n, a))
	if allocs := testing.AllocsPerRun(100, func() { _ = p.equalAttrs(&sc, a) }); allocs != 0 {
		t.Fatalf("equal allocated %.1f times, want 0", allocs)
	}
}

// TestReorderedAttributesFindTheirSeries: a source that changes its
// attribute order still updates the same series (through its rendered
// labels), and the new order is then a direct hit.
func TestReorderedAttributesFindTheirSeries(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("m", "", exposition.TypeGauge)
	labels := labelList{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}}
	one := Key{Context: kong, Attrs: pcommon.NewMap()}
	one.Attrs.PutStr("a", "1")
	one.Attrs.PutStr("b", "2")
	two := Key{Context: kong, Attrs: pcommon.NewMap()}
	two.Attrs.PutStr("b", "2")
	two.Attrs.PutStr("a", "1")
	s1, _ := f.Series(7, &one, 1, labels)
	s2, _ := f.Series(7, &two, 1, labels)
	s3, _ := f.Series(7, &two, 1, labels)
	if s1 != s2 || s2 != s3 || tbl.Len() != 1 {
		t.Fatalf("reordered attributes made %d series", tbl.Len())
	}
}

// BenchmarkMemoryPerCounterSeries reports the heap retained per stored
// counter series of the Kong request family (6 labels) and its ratio to the
// length of the rendered label block (issue target: ≤ 3).
func BenchmarkMemoryPerCounterSeries(b *testing.B) {
	const n = 50_000
	for b.Loop() {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		tbl := New(Options{})
		f, _ := tbl.Family("kong_http_requests_total", "HTTP status codes per consumer/service/route in Kong", exposition.TypeCounter)
		ctx := &Context{}
		labelBytes := 0
		for i := range n {
			attrs := pcommon.NewMap()
			attrs.PutStr("service", "service-"+strconv.Itoa(i/30))
			attrs.PutStr("route", "route-"+strconv.Itoa(i/3))
			attrs.PutStr("code", strconv.Itoa(200+i%3))
			attrs.PutStr("source", "service")
			attrs.PutStr("workspace", "default")
			attrs.PutStr("consumer", "")
			list := labelList{
				{Name: "code", Value: strconv.Itoa(200 + i%3)}, {Name: "consumer", Value: ""},
				{Name: "route", Value: "route-" + strconv.Itoa(i/3)}, {Name: "service", Value: "service-" + strconv.Itoa(i/30)},
				{Name: "source", Value: "service"}, {Name: "workspace", Value: "default"},
			}
			s, _ := f.Series(uint64(i)*0x9e3779b97f4a7c15, &Key{Context: ctx, Attrs: attrs}, 1, list)
			s.SetValue(1, 1)
			labelBytes += len(s.labels()) + len(f.name) + 2
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		perSeries := float64(after.HeapAlloc-before.HeapAlloc) / n
		b.ReportMetric(perSeries, "B/series")
		b.ReportMetric(perSeries/(float64(labelBytes)/n), "x-label-block")
		runtime.KeepAlive(tbl)
	}
}
