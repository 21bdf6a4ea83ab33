package health

import (
	"net/url"
	"testing"
)

// An origin is scheme, host (any case) and port (explicit or the
// scheme's); anything else differs.
func TestOriginOf(t *testing.T) {
	base, _ := url.Parse("http://Kong.internal:8001/admin")
	own := originOf(base)
	for ref, same := range map[string]bool{
		"/upstreams?size=100":                     true,
		"http://kong.INTERNAL:8001/upstreams":     true,
		"HTTP://kong.internal:8001/x":             true,
		"//kong.internal:8001/x":                  true,
		"//evil.example:8001/upstreams":           false,
		"https://kong.internal:8001/upstreams":    false,
		"http://kong.internal/upstreams":          false, // port 80
		"http://kong.internal:8002/upstreams":     false,
		"http://kong.internal.:8001/upstreams":    false,
		"http://user:pw@evil.example:8001/x":      false,
		"https:/upstreams":                        false, // another scheme, no host
		"http://[::1]:8001/upstreams":             false,
		"http://kong.internal:8001@evil.example/": false, // userinfo, then the host
	} {
		u, err := base.Parse(ref)
		if err != nil {
			t.Errorf("%q: %v", ref, err)
			continue
		}
		if got := originOf(u) == own; got != same {
			t.Errorf("%q resolves to %q: same origin %v, want %v", ref, u, got, same)
		}
	}
	for raw, want := range map[string]string{
		"http://kong:8001":   "http://kong:8001",
		"https://Kong":       "https://kong:443",
		"http://kong":        "http://kong:80",
		"http://[::1]:9901/": "http://[::1]:9901",
	} {
		u, _ := url.Parse(raw)
		if got := originOf(u).String(); got != want {
			t.Errorf("origin of %q = %q, want %q", raw, got, want)
		}
	}
}
