package identity

import (
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

func gatewayAttrs(route string) pcommon.Map {
	m := pcommon.NewMap()
	m.PutStr("http.route", route)
	m.PutStr("http.request.method", "GET")
	m.PutInt("http.response.status_code", 200)
	m.PutStr("service.name", "kong")
	m.PutStr("upstream", "backend-1")
	m.PutStr("consumer", "alice")
	return m
}

func TestSetIsCanonical(t *testing.T) {
	a := pcommon.NewMap()
	a.PutStr("b", "2")
	a.PutInt("a", 1)
	b := pcommon.NewMap()
	b.PutInt("a", 1)
	b.PutStr("b", "2")
	if SetOf(a) != SetOf(b) {
		t.Fatalf("same entries in another order encode differently: %q vs %q", SetOf(a), SetOf(b))
	}
	// uvarint(2), "a" Int 1, "b" Str "2".
	want := "\x02\x01a\x03\x01\x00\x00\x00\x00\x00\x00\x00\x01b\x01\x012"
	if got := SetOf(a).String(); got != want {
		t.Fatalf("encoding = %q, want %q", got, want)
	}
	if n := SetOf(a).Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
}

func TestSetEqual(t *testing.T) {
	full := pcommon.NewMap()
	full.PutStr("s", "x")
	full.PutBool("b", true)
	full.PutInt("i", -3)
	full.PutDouble("d", 1.5)
	full.PutEmptyBytes("y").FromRaw([]byte{0, 1})
	sl := full.PutEmptySlice("l")
	sl.AppendEmpty().SetStr("e")
	sl.AppendEmpty().SetInt(2)
	nested := full.PutEmptyMap("m")
	nested.PutStr("z", "1")
	nested.PutStr("a", "2")
	full.PutEmpty("nil")
	set := SetOf(full)

	if !set.Equal(full) {
		t.Fatal("a set does not equal the map it was made from")
	}
	mutations := map[string]func(pcommon.Map){
		"str value":     func(m pcommon.Map) { m.PutStr("s", "y") },
		"str to int":    func(m pcommon.Map) { m.PutInt("s", 1) },
		"bool":          func(m pcommon.Map) { m.PutBool("b", false) },
		"int":           func(m pcommon.Map) { m.PutInt("i", 3) },
		"double":        func(m pcommon.Map) { m.PutDouble("d", 2.5) },
		"bytes":         func(m pcommon.Map) { m.PutEmptyBytes("y").FromRaw([]byte{0, 2}) },
		"slice element": func(m pcommon.Map) { v, _ := m.Get("l"); v.Slice().At(1).SetInt(3) },
		"slice length":  func(m pcommon.Map) { v, _ := m.Get("l"); v.Slice().AppendEmpty() },
		"nested value":  func(m pcommon.Map) { v, _ := m.Get("m"); v.Map().PutStr("a", "3") },
		"empty to str":  func(m pcommon.Map) { m.PutStr("nil", "") },
		"extra key":     func(m pcommon.Map) { m.PutStr("new", "") },
		"missing key":   func(m pcommon.Map) { m.Remove("s") },
	}
	for name, mutate := range mutations {
		m := pcommon.NewMap()
		full.CopyTo(m)
		mutate(m)
		if set.Equal(m) {
			t.Errorf("%s: set still equal after the change", name)
		}
	}

	// Round trip: CopyTo gives back an equal map.
	back := pcommon.NewMap()
	back.PutStr("stale", "entry")
	set.CopyTo(back)
	if !back.Equal(full) || SetOf(back) != set {
		t.Fatalf("CopyTo round trip: got %v, want %v", back.AsRaw(), full.AsRaw())
	}

	if !(Set{}).Equal(pcommon.NewMap()) || (Set{}).Equal(full) || SetOf(pcommon.NewMap()) != (Set{}) {
		t.Fatal("empty set must equal exactly the empty map")
	}
}

func TestSetEqualDoesNotAllocate(t *testing.T) {
	m := gatewayAttrs("/anything")
	set := SetOf(m)
	allocs := testing.AllocsPerRun(100, func() {
		if !set.Equal(m) {
			t.Fatal("not equal")
		}
	})
	if allocs != 0 {
		t.Fatalf("Set.Equal allocated %.1f times per call, want 0", allocs)
	}
}

func TestEqualOrdered(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("route", "/a")
	m.PutInt("code", 200)
	m.PutDouble("ratio", 0.5)
	m.PutBool("ok", true)
	s, order := setAndOrder(m)
	if s != SetOf(m) {
		t.Fatal("setAndOrder's Set differs from SetOf's")
	}
	if len(order) != 2*4 {
		t.Fatalf("order table of %d bytes, want 2 per attribute (8)", len(order))
	}
	if eq, sure := s.equalOrdered(order, m); !eq || !sure {
		t.Fatalf("equalOrdered(same) = %v, %v; want true, true", eq, sure)
	}
	reordered := pcommon.NewMap()
	reordered.PutInt("code", 200)
	reordered.PutStr("route", "/a")
	reordered.PutDouble("ratio", 0.5)
	reordered.PutBool("ok", true)
	if _, sure := s.equalOrdered(order, reordered); sure {
		t.Fatal("another order was judged surely; it must fall back to Equal")
	}
	for name, mutate := range map[string]func(pcommon.Map){
		"string": func(m pcommon.Map) { m.PutStr("route", "/b") },
		"int":    func(m pcommon.Map) { m.PutInt("code", 201) },
		"type":   func(m pcommon.Map) { m.PutStr("code", "200") },
		"double": func(m pcommon.Map) { m.PutDouble("ratio", 0.25) },
		"bool":   func(m pcommon.Map) { m.PutBool("ok", false) },
	} {
		c := pcommon.NewMap()
		m.CopyTo(c)
		mutate(c)
		if eq, sure := s.equalOrdered(order, c); eq || !sure {
			t.Errorf("%s changed: equalOrdered = %v, %v; want false, true", name, eq, sure)
		}
	}
	nested := pcommon.NewMap()
	nested.PutEmptySlice("tags").AppendEmpty().SetStr("x")
	if _, order := setAndOrder(nested); order != "" {
		t.Error("a non-scalar attribute got an order table")
	}
	long := pcommon.NewMap()
	long.PutStr("route", strings.Repeat("/a", 64)) // 128 bytes: a two-byte length
	if _, order := setAndOrder(long); order != "" {
		t.Error("a 128-byte value got an order table")
	}
	c := NewCache[int](4)
	c.GetOrCreate(1, OfMap(long), long, func(Set) int { return 7 })
	if v, ok := c.Get(1, OfMap(long), long); !ok || v != 7 {
		t.Errorf("Get of a set without order table = %d, %v; want 7, true", v, ok)
	}
}

// TestSetOfAllocatesOnce: the encoding is the only allocation of a new Set
// (and of a Set with its order table).
func TestSetOfAllocatesOnce(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("http.route", "/api/v1/resource/42")
	m.PutStr("http.request.method", "GET")
	m.PutInt("http.response.status_code", 200)
	m.PutStr("service.name", "kong")
	m.PutStr("upstream", "backend-1")
	m.PutStr("consumer", "tenant-3")
	if n := testing.AllocsPerRun(100, func() { _ = SetOf(m) }); n != 1 {
		t.Errorf("SetOf allocated %.1f times, want 1", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = setAndOrder(m) }); n != 1 {
		t.Errorf("setAndOrder allocated %.1f times, want 1", n)
	}
}

// TestKeyOrderNeverChangesTheEncoding: a KeyOrder carried from one map to
// the next (same order, another order, more or fewer keys) must only ever
// speed up the sort, never change a Set or its order table.
func TestKeyOrderNeverChangesTheEncoding(t *testing.T) {
	reordered := pcommon.NewMap() // gatewayAttrs' keys in another order
	reordered.PutStr("consumer", "alice")
	reordered.PutStr("upstream", "backend-1")
	reordered.PutStr("http.route", "/c")
	reordered.PutStr("service.name", "kong")
	reordered.PutStr("http.request.method", "GET")
	reordered.PutInt("http.response.status_code", 200)
	two := pcommon.NewMap()
	two.PutStr("b", "2")
	two.PutStr("a", "1")
	twoSorted := pcommon.NewMap()
	twoSorted.PutStr("a", "1")
	twoSorted.PutStr("c", "2")
	maps := []pcommon.Map{
		gatewayAttrs("/a"),
		gatewayAttrs("/b"), // same order: the remembered order is reused
		reordered,
		gatewayAttrs("/d"),
		two,
		twoSorted, // as many keys, in another order
		two,
		pcommon.NewMap(),
		gatewayAttrs("/e"),
	}
	var ko KeyOrder
	for i, m := range maps {
		var b1, b2 [encScratch]byte
		got, gotSize := appendSetAndOrder(b1[:0], m, &ko)
		want, wantSize := appendSetAndOrder(b2[:0], m, nil)
		if string(got) != string(want) || gotSize != wantSize {
			t.Errorf("map %d: with a KeyOrder %q (%d), without %q (%d)", i, got, gotSize, want, wantSize)
		}
		if (Set{enc: string(got[:gotSize])}) != SetOf(m) {
			t.Errorf("map %d: Set differs from SetOf", i)
		}
	}
}
