package identity

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

func TestOfMapIsOrderIndependent(t *testing.T) {
	a := pcommon.NewMap()
	a.PutStr("http.route", "/anything")
	a.PutStr("http.request.method", "GET")
	a.PutInt("http.response.status_code", 200)

	b := pcommon.NewMap()
	b.PutInt("http.response.status_code", 200)
	b.PutStr("http.request.method", "GET")
	b.PutStr("http.route", "/anything")

	if OfMap(a) != OfMap(b) {
		t.Fatalf("same set in another order hashed differently: %x vs %x", OfMap(a), OfMap(b))
	}
}

func TestOfMapSeparatesValues(t *testing.T) {
	cases := map[string]func(pcommon.Map){
		"str 200":    func(m pcommon.Map) { m.PutStr("code", "200") },
		"int 200":    func(m pcommon.Map) { m.PutInt("code", 200) },
		"double 200": func(m pcommon.Map) { m.PutDouble("code", 200) },
		"int 201":    func(m pcommon.Map) { m.PutInt("code", 201) },
		"other key":  func(m pcommon.Map) { m.PutInt("status", 200) },
		"empty":      func(pcommon.Map) {},
		"two keys": func(m pcommon.Map) {
			m.PutInt("code", 200)
			m.PutStr("route", "/")
		},
		// Swapping a key and a value must change the hash.
		"swapped": func(m pcommon.Map) { m.PutStr("200", "code") },
	}
	seen := map[uint64]string{}
	for name, fill := range cases {
		m := pcommon.NewMap()
		fill(m)
		h := OfMap(m)
		if other, ok := seen[h]; ok {
			t.Errorf("%q and %q hash alike (%x)", name, other, h)
		}
		seen[h] = name
	}
}

func TestOfMapDoesNotAllocate(t *testing.T) {
	m := pcommon.NewMap()
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		m.PutStr(k, k+"-value")
	}
	m.PutEmptySlice("list").AppendEmpty().SetInt(3)
	allocs := testing.AllocsPerRun(100, func() { _ = OfMap(m) })
	if allocs != 0 {
		t.Fatalf("OfMap allocated %.1f times per call, want 0", allocs)
	}
}

func BenchmarkOfMap6(b *testing.B) {
	m := pcommon.NewMap()
	for _, k := range []string{"service", "route", "method", "code", "upstream", "consumer"} {
		m.PutStr(k, k+"-value")
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = OfMap(m)
	}
}
