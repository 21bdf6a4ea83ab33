package series

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// labelList is a fixed LabelSource.
type labelList []exposition.Label

func (l labelList) Labels() []exposition.Label { return l }

var kong = &Context{Labels: []exposition.Label{{Name: "job", Value: "kong"}}}

// set writes one series of f whose only attribute is route, hashed by the
// caller, and reports whether that created a series.
func set(t *testing.T, f *Family, hash uint64, route string, v float64, now int64) bool {
	t.Helper()
	key := Key{Context: kong, Attrs: pcommon.NewMap()}
	key.Attrs.PutStr("route", route)
	before := f.table.Len()
	s, err := f.Series(hash, &key, now, labelList{{Name: "job", Value: "kong"}, {Name: "route", Value: route}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetValue(v, now)
	return f.table.Len() > before
}

func render(t *testing.T, tbl *Table) string {
	t.Helper()
	return renderQuery(t, tbl, &Query{})
}

// sampleLines counts the lines of a text exposition that are not comments:
// one per gauge series. A family whose series all left writes no header,
// so "lines less one" would miscount it.
func sampleLines(body string) int64 {
	n := int64(0)
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" && line[0] != '#' {
			n++
		}
	}
	return n
}

func renderQuery(t *testing.T, tbl *Table, q *Query) string {
	t.Helper()
	var b bytes.Buffer
	var w Writer
	n, err := w.WriteTo(context.Background(), tbl, &b, q)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(b.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, b.Len())
	}
	return b.String()
}

func TestRenderKeepsFamilyAndInsertionOrder(t *testing.T) {
	tbl := New(Options{})
	reqs, _ := tbl.Family("requests_total", "Requests.", exposition.TypeCounter)
	temp, _ := tbl.Family("temperature", "", exposition.TypeGauge)
	set(t, reqs, 2, "/b", 1, 1)
	set(t, temp, 1, "/x", 21.5, 1)
	set(t, reqs, 1, "/a", 2, 1)
	if created := set(t, reqs, 2, "/b", 5, 2); created {
		t.Fatal("updating /b created a new series")
	}
	want := `# HELP requests_total Requests.
# TYPE requests_total counter
requests_total{job="kong",route="/b"} 5
requests_total{job="kong",route="/a"} 2
# TYPE temperature gauge
temperature{job="kong",route="/x"} 21.5
`
	if got := render(t, tbl); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
	if tbl.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tbl.Len())
	}
}

func TestTypeConflictIsRefused(t *testing.T) {
	tbl := New(Options{})
	if _, err := tbl.Family("x", "", exposition.TypeCounter); err != nil {
		t.Fatal(err)
	}
	if _, err := tbl.Family("x", "", exposition.TypeGauge); !errors.Is(err, ErrTypeConflict) {
		t.Fatalf("second type: err = %v, want ErrTypeConflict", err)
	}
}

func TestCollidingHashesStayDistinct(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("m", "", exposition.TypeGauge)
	set(t, f, 7, "/a", 1, 1)
	if !set(t, f, 7, "/b", 2, 1) {
		t.Fatal("a colliding key was taken for an existing series")
	}
	set(t, f, 7, "/a", 3, 2)
	want := "# TYPE m gauge\nm{job=\"kong\",route=\"/a\"} 3\nm{job=\"kong\",route=\"/b\"} 2\n"
	if got := render(t, tbl); got != want {
		t.Fatalf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestManyPagesAndExpiry(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("m", "", exposition.TypeGauge)
	const n = 3*PageSize + 10
	for i := range n {
		set(t, f, uint64(i), strconv.Itoa(i), float64(i), int64(i%2)) // odd ones newer
	}
	if len(f.pages) != 4 {
		t.Fatalf("%d pages for %d series, want 4", len(f.pages), n)
	}
	if removed := tbl.Expire(1); removed != n/2 {
		t.Fatalf("Expire removed %d, want %d", removed, n/2)
	}
	if tbl.Len() != n/2 {
		t.Fatalf("Len after expiry = %d, want %d", tbl.Len(), n/2)
	}
	var want bytes.Buffer
	want.WriteString("# TYPE m gauge\n")
	for i := 1; i < n; i += 2 {
		want.WriteString(`m{job="kong",route="` + strconv.Itoa(i) + `"} ` + strconv.Itoa(i) + "\n")
	}
	if got := render(t, tbl); got != want.String() {
		t.Fatalf("after expiry the survivors are not in insertion order")
	}
	// An expired series set again is a new series, at the end.
	if !set(t, f, 0, "0", 100, 5) {
		t.Fatal("re-setting an expired series did not create it")
	}
	if tbl.Expire(5) != n/2 || tbl.Len() != 1 {
		t.Fatalf("second expiry left %d series, want 1", tbl.Len())
	}
}

func TestEmptyFamiliesAreNotWritten(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("gone", "", exposition.TypeGauge)
	set(t, f, 1, "/a", 1, 1)
	tbl.Expire(2)
	if got := render(t, tbl); got != "" {
		t.Fatalf("rendered %q for a table with no series", got)
	}
}

type failingWriter struct{ after int }

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("connection reset")
	}
	w.after--
	return len(p), nil
}

func TestWriteErrorStopsTheScrape(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("m", "", exposition.TypeGauge)
	for i := range 160 * PageSize { // several flushes
		set(t, f, uint64(i), strconv.Itoa(i)+"-a-long-route-to-fill-the-buffer-faster/and/more/and/more", 1, 1)
	}
	var w Writer
	if _, err := w.WriteTo(context.Background(), tbl, &failingWriter{after: 1}, &Query{}); err == nil || err.Error() != "connection reset" {
		t.Fatalf("WriteTo error = %v, want the writer's error", err)
	}
}

// TestConcurrentScrapesAndWrites is for the race detector: scrapes, updates,
// inserts and expiry all at once.
func TestConcurrentScrapesAndWrites(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("m", "", exposition.TypeGauge)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 2000 {
				set(t, f, uint64(i%700), strconv.Itoa(i%700), float64(i), int64(w*1000+i))
			}
		})
	}
	wg.Go(func() {
		var wr Writer
		for range 50 {
			var b bytes.Buffer
			if _, err := wr.WriteTo(context.Background(), tbl, &b, &Query{}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for i := range 20 {
			tbl.Expire(int64(i * 50))
		}
	})
	wg.Wait()
	if got := sampleLines(render(t, tbl)); got != tbl.Len() {
		t.Fatalf("rendered %d series, Len says %d", got, tbl.Len())
	}
}

// BenchmarkWriteTo renders the Kong upstream-health family (5 labels) at
// 10k and 100k series. Compare with:
// go test -run '^$' -bench WriteTo -count 6 ./exporter/promstreamexporter/internal/series | benchstat -
func BenchmarkWriteTo(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			tbl := New(Options{})
			f, _ := tbl.Family("kong_upstream_target_health", "Health status of targets of upstream.", exposition.TypeGauge)
			for i := range n {
				key := Key{Context: kong, Attrs: pcommon.NewMap()}
				key.Attrs.PutStr("target", strconv.Itoa(i))
				addr := "10.0." + strconv.Itoa(i/250) + "." + strconv.Itoa(i%250) + ":8080"
				s, err := f.Series(uint64(i), &key, 1, labelList{
					{Name: "address", Value: addr}, {Name: "state", Value: "healthy"}, {Name: "subsystem", Value: "http"},
					{Name: "target", Value: addr}, {Name: "upstream", Value: "upstream-" + strconv.Itoa(i/2)},
				})
				if err != nil {
					b.Fatal(err)
				}
				s.SetValue(1, 1)
			}
			var w Writer
			var sink countingWriter
			q := &Query{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				sink.n = 0
				if _, err := w.WriteTo(ctx, tbl, &sink, q); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(sink.n)
		})
	}
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

type fillCount struct{}

func (fillCount) Fill(d *Dist) { d.Count++ }

// TestAliasLookupWhileDistUpdates is for the race detector: a key that
// renders like an existing series compares against that series' labels
// while an update of its distribution may be giving it its Dist.
func TestAliasLookupWhileDistUpdates(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("h", "", exposition.TypeHistogram)
	labels := labelList{{Name: "job", Value: "kong"}, {Name: "route", Value: "/a"}}
	for i := range 50 {
		route := "/" + strconv.Itoa(i)
		labels[1].Value = route
		k := Key{Context: kong, Attrs: pcommon.NewMap()}
		k.Attrs.PutStr("route", route)
		s, _ := f.Series(uint64(i), &k, 1, labels)
		alias := Key{Context: kong, Attrs: pcommon.NewMap()}
		alias.Attrs.PutStr("http.route", route)
		var wg sync.WaitGroup
		wg.Go(func() { s.UpdateDist(1, fillCount{}) })
		if got, _ := f.Series(uint64(i), &alias, 1, labels); got != s {
			t.Fatal("a key rendering alike made a second series")
		}
		wg.Wait()
	}
}

// counterSeries writes one counter series of f (route /a) with a start
// time and an exemplar, so OpenMetrics has a _created line and an exemplar
// to write when the family is an OpenMetrics counter.
func counterSeries(t *testing.T, f *Family, v float64) {
	t.Helper()
	key := Key{Context: kong, Attrs: pcommon.NewMap()}
	key.Attrs.PutStr("route", "/a")
	s, err := f.Series(1, &key, 1, labelList{{Name: "job", Value: "kong"}, {Name: "route", Value: "/a"}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetCounter(v, 1_700_000_000_000_000_000, 1)
	s.SetExemplars([]Exemplar{{TraceID: [16]byte{1}, SpanID: [8]byte{2}, Value: 1, Time: 1_700_000_000_500_000_000}})
}

// TestExactCounterNames: with Options.ExactCounterNames, a counter x and a
// counter x_total (Envoy's envoy_cluster_upstream_rq and
// envoy_cluster_upstream_rq_total), or a gauge y and a counter y_total, are
// two families in either order of arrival. The Prometheus text formats
// write each as it is; OpenMetrics, where x_total would be family x, writes
// the clashing counter as an unknown family of its own name (no _created,
// no exemplar), and Prometheus's parser reads every sample of the text
// exposition from it. A counter that clashes with nothing (z_total) stays
// an OpenMetrics counter. Without the option the second family is refused.
func TestExactCounterNames(t *testing.T) {
	const text = `# TYPE x counter
x{job="kong",route="/a"} 1
# TYPE x_total counter
x_total{job="kong",route="/a"} 2
# TYPE y_total counter
y_total{job="kong",route="/a"} 3
# TYPE y gauge
y{job="kong",route="/b"} 4
# TYPE z_total counter
z_total{job="kong",route="/a"} 5
`
	const om = `# TYPE x unknown
x{job="kong",route="/a"} 1
# TYPE x_total unknown
x_total{job="kong",route="/a"} 2
# TYPE y_total unknown
y_total{job="kong",route="/a"} 3
# TYPE y gauge
y{job="kong",route="/b"} 4
# TYPE z counter
z_total{job="kong",route="/a"} 5 # {trace_id="01000000000000000000000000000000",span_id="0200000000000000"} 1 1700000000.5
z_created{job="kong",route="/a"} 1700000000.0
# EOF
`
	for _, order := range [][]string{{"x", "x_total"}, {"x_total", "x"}} {
		t.Run(order[0]+" first", func(t *testing.T) {
			tbl := New(Options{ExactCounterNames: true})
			fams := map[string]*Family{}
			for _, name := range order {
				f, err := tbl.Family(name, "", exposition.TypeCounter)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				fams[name] = f
			}
			y, err := tbl.Family("y_total", "", exposition.TypeCounter)
			if err != nil {
				t.Fatal(err)
			}
			g, err := tbl.Family("y", "", exposition.TypeGauge)
			if err != nil {
				t.Fatal(err)
			}
			z, err := tbl.Family("z_total", "", exposition.TypeCounter)
			if err != nil {
				t.Fatal(err)
			}
			counterSeries(t, fams["x"], 1)
			counterSeries(t, fams["x_total"], 2)
			counterSeries(t, y, 3)
			set(t, g, 9, "/b", 4, 1)
			counterSeries(t, z, 5)
			// Families are written in creation order: x and x_total in order.
			wantText, wantOM := text, om
			if order[0] == "x_total" {
				wantText = swapFirstFamilies(text, 2)
				wantOM = swapFirstFamilies(om, 2)
			}
			gotText := renderQuery(t, tbl, &Query{Format: exposition.FormatText004})
			if gotText != wantText {
				t.Fatalf("text 0.0.4:\n%s\nwant:\n%s", gotText, wantText)
			}
			gotOM := renderQuery(t, tbl, &Query{Format: exposition.FormatOpenMetrics100})
			if gotOM != wantOM {
				t.Fatalf("OpenMetrics:\n%s\nwant:\n%s", gotOM, wantOM)
			}
			textSamples := parsedEntries(t, []byte(gotText), "text/plain; version=0.0.4")
			// _created is a start time, not a sample.
			omSamples := slices.DeleteFunc(parsedEntries(t, []byte(gotOM), "application/openmetrics-text; version=1.0.0"),
				func(s string) bool { return strings.Contains(s, "_created") })
			if strings.Join(textSamples, "\n") != strings.Join(omSamples, "\n") {
				t.Errorf("OpenMetrics samples differ from text's:\n%s\n---\n%s", strings.Join(omSamples, "\n"), strings.Join(textSamples, "\n"))
			}
			protoSamples := parsedEntries(t, []byte(renderQuery(t, tbl, &Query{Format: exposition.FormatProtoDelim})), protoContentType)
			if strings.Join(textSamples, "\n") != strings.Join(protoSamples, "\n") {
				t.Errorf("protobuf samples differ from text's:\n%s\n---\n%s", strings.Join(protoSamples, "\n"), strings.Join(textSamples, "\n"))
			}
		})
	}
	t.Run("default refuses", func(t *testing.T) {
		for _, order := range [][2]string{{"x", "x_total"}, {"x_total", "x"}} {
			tbl := New(Options{})
			if _, err := tbl.Family(order[0], "", exposition.TypeCounter); err != nil {
				t.Fatal(err)
			}
			if _, err := tbl.Family(order[1], "", exposition.TypeCounter); !errors.Is(err, ErrTypeConflict) {
				t.Errorf("%s after %s: err = %v, want ErrTypeConflict", order[1], order[0], err)
			}
		}
	})
}

// swapFirstFamilies swaps the first two families of a text exposition whose
// families are n lines each.
func swapFirstFamilies(body string, n int) string {
	lines := strings.SplitAfter(body, "\n")
	out := append(append(append([]string{}, lines[n:2*n]...), lines[:n]...), lines[2*n:]...)
	return strings.Join(out, "")
}
