package series

import (
	"strings"
	"testing"
)

// TestText: a text gives back its string, whatever its length (one- and
// two-byte length prefixes), next to others in one arena or on its own;
// the empty string is the nil text.
func TestText(t *testing.T) {
	var b bucket
	var texts []text
	var want []string
	for _, n := range []int{1, 5, 127, 128, 300, 16383, 16384, 20000} {
		s := strings.Repeat(string(rune('a'+n%26)), n)
		texts = append(texts, b.intern([]byte(s)), newText([]byte(s)))
		want = append(want, s, s)
	}
	for i, x := range texts {
		if got := x.String(); got != want[i] {
			t.Fatalf("text %d: %d bytes back, want %d", i, len(got), len(want[i]))
		}
	}
	if e, n := b.intern(nil), newText([]byte{}); e.p != nil || n.p != nil || e.String() != "" {
		t.Fatal("the empty string is not the nil text")
	}
}
