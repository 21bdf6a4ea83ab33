package gateway

import "unicode/utf8"

// CutLabel returns s cut to at most max bytes, at a whole UTF-8 character,
// so that a label value stays valid for Prometheus (which refuses invalid
// UTF-8) where a byte cut could split a character. s itself when it fits.
func CutLabel(s string, max int) string {
	if len(s) <= max {
		return s
	}
	n := max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
