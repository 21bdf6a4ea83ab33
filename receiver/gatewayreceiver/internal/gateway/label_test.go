package gateway

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutLabel(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"route", 16, "route"},
		{strings.Repeat("a", 20), 16, strings.Repeat("a", 16)},
		{strings.Repeat("a", 15) + "é", 16, strings.Repeat("a", 15)},  // é is 2 bytes: 17 in all
		{strings.Repeat("a", 14) + "€x", 16, strings.Repeat("a", 14)}, // € is 3 bytes
		{strings.Repeat("a", 13) + "€x", 16, strings.Repeat("a", 13) + "€"},
	} {
		got := CutLabel(c.in, c.max)
		if got != c.want || len(got) > c.max || !utf8.ValidString(got) {
			t.Errorf("CutLabel(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
}
