package series

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// distFill fills a histogram (bounds 0..n-1, every count v) or a summary
// (n quantiles, every value v), with Count and Sum v, so that a reader can
// tell which update it sees from any one of its lines.
type distFill struct {
	n       int
	v       uint64
	summary bool
	native  int // native buckets per side (positive; negative 1/10 of it)
}

func (f distFill) Fill(d *Dist) {
	d.Count, d.Sum, d.HasSum = f.v, float64(f.v), true
	if f.summary {
		if len(d.Bounds) != f.n {
			d.Bounds = make([]float64, f.n)
			for i := range d.Bounds {
				d.Bounds[i] = float64(i+1) / float64(f.n+1)
			}
		}
		for i := range d.ResizeValues(f.n) {
			d.Values()[i] = float64(f.v)
		}
		return
	}
	if len(d.Bounds) != f.n {
		d.Bounds = make([]float64, f.n)
		for i := range d.Bounds {
			d.Bounds[i] = float64(i)
		}
	}
	d.Counts = resizeCounts(d.Counts, f.n)
	for i := range d.Counts {
		d.Counts[i] = f.v
	}
	if f.native > 0 {
		n := &Native{Schema: 3, ZeroThreshold: 1e-128, ZeroCount: 0, PosOffset: -5, NegOffset: 2,
			Pos: make([]uint64, f.native), Neg: make([]uint64, f.native/10+1)}
		for i := range n.Pos {
			n.Pos[i] = uint64(i % 7)
		}
		n.Neg[0] = f.v
		d.SetNative(n)
	}
}

// streamTable holds every kind of series, small and big: gauges past a
// page, counters with exemplars and start times, histograms of 5 and of
// 1,000 buckets (past bigSeries; exemplars, one with a native form),
// summaries of 3 and 2,000 quantiles (past it too), and a family with UTF-8
// names.
func streamTable(t testing.TB, o Options) *Table {
	t.Helper()
	tbl := New(o)
	ctx := &Context{Labels: []exposition.Label{{Name: "job", Value: "kong"}}}
	series := func(f *Family, i int, extra ...exposition.Label) *Series {
		k := Key{Context: ctx, Attrs: pcommon.NewMap()}
		k.Attrs.PutInt("i", int64(i))
		s, err := f.Series(uint64(i), &k, 1, labelList(append([]exposition.Label{
			{Name: "job", Value: "kong"}, {Name: "i", Value: strconv.Itoa(i), Attr: true, Key: "i"}}, extra...)))
		if err != nil {
			t.Fatal(err)
		}
		if o.Timestamps {
			s.SetTimestamp(1_700_000_000_123_000_000 + int64(i))
		}
		return s
	}
	g, _ := tbl.Family("g", "Gauges.", exposition.TypeGauge)
	for i := range 270 {
		series(g, i).SetValue(float64(i)/3, 1)
	}
	c, _ := tbl.Family("c_total", "Counters.", exposition.TypeCounter)
	for i := range 50 {
		s := series(c, i)
		s.SetCounter(float64(i), 1_700_000_000_000_000_000+int64(i), 1)
		if i%3 == 0 {
			s.SetExemplars([]Exemplar{{TraceID: [16]byte{1, byte(i)}, SpanID: [8]byte{2}, Value: 1, Time: 1_700_000_000_500_000_000}})
		}
	}
	h, _ := tbl.Family("h", "Histograms.", exposition.TypeHistogram)
	for i := range 40 {
		fill := distFill{n: 5, v: uint64(i + 1)}
		if i%13 == 1 {
			fill.n = 1000
		}
		if i == 14 {
			fill.native = 1000
		}
		var ex []Exemplar
		if i%2 == 1 {
			ex = []Exemplar{{TraceID: [16]byte{3}, Value: 2.5, Time: 1_700_000_000_250_000_000}, {SpanID: [8]byte{4}, Value: 1e9}}
		}
		series(h, i, exposition.Label{Name: "le", Value: "attr", Attr: true, Key: "le"}).
			UpdateHistogram(1, PointTimes{Created: 1_600_000_000_000_000_000}, fill, ex)
	}
	sm, _ := tbl.Family("s", "Summaries.", exposition.TypeSummary)
	for i := range 3 {
		fill := distFill{n: 3, v: uint64(i + 1), summary: true}
		if i == 1 {
			fill.n = 2000
		}
		series(sm, i).UpdateHistogram(1, PointTimes{Created: 1_600_000_000_000_000_000}, fill, nil)
	}
	u, _ := tbl.Family("u.x", "UTF-8.", exposition.TypeGauge)
	for i := range 5 {
		series(u, i, exposition.Label{Name: "a.b", Value: "x", Attr: true, Key: "a.b"}).SetValue(float64(i), 1)
	}
	return tbl
}

// sinkWriter records the body and the largest write.
type sinkWriter struct {
	bytes.Buffer
	largest int
}

func (s *sinkWriter) Write(p []byte) (int, error) {
	s.largest = max(s.largest, len(p))
	return s.Buffer.Write(p)
}

// streamFormats are the formats and schemes the streaming tests render.
var streamFormats = []struct {
	name string
	q    Query
	ct   string
}{
	{"text 0.0.4", Query{Format: exposition.FormatText004}, "text/plain; version=0.0.4"},
	{"text 1.0.0 utf-8", Query{Format: exposition.FormatText100, Escaping: exposition.EscapeNone}, "text/plain; version=1.0.0"},
	{"text 1.0.0 dots", Query{Format: exposition.FormatText100, Escaping: exposition.EscapeDots}, "text/plain; version=1.0.0"},
	{"openmetrics utf-8", Query{Format: exposition.FormatOpenMetrics100, Escaping: exposition.EscapeNone}, "application/openmetrics-text; version=1.0.0"},
	{"openmetrics values", Query{Format: exposition.FormatOpenMetrics100, Escaping: exposition.EscapeValues}, "application/openmetrics-text; version=1.0.0"},
	{"protobuf utf-8", Query{Format: exposition.FormatProtoDelim, Escaping: exposition.EscapeNone}, protoContentType},
	{"protobuf underscores", Query{Format: exposition.FormatProtoDelim}, protoContentType},
}

const protoContentType = "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"

// parsedEntries parses body with Prometheus's parser and returns its
// samples and native histograms, one string each, in order.
func parsedEntries(t *testing.T, body []byte, contentType string) []string {
	t.Helper()
	p, err := textparse.New(body, contentType, labels.NewSymbolTable(), textparse.ParserOptions{KeepClassicOnClassicAndNativeHistograms: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: Prometheus's parser refuses the body: %v", contentType, err)
		}
		var l labels.Labels
		switch entry {
		case textparse.EntrySeries:
			p.Labels(&l)
			_, ts, v := p.Series()
			tsv := int64(0)
			if ts != nil {
				tsv = *ts
			}
			out = append(out, fmt.Sprintf("%s %v %d", l, v, tsv))
		case textparse.EntryHistogram:
			p.Labels(&l)
			_, _, h, fh := p.Histogram()
			out = append(out, fmt.Sprintf("%s %v %v", l, h, fh))
		}
	}
}

// TestCutsDoNotChangeTheBody renders every kind of series with the page and
// series cuts at every size (a flush after every series, every big series
// written from its snapshot in pieces) and without any: the text bodies are
// byte for byte the same, the protobuf bodies (whose MetricFamily messages
// are cut where the buffer is) parse to the same samples, and no write is
// larger than the cut plus one piece.
func TestCutsDoNotChangeTheBody(t *testing.T) {
	for _, o := range []Options{{}, {Timestamps: true, ShortestBounds: true, Unsorted: true}} {
		tbl := streamTable(t, o)
		for name, typ := range map[string]exposition.Type{"h": exposition.TypeHistogram, "s": exposition.TypeSummary} {
			if big := tbl.byName[name].pages[0].series[1]; big.sizeEstimate(typ) <= bigSeries {
				t.Fatalf("the big %s's estimate %d is under bigSeries: the default limits would not cut it", name, big.sizeEstimate(typ))
			}
		}
		for _, format := range streamFormats {
			q := format.q
			whole := Writer{flushLimit: 1 << 40, bigLimit: 1 << 40}
			var want sinkWriter
			if _, err := whole.WriteTo(context.Background(), tbl, &want, &q); err != nil {
				t.Fatal(err)
			}
			wantEntries := parsedEntries(t, want.Bytes(), format.ct)
			for _, limits := range [][2]int{{1, 1}, {4096, 1}, {100, 1 << 40}, {0, 0}} {
				t.Run(fmt.Sprintf("%s/%+v/flush %d big %d", format.name, o, limits[0], limits[1]), func(t *testing.T) {
					wr := Writer{flushLimit: limits[0], bigLimit: limits[1]}
					var got sinkWriter
					n, err := wr.WriteTo(context.Background(), tbl, &got, &q)
					if err != nil {
						t.Fatal(err)
					}
					if n != int64(got.Len()) {
						t.Fatalf("WriteTo reported %d bytes, wrote %d", n, got.Len())
					}
					if q.Format.Spec().Body.Proto {
						gotEntries := parsedEntries(t, got.Bytes(), format.ct)
						if fmt.Sprint(gotEntries) != fmt.Sprint(wantEntries) {
							t.Fatalf("cut protobuf body parses to %d entries, whole to %d; first difference:\n%s", len(gotEntries), len(wantEntries), firstDiff(gotEntries, wantEntries))
						}
					} else if !bytes.Equal(got.Bytes(), want.Bytes()) {
						t.Fatalf("cut body differs from the whole one:\n%s", firstDiff(lines(got.String()), lines(want.String())))
					}
					// A write is at most the cut, one series under the big
					// bound (64 KiB) and a piece of a big series (a few
					// lines of a few hundred bytes).
					limit := wr.flushSize() + int(wr.bigSize()) + 4<<10
					if limits[1] == 1<<40 {
						limit = len(want.Bytes()) // nothing is big: a page may be whole
					}
					if got.largest > limit {
						t.Fatalf("a write of %d bytes, bound %d", got.largest, limit)
					}
				})
			}
		}
	}
}

func lines(s string) []string { return bytes2lines([]byte(s)) }

func bytes2lines(b []byte) []string {
	var out []string
	for l := range bytes.SplitSeq(b, []byte("\n")) {
		out = append(out, string(l))
	}
	return out
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("at %d:\ngot  %.300s\nwant %.300s", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(got), len(want))
}

// TestBigSeriesMemoryIsBounded: forty histograms of 50,000 buckets (issue
// 24's workload) are scraped in every format with a buffer that stays
// about flushAt, never the body (about 200 MiB of text before).
func TestBigSeriesMemoryIsBounded(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("huge", "", exposition.TypeHistogram)
	ctx := &Context{}
	for i := range 40 {
		k := Key{Context: ctx, Attrs: pcommon.NewMap()}
		k.Attrs.PutInt("i", int64(i))
		s, _ := f.Series(uint64(i), &k, 1, labelList{{Name: "i", Value: strconv.Itoa(i), Attr: true, Key: "i"}})
		s.UpdateDist(1, distFill{n: 50_000, v: 1})
	}
	var wr Writer
	for _, i := range []int{0, 3, 6} { // text, OpenMetrics, protobuf
		format := streamFormats[i]
		var sink countingWriter
		sink.n = 0
		if _, err := wr.WriteTo(context.Background(), tbl, &sink, &format.q); err != nil {
			t.Fatal(err)
		}
		if bound := flushAt + bigSeries + 4<<10; cap(wr.buf) > bound {
			t.Errorf("%s: the buffer grew to %d bytes for a %d-byte body, bound %d", format.name, cap(wr.buf), sink.n, bound)
		}
		if sink.n < 40*50_000*10 {
			t.Fatalf("%s: body of %d bytes", format.name, sink.n)
		}
	}
}

// TestBigSeriesIsOneSnapshot writes a big histogram and a big summary in
// pieces while they are updated as fast as possible: every scrape's lines
// of one series (buckets, _sum, _count) come from one update, although the
// writer releases the page lock between pieces; and an update never waits
// for a write to the connection (the sink waits for one before it
// returns).
func TestBigSeriesIsOneSnapshot(t *testing.T) {
	tbl := New(Options{})
	ctx := &Context{}
	h, _ := tbl.Family("h", "", exposition.TypeHistogram)
	sm, _ := tbl.Family("s", "", exposition.TypeSummary)
	k := Key{Context: ctx, Attrs: pcommon.NewMap()}
	hs, _ := h.Series(1, &k, 1, labelList{{Name: "k", Value: "h"}})
	ss, _ := sm.Series(1, &k, 1, labelList{{Name: "k", Value: "s"}})
	hs.UpdateDist(1, distFill{n: 2000, v: 1})
	ss.UpdateDist(1, distFill{n: 2000, v: 1, summary: true})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for v := uint64(2); ; v++ {
			select {
			case <-stop:
				return
			default:
			}
			hs.UpdateDist(1, distFill{n: 2000, v: v})
			ss.UpdateDist(1, distFill{n: 2000, v: v, summary: true})
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for _, format := range streamFormats[:6] {
		for range 3 {
			sink := &updatingSink{update: func() { hs.UpdateDist(1, distFill{n: 2000, v: 1 << 40}) }}
			wr := Writer{flushLimit: 4096}
			if _, err := wr.WriteTo(context.Background(), tbl, sink, &format.q); err != nil {
				t.Fatal(err)
			}
			values := map[string]map[string]bool{} // series → the values its lines show
			for _, e := range parsedEntries(t, sink.Bytes(), format.ct) {
				fields := strings.Fields(e)
				series := "h"
				if strings.Contains(e, `k="s"`) {
					series = "s"
				}
				if values[series] == nil {
					values[series] = map[string]bool{}
				}
				values[series][fields[len(fields)-2]] = true
			}
			for series, vs := range values {
				if len(vs) != 1 {
					t.Fatalf("%s: the lines of series %s show %d updates: %v", format.name, series, len(vs), vs)
				}
			}
			if len(values) != 2 {
				t.Fatalf("%s: %d series parsed", format.name, len(values))
			}
		}
	}
}

// updatingSink updates a series on the page being written before each
// write returns: if the writer held the page's lock while writing, the
// update would wait forever.
type updatingSink struct {
	bytes.Buffer
	update func()
}

func (s *updatingSink) Write(p []byte) (int, error) {
	done := make(chan struct{})
	go func() { s.update(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		return 0, errors.New("an update waited for a write to the connection")
	}
	return s.Buffer.Write(p)
}
