package series

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/textparse"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// createdScrape renders tbl as a scrape that began at began, in format f,
// and returns the start time (ms, as Prometheus's parser reads OpenMetrics'
// _created and protobuf's created_timestamp) of every series written, by
// route, and how many series the scrape held back.
func createdScrape(t *testing.T, tbl *Table, f exposition.Format, began time.Duration) (map[string]int64, int) {
	t.Helper()
	var b bytes.Buffer
	var w Writer
	if _, err := w.WriteTo(context.Background(), tbl, &b, &Query{Format: f, Began: int64(began)}); err != nil {
		t.Fatal(err)
	}
	p, err := textparse.New(b.Bytes(), string(f.Spec().MediaType), labels.NewSymbolTable(), textparse.ParserOptions{OpenMetricsSkipSTSeries: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for {
		entry, err := p.Next()
		if errors.Is(err, io.EOF) {
			return out, w.Held()
		}
		if err != nil {
			t.Fatalf("Prometheus's parser rejects the body: %v\n%s", err, b.Bytes())
		}
		if entry != textparse.EntrySeries {
			continue
		}
		var l labels.Labels
		p.Labels(&l)
		out[l.Get("route")] = p.StartTimestamp()
	}
}

// count stores one point of the counter series of route with start time
// start at now (offsets from the zero time, as every time in these tests).
func count(t *testing.T, f *Family, route string, v float64, start, now time.Duration) {
	t.Helper()
	key := Key{Context: kong, Attrs: pcommon.NewMap()}
	key.Attrs.PutStr("route", route)
	var h uint64 = 14695981039346656037 // FNV-1a of the route
	for i := range len(route) {
		h = (h ^ uint64(route[i])) * 1099511628211
	}
	s, err := f.Series(h, &key, int64(now), labelList{{Name: "job", Value: "kong"}, {Name: "route", Value: route}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetCounter(v, int64(start), int64(now))
}

// TestCreatedHeldBackFromEarlierScrapes: a scrape that began before a
// series' created time leaves the series out, and the next scrape writes it with its start time; otherwise
// Prometheus's sample from that scrape, dated before the created time,
// would make it add the zero sample at the created time only after that
// sample: a reset that never happened. A start ahead of the clock (after
// the moment its point was stored) is written as given, not held back
// until it passes; older lifetimes are never held back.
func TestCreatedHeldBackFromEarlierScrapes(t *testing.T) {
	const base = 10000 * time.Second
	ms := func(d time.Duration) int64 { return int64(d / time.Millisecond) }
	for _, f := range []exposition.Format{exposition.FormatOpenMetrics100, exposition.FormatProtoDelim} {
		t.Run(f.String(), func(t *testing.T) {
			tbl := New(Options{})
			reqs, err := tbl.Family("requests_total", "", exposition.TypeCounter)
			if err != nil {
				t.Fatal(err)
			}
			count(t, reqs, "/old", 9, base-time.Hour, base)
			// The first window after a restart: created just before the
			// flush (base+3s) stores it, while a scrape that began at
			// base+2.99s is in flight.
			count(t, reqs, "/new", 5, base+3*time.Second-1, base+3*time.Second)
			count(t, reqs, "/ahead", 3, base+time.Hour, base+3*time.Second)
			got, held := createdScrape(t, tbl, f, base+3*time.Second-10*time.Millisecond)
			if _, ok := got["/new"]; ok || held != 1 {
				t.Errorf("the scrape that began before /new was created wrote %v, held %d: want /new held back", got, held)
			}
			if got["/old"] != ms(base-time.Hour) || got["/ahead"] != ms(base+time.Hour) {
				t.Errorf("/old and /ahead written with %v, want their start times", got)
			}
			got, held = createdScrape(t, tbl, f, base+4*time.Second)
			if got["/new"] != ms(base+3*time.Second-1) || held != 0 {
				t.Errorf("the next scrape wrote /new with created %d ms (held %d), want %d", got["/new"], held, ms(base+3*time.Second-1))
			}
		})
	}
}

// TestCreatedWithoutBeganWritesAll: a query without a start time (direct
// writers) holds nothing back.
func TestCreatedWithoutBeganWritesAll(t *testing.T) {
	tbl := New(Options{})
	reqs, _ := tbl.Family("requests_total", "", exposition.TypeCounter)
	count(t, reqs, "/a", 1, time.Second, time.Second)
	if got, held := createdScrape(t, tbl, exposition.FormatOpenMetrics100, 0); got["/a"] != 1000 || held != 0 {
		t.Fatalf("created %v, held %d; want 1000 ms, none held", got, held)
	}
}
