package exposition

import (
	"net/http"
	"testing"
)

func TestNegotiate(t *testing.T) {
	cases := []struct {
		accept string
		want   Negotiated
	}{
		{"", Negotiated{FormatText004, EscapeUnderscores, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"}},
		{"*/*", Negotiated{FormatText004, EscapeUnderscores, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"}},
		// Prometheus 3's default scrape Accept header.
		{"application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1",
			Negotiated{FormatOpenMetrics100, EscapeNone, "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=allow-utf-8"}},
		// Prometheus 2's.
		{"application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
			Negotiated{FormatOpenMetrics100, EscapeUnderscores, "application/openmetrics-text; version=1.0.0; charset=utf-8; escaping=underscores"}},
		{"application/openmetrics-text;version=0.0.1",
			Negotiated{FormatOpenMetrics001, EscapeUnderscores, "application/openmetrics-text; version=0.0.1; charset=utf-8; escaping=underscores"}},
		{"text/plain;version=1.0.0;escaping=dots",
			Negotiated{FormatText100, EscapeDots, "text/plain; version=1.0.0; charset=utf-8; escaping=dots"}},
		{"text/plain;version=1.0.0;escaping=values",
			Negotiated{FormatText100, EscapeValues, "text/plain; version=1.0.0; charset=utf-8; escaping=values"}},
		// 0.0.4 cannot carry UTF-8 names, whatever the scraper allows.
		{"text/plain;version=0.0.4;escaping=allow-utf-8",
			Negotiated{FormatText004, EscapeUnderscores, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"}},
		{"application/json", Negotiated{FormatText004, EscapeUnderscores, "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"}},
	}
	for _, c := range cases {
		h := http.Header{}
		if c.accept != "" {
			h.Set("Accept", c.accept)
		}
		if got := Negotiate(h); got != c.want {
			t.Errorf("Accept %q:\n got %+v\nwant %+v", c.accept, got, c.want)
		}
	}
}

func TestOpenMetricsHeader(t *testing.T) {
	cases := []struct {
		name, help string
		typ        Type
		want       string
	}{
		{"requests_total", "Requests \"served\".", TypeCounter, "# TYPE requests counter\n# HELP requests Requests \\\"served\\\".\n"},
		{"requests", "", TypeCounter, "# TYPE requests unknown\n"},
		// A counter called _total alone has no family name of its own.
		{"_total", "", TypeCounter, "# TYPE _total unknown\n"},
		{"x", "", TypeUntyped, "# TYPE x unknown\n"},
		{"lat", "", TypeHistogram, "# TYPE lat histogram\n"},
	}
	for _, c := range cases {
		if got := string(AppendOpenMetricsHeader(nil, c.name, c.help, c.typ)); got != c.want {
			t.Errorf("AppendOpenMetricsHeader(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestAppendCanonical(t *testing.T) {
	cases := map[float64]string{1: "1.0", 0.5: "0.5", 1e-5: "1e-05", 2.5: "2.5", 1000: "1000.0", 1e21: "1e+21"}
	for v, want := range cases {
		if got := string(AppendCanonical(nil, v)); got != want {
			t.Errorf("AppendCanonical(%v) = %q, want %q", v, got, want)
		}
	}
}

// TestRegistry checks the registered formats: the default is Format(0),
// the zero value, and names and media types are unique.
func TestRegistry(t *testing.T) {
	if !Format(0).Spec().Default || Format(0) != FormatText004 {
		t.Errorf("Format(0) = %s, want the default, text 0.0.4", Format(0))
	}
	names, types := map[string]bool{}, map[string]bool{}
	for _, f := range Formats() {
		s := f.Spec()
		if names[s.Name] || types[string(s.MediaType)] {
			t.Errorf("format %s: name or media type %q registered twice", s.Name, s.MediaType)
		}
		names[s.Name], types[string(s.MediaType)] = true, true
		if f != 0 && s.Default {
			t.Errorf("format %s is a second default", s.Name)
		}
	}
}
