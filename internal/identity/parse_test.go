package identity

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// ParseSet accepts what SetOf encodes, and refuses every truncation, a
// trailing byte, an unknown tag and nesting beyond its bound.
func TestParseSet(t *testing.T) {
	m := pcommon.NewMap()
	m.PutStr("http.route", "/a")
	m.PutInt("code", 200)
	m.PutDouble("ratio", 0.5)
	m.PutBool("ok", true)
	m.PutEmptyBytes("raw").FromRaw([]byte{1, 2})
	sl := m.PutEmptySlice("list")
	sl.AppendEmpty().SetStr("x")
	sl.AppendEmpty().SetEmptyMap().PutStr("k", "v")
	set := SetOf(m)
	got, err := ParseSet(set.String(), 8)
	if err != nil || got != set {
		t.Fatalf("ParseSet(SetOf) = %v, %v", got, err)
	}
	if _, err := ParseSet("", 8); err != nil {
		t.Errorf("the empty set: %v", err)
	}
	enc := set.String()
	for i := 1; i < len(enc); i++ {
		if _, err := ParseSet(enc[:i], 8); err == nil {
			t.Errorf("a truncation to %d of %d bytes was accepted", i, len(enc))
		}
	}
	if _, err := ParseSet(enc+"x", 8); err == nil {
		t.Error("a trailing byte was accepted")
	}
	// One entry whose value has tag 99.
	if _, err := ParseSet("\x01\x01k\x63", 8); err == nil {
		t.Error("an unknown tag was accepted")
	}
	if _, err := ParseSet(enc, 0); err == nil {
		t.Error("nesting beyond maxDepth 0 was accepted")
	}
	// A count far beyond the bytes left.
	if _, err := ParseSet("\xff\xff\xff\xff\x0f", 8); err == nil {
		t.Error("a count beyond the input was accepted")
	}
}
