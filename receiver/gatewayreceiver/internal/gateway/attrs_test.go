package gateway

import (
	"strconv"
	"testing"
)

// The attribute table finds every name of the vocabulary under its key,
// and nothing else: not a prefix, an extension or a case variant.
func TestLookupAttrKey(t *testing.T) {
	seen := map[attrKey]string{}
	for _, a := range builtinAttrs {
		if got := lookupAttrKey(a.name); got != a.key {
			t.Errorf("lookupAttrKey(%q) = %d, want %d", a.name, got, a.key)
		}
		if other, dup := seen[a.key]; dup {
			t.Errorf("%q and %q share key %d", a.name, other, a.key)
		}
		seen[a.key] = a.name
		for _, near := range []string{a.name[:len(a.name)-1], a.name + "x", "x" + a.name[1:], " " + a.name} {
			if got := lookupAttrKey(near); got != akNone {
				t.Errorf("lookupAttrKey(%q) = %d, want none", near, got)
			}
		}
	}
	for _, k := range []string{"", "h", "hostnam", "hostnamf", "http.url", "http.host", "kong.request.id", "service.version",
		"http.response.status_code_", "http.response.xtatus_code", "http.response.status_codf"} {
		if got := lookupAttrKey(k); got != akNone {
			t.Errorf("lookupAttrKey(%q) = %d, want none", k, got)
		}
	}
	if got := lookupAttrKey("acme.route.name"); got != akAcmeRoute || got < akExtra {
		t.Errorf("registered name: %d, want %d", got, akAcmeRoute)
	}
}

// A table filled to its limit (the vocabulary and 128 registered names)
// still finds every name, through its collision chains.
func TestAttrTableFull(t *testing.T) {
	tab := builtinAttrTable
	for i := range 128 {
		tab = tab.with("dim."+strconv.Itoa(i), akExtra+attrKey(i))
	}
	for _, a := range builtinAttrs {
		if got := tab.lookup(a.name); got != a.key {
			t.Errorf("%q: %d, want %d", a.name, got, a.key)
		}
	}
	for i := range 128 {
		if got := tab.lookup("dim." + strconv.Itoa(i)); got != akExtra+attrKey(i) {
			t.Errorf("dim.%d: %d", i, got)
		}
	}
	if got := tab.lookup("dim.128"); got != akNone {
		t.Errorf("dim.128: %d, want none", got)
	}
	// Short names, and long ones differing only in the middle (the words
	// match, the name does not).
	tab = builtinAttrTable.with("", akExtra).with("a", akExtra+1).with("ab", akExtra+2).
		with("xxxxxxxx.1.yyyyyyyy", akExtra+3).with("xxxxxxxx.2.yyyyyyyy", akExtra+4)
	for name, want := range map[string]attrKey{"": akExtra, "a": akExtra + 1, "ab": akExtra + 2, "b": akNone, "a\x00": akNone,
		"xxxxxxxx.1.yyyyyyyy": akExtra + 3, "xxxxxxxx.2.yyyyyyyy": akExtra + 4, "xxxxxxxx.3.yyyyyyyy": akNone} {
		if got := tab.lookup(name); got != want {
			t.Errorf("%q: %d, want %d", name, got, want)
		}
	}
}
