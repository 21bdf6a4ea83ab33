package exposition

import (
	"errors"
	"io"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
)

// FuzzLabelValueRoundTrip writes a series with a hostile label value and help
// text and reads it back with Prometheus's own parser: the value must come
// back unchanged and the exposition must parse.
// Run: go test ./exporter/promstreamexporter/internal/exposition -run '^$' -fuzz FuzzLabelValueRoundTrip -fuzztime 60s
func FuzzLabelValueRoundTrip(f *testing.F) {
	for _, s := range []string{"plain", `quo"te`, `back\slash`, "new\nline", `\"\n\\`, "ünï✓", "} 1\nfake 2"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, value, help string) {
		if !utf8.ValidString(value) || !utf8.ValidString(help) || value == "" {
			return // the exporter only ever sees valid UTF-8 (pdata strings)
		}
		b := AppendHeader(nil, "m", help, TypeGauge)
		b = AppendSeriesPrefix(b, "m", []Label{{Name: "v", Value: value}})
		b = AppendSample(b, 1)
		p, err := textparse.New(b, "text/plain; version=0.0.4", labels.NewSymbolTable(), textparse.ParserOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for {
			entry, err := p.Next()
			if errors.Is(err, io.EOF) {
				t.Fatalf("no series in %q", b)
			}
			if err != nil {
				t.Fatalf("parse %q: %v", b, err)
			}
			if entry != textparse.EntrySeries {
				continue
			}
			var lset labels.Labels
			p.Labels(&lset)
			if got := lset.Get("v"); got != value {
				t.Fatalf("label value %q came back as %q from %q", value, got, b)
			}
			return
		}
	})
}
