package promstreamexporter

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/otel/attribute"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/metadata"
	"github.com/otelgateway/otelgateway/internal/metadatacheck"
	"github.com/otelgateway/otelgateway/internal/testutil"
)

// testFormat exists only in this test binary: a format registered the way
// a new one would be (one Register call in its own file), which the handler
// must serve and count without knowing it. Its version parameter keeps it
// out of the way of */* and of the other tests' Accept headers.
var testFormat = exposition.Register(exposition.Spec{
	Name:       "test_only",
	MediaType:  "text/x-otelgateway-test; version=1",
	Preference: 100,
	Body:       exposition.Body{Header: exposition.AppendHeader, Trailer: "# test end\n"},
})

func TestRegisteredFormatIsServed(t *testing.T) {
	tel := componenttest.NewTelemetry()
	defer func() { _ = tel.Shutdown(context.Background()) }()
	set := exportertest.NewNopSettings(metadata.Type)
	set.TelemetrySettings = tel.NewTelemetrySettings()
	e, err := newExporter(createDefaultConfig(), set)
	if err != nil {
		t.Fatal(err)
	}
	defer e.telemetry.Shutdown()
	if err := e.consumeMetrics(context.Background(), gauges("a")); err != nil {
		t.Fatal(err)
	}
	rec := get(t, e, metricsPath, http.Header{"Accept": {"text/x-otelgateway-test;version=1"}})
	if ct, want := rec.Header().Get("Content-Type"), "text/x-otelgateway-test; version=1; escaping=underscores"; ct != want {
		t.Errorf("Content-Type = %q, want %q", ct, want)
	}
	if body, want := rec.Body.String(), "# TYPE g gauge\ng{k=\"a\"} 0\n# test end\n"; body != want {
		t.Errorf("body = %q, want %q", body, want)
	}
	if n := testutil.Int64Sum(t, tel, "otelcol_exporter_promstream_scrapes", attribute.String("format", "test_only"), attribute.String("outcome", "ok")); n != 1 {
		t.Errorf("scrapes{format=test_only,outcome=ok} = %d, want 1", n)
	}
}

// TestFormatNamesMatchMetadata holds the `format` attribute's enum in
// metadata.yaml to the registered formats (but the test-only one).
func TestFormatNamesMatchMetadata(t *testing.T) {
	md := metadatacheck.Read(t, "metadata.yaml")
	var names []string
	for _, f := range exposition.Formats() {
		if f != testFormat {
			names = append(names, f.String())
		}
	}
	enum := slices.Clone(md.Attributes["format"].Enum)
	slices.Sort(names)
	slices.Sort(enum)
	if !slices.Equal(names, enum) {
		t.Errorf("registered formats %s, metadata.yaml's format enum %s", strings.Join(names, ", "), strings.Join(enum, ", "))
	}
}
