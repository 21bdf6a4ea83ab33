package series

import (
	"strings"
	"testing"
)

// TestText: a text gives back its string, whatever its length (one-, two-
// and three-byte length prefixes); the empty string is the nil text.
func TestText(t *testing.T) {
	for _, n := range []int{1, 5, 127, 128, 300, 16383, 16384, 20000} {
		s := strings.Repeat(string(rune('a'+n%26)), n)
		if got := newText([]byte(s)).String(); got != s {
			t.Fatalf("%d bytes: %d back", n, len(got))
		}
	}
	if e := newText([]byte{}); e.p != nil || e.String() != "" {
		t.Fatal("the empty string is not the nil text")
	}
}
