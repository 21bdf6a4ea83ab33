// Package metadatacheck holds a component's hand-written telemetry and
// status code to its metadata.yaml. mdatagen, which would generate that code
// from the file, is not available here, so each component's tests read the
// file and compare it with what the code really registers and records:
//
//   - [Telemetry]: every instrument the telemetry builder creates, as the
//     OpenTelemetry SDK sees it (name, description with its stability suffix,
//     unit, sum/gauge/histogram, int/double, monotonic, async, buckets), and
//     every builder field, against the metrics in the file, both ways;
//   - [Attributes]: the attribute keys and values on recorded points against
//     the attributes each metric lists (and their enums);
//   - [Status]: the component's type, class and per-signal stability.
//
// It follows mdatagen's metadata-schema.yaml and conventions: metric
// "x_y" is registered as "otelcol_x_y", its builder field is XY, and its
// description ends in " [<Stability level>]".
//
// It is for tests only (it takes a testing.TB) and is shared by the three
// components, hence its place in the root internal/.
package metadatacheck // import "github.com/otelgateway/otelgateway/internal/metadatacheck"

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.yaml.in/yaml/v3"
)

// Metadata is a component's metadata.yaml, the parts of it this package
// checks. Unknown keys are an error, so a misspelt key cannot pass silently.
type Metadata struct {
	Type        string `yaml:"type"`
	DisplayName string `yaml:"display_name"`
	Status      struct {
		Class         string              `yaml:"class"`
		Stability     map[string][]string `yaml:"stability"`
		Distributions []string            `yaml:"distributions"`
		Codeowners    struct {
			Active []string `yaml:"active"`
		} `yaml:"codeowners"`
	} `yaml:"status"`
	Tests      map[string]any       `yaml:"tests"`
	Attributes map[string]Attribute `yaml:"attributes"`
	Telemetry  struct {
		Metrics map[string]Metric `yaml:"metrics"`
	} `yaml:"telemetry"`
}

// Attribute is one entry of the attributes section.
type Attribute struct {
	NameOverride string   `yaml:"name_override"`
	Description  string   `yaml:"description"`
	Type         string   `yaml:"type"`
	Enum         []string `yaml:"enum"`
}

// Key is the attribute key on recorded points.
func (a Attribute) Key(id string) string {
	if a.NameOverride != "" {
		return a.NameOverride
	}
	return id
}

// Metric is one entry of telemetry.metrics.
type Metric struct {
	Enabled     bool   `yaml:"enabled"`
	Description string `yaml:"description"`
	Unit        string `yaml:"unit"`
	Stability   struct {
		Level string `yaml:"level"`
	} `yaml:"stability"`
	Sum        *Data    `yaml:"sum"`
	Gauge      *Data    `yaml:"gauge"`
	Histogram  *Data    `yaml:"histogram"`
	Attributes []string `yaml:"attributes"`
}

// Data is the sum, gauge or histogram section of a metric.
type Data struct {
	ValueType        string    `yaml:"value_type"`
	Monotonic        bool      `yaml:"monotonic"`
	Async            bool      `yaml:"async"`
	BucketBoundaries []float64 `yaml:"bucket_boundaries"`
}

// data returns the metric's one data section and its kind.
func (m *Metric) data() (string, *Data) {
	switch {
	case m.Sum != nil && m.Gauge == nil && m.Histogram == nil:
		return "sum", m.Sum
	case m.Gauge != nil && m.Sum == nil && m.Histogram == nil:
		return "gauge", m.Gauge
	case m.Histogram != nil && m.Sum == nil && m.Gauge == nil:
		return "histogram", m.Histogram
	}
	return "", nil
}

// Read parses the metadata.yaml at path and checks that it is complete:
// every metric has one data section, a stability level and a description,
// and lists only attributes the file defines.
func Read(t testing.TB, path string) *Metadata {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var md Metadata
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&md); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for name, m := range md.Telemetry.Metrics {
		kind, d := m.data()
		switch {
		case kind == "":
			t.Errorf("%s: metric %s: want exactly one of sum, gauge, histogram", path, name)
		case d.ValueType != "int" && d.ValueType != "double":
			t.Errorf("%s: metric %s: value_type %q, want int or double", path, name, d.ValueType)
		}
		if m.Stability.Level == "" {
			t.Errorf("%s: metric %s: no stability level", path, name)
		}
		if m.Description == "" || m.Unit == "" {
			t.Errorf("%s: metric %s: description and unit are required", path, name)
		}
		for _, a := range m.Attributes {
			if _, ok := md.Attributes[a]; !ok {
				t.Errorf("%s: metric %s lists attribute %q, which the attributes section does not define", path, name, a)
			}
		}
	}
	return &md
}

// Status checks the component's type, class and stability against the
// file: levels maps each signal the component supports ("metrics",
// "traces", "logs") to the level its factory declares, and must name
// exactly the signals the file does.
func Status(t testing.TB, md *Metadata, typ component.Type, class string, levels map[string]component.StabilityLevel) {
	t.Helper()
	if typ.String() != md.Type {
		t.Errorf("type: code %q, metadata.yaml %q", typ, md.Type)
	}
	if class != md.Status.Class {
		t.Errorf("class: code %q, metadata.yaml %q", class, md.Status.Class)
	}
	want := make(map[string]string)
	for level, signals := range md.Status.Stability {
		for _, s := range signals {
			want[s] = level
		}
	}
	for s, l := range levels {
		if got := strings.ToLower(l.String()); got != want[s] {
			t.Errorf("stability of %s: code %q, metadata.yaml %q", s, got, want[s])
		}
	}
	for s, l := range want {
		if _, ok := levels[s]; !ok {
			t.Errorf("stability of %s: metadata.yaml %q, but the code declares no such signal", s, l)
		}
	}
}

// Telemetry checks the instruments of builder, a telemetry builder (a
// pointer to a struct whose exported fields are instruments) made from a
// fresh tel's settings, against the file. It records one zero measurement
// on every synchronous instrument so that the SDK reports it, then compares
// what tel's reader collects with the file, metric by metric and both ways.
// Asynchronous instruments report through the builder's own callbacks.
func Telemetry(t testing.TB, md *Metadata, tel *componenttest.Telemetry, builder any) {
	t.Helper()
	ctx := context.Background()
	fields := make(map[string]bool) // builder field → async
	v := reflect.ValueOf(builder).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		async, ok := touch(ctx, v.Field(i).Interface())
		if !ok {
			t.Errorf("builder field %s (%s) is not an instrument", f.Name, f.Type)
			continue
		}
		fields[f.Name] = async
	}

	var rm metricdata.ResourceMetrics
	if err := tel.Reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			got[m.Name] = m
		}
	}

	for name, want := range md.Telemetry.Metrics {
		full := "otelcol_" + name
		field := FieldName(name)
		async, ok := fields[field]
		if !ok {
			t.Errorf("%s: metadata.yaml lists it; the builder has no field %s", full, field)
		}
		delete(fields, field)
		m, ok := got[full]
		if !ok {
			t.Errorf("%s: metadata.yaml lists it; the code registers no such instrument", full)
			continue
		}
		delete(got, full)
		if d := want.Description + " [" + title(want.Stability.Level) + "]"; m.Description != d {
			t.Errorf("%s: description:\n code %q\n yaml %q", full, m.Description, d)
		}
		if m.Unit != want.Unit {
			t.Errorf("%s: unit: code %q, metadata.yaml %q", full, m.Unit, want.Unit)
		}
		kind, d := want.data()
		if d == nil {
			continue
		}
		if async != d.Async {
			t.Errorf("%s: async: code %v, metadata.yaml %v", full, async, d.Async)
		}
		if k, vt, mono, bounds := describe(m.Data); k != kind || vt != d.ValueType {
			t.Errorf("%s: code registers a %s %s, metadata.yaml lists a %s %s", full, vt, k, d.ValueType, kind)
		} else {
			if kind == "sum" && mono != d.Monotonic {
				t.Errorf("%s: monotonic: code %v, metadata.yaml %v", full, mono, d.Monotonic)
			}
			if kind == "histogram" && !slices.Equal(bounds, d.BucketBoundaries) {
				t.Errorf("%s: bucket boundaries: code %v, metadata.yaml %v", full, bounds, d.BucketBoundaries)
			}
		}
	}
	for field := range fields {
		t.Errorf("builder field %s matches no metric of metadata.yaml", field)
	}
	for name := range got {
		t.Errorf("%s: the code registers it; metadata.yaml does not list it", name)
	}
}

// Attributes checks every point recorded in tel so far against the file:
// each point of a listed metric carries only attributes the metric lists,
// with values from their enums. A point may leave out a listed attribute.
func Attributes(t testing.TB, md *Metadata, tel *componenttest.Telemetry) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.Reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			name, ok := strings.CutPrefix(m.Name, "otelcol_")
			want, listed := md.Telemetry.Metrics[name]
			if !ok || !listed {
				continue // another component's, or the SDK's
			}
			allowed := make(map[string]Attribute, len(want.Attributes))
			for _, id := range want.Attributes {
				a := md.Attributes[id]
				allowed[a.Key(id)] = a
			}
			for _, set := range attributeSets(m.Data) {
				for _, kv := range set.ToSlice() {
					a, ok := allowed[string(kv.Key)]
					switch {
					case !ok:
						t.Errorf("%s: recorded with attribute %q, which metadata.yaml does not list for it", m.Name, kv.Key)
					case a.Enum != nil && !slices.Contains(a.Enum, kv.Value.String()):
						t.Errorf("%s: recorded with %s=%q, not one of metadata.yaml's %v", m.Name, kv.Key, kv.Value.String(), a.Enum)
					}
				}
			}
		}
	}
}

// FieldName is the builder field mdatagen names for metric name:
// "exporter_promstream_scrape_bytes" → "ExporterPromstreamScrapeBytes".
func FieldName(name string) string {
	var b strings.Builder
	for part := range strings.SplitSeq(name, "_") {
		b.WriteString(title(part))
	}
	return b.String()
}

func title(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// touch records a zero measurement on a synchronous instrument and reports
// whether inst is an asynchronous one; ok is false when it is neither.
func touch(ctx context.Context, inst any) (async, ok bool) {
	switch i := inst.(type) {
	case metric.Int64Counter:
		i.Add(ctx, 0)
	case metric.Float64Counter:
		i.Add(ctx, 0)
	case metric.Int64UpDownCounter:
		i.Add(ctx, 0)
	case metric.Float64UpDownCounter:
		i.Add(ctx, 0)
	case metric.Int64Histogram:
		i.Record(ctx, 0)
	case metric.Float64Histogram:
		i.Record(ctx, 0)
	case metric.Int64Gauge:
		i.Record(ctx, 0)
	case metric.Float64Gauge:
		i.Record(ctx, 0)
	case metric.Int64Observable, metric.Float64Observable:
		return true, true
	default:
		return false, false
	}
	return false, true
}

// describe returns the kind ("sum", "gauge", "histogram") and value type
// ("int", "double") of collected data, the monotonicity of a sum and the
// bounds of a histogram.
func describe(d metricdata.Aggregation) (kind, valueType string, monotonic bool, bounds []float64) {
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		return "sum", "int", d.IsMonotonic, nil
	case metricdata.Sum[float64]:
		return "sum", "double", d.IsMonotonic, nil
	case metricdata.Gauge[int64]:
		return "gauge", "int", false, nil
	case metricdata.Gauge[float64]:
		return "gauge", "double", false, nil
	case metricdata.Histogram[int64]:
		return "histogram", "int", false, firstBounds(d.DataPoints)
	case metricdata.Histogram[float64]:
		return "histogram", "double", false, firstBounds(d.DataPoints)
	}
	return fmt.Sprintf("%T", d), "", false, nil
}

func firstBounds[N int64 | float64](dps []metricdata.HistogramDataPoint[N]) []float64 {
	if len(dps) == 0 {
		return nil
	}
	return dps[0].Bounds
}

// attributeSets returns the attribute set of every point of d.
func attributeSets(d metricdata.Aggregation) []attribute.Set {
	var sets []attribute.Set
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Sum[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}
