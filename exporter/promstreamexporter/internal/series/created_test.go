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

// count writes one point of the counter series of route with start time
// start, stored at now (offsets from the zero time, as every time in these
// tests).
func count(t *testing.T, tbl *Table, f *Family, route string, v float64, start, now time.Duration) {
	t.Helper()
	key := Key{Context: kong, Attrs: pcommon.NewMap()}
	key.Attrs.PutStr("route", route)
	s, err := f.Series(int64Hash(route), &key, 1, labelList{{Name: "job", Value: "kong"}, {Name: "route", Value: route}})
	if err != nil {
		t.Fatal(err)
	}
	s.SetCounter(v, tbl.Start(int64(start), int64(now)), 1)
}

func int64Hash(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

// TestCreatedAfterTheScrapesThatLackedIt: a lifetime that began in this
// process is written with a created time after every scrape that began
// before its first point was stored (they lacked it: Prometheus holds a
// staleness marker or the previous lifetime's value there) and before the
// first scrape that writes it, so Prometheus's zero sample at it is always
// in order; a scrape that began before the point was stored holds the
// series back; a lifetime from before the process (restored from storage)
// keeps its own start; the created time, once settled, never moves while
// the lifetime lasts, and a new lifetime settles anew.
func TestCreatedAfterTheScrapesThatLackedIt(t *testing.T) {
	const epoch = 10000 * time.Second
	ms := func(d time.Duration) int64 { return int64(d / time.Millisecond) }
	guard := CreatedGuard
	for _, f := range []exposition.Format{exposition.FormatOpenMetrics100, exposition.FormatProtoDelim} {
		t.Run(f.String(), func(t *testing.T) {
			tbl := New(Options{Epoch: int64(epoch)})
			reqs, err := tbl.Family("requests_total", "", exposition.TypeCounter)
			if err != nil {
				t.Fatal(err)
			}
			tbl.ScrapeBegan(int64(epoch + 10*time.Millisecond)) // the listener opens

			// The receiver's first window starts at epoch+20ms; a scrape at
			// +1s lacks it; the window is stored at +1.5s.
			tbl.ScrapeBegan(int64(epoch + time.Second))
			if got, _ := createdScrape(t, tbl, f, epoch+time.Second); len(got) != 0 {
				t.Fatalf("series before any point: %v", got)
			}
			count(t, tbl, reqs, "/new", 5, epoch+20*time.Millisecond, epoch+1500*time.Millisecond)
			// A lifetime restored from storage (it began before the
			// process) keeps its start time.
			count(t, tbl, reqs, "/restored", 9, epoch-time.Hour, epoch+1500*time.Millisecond)
			tbl.ScrapeBegan(int64(epoch + 2*time.Second))
			got, held := createdScrape(t, tbl, f, epoch+2*time.Second)
			if want := ms(epoch + time.Second + guard); got["/new"] != want {
				t.Errorf("/new written with created %d ms, want %d (just after the scrape that lacked it)", got["/new"], want)
			}
			if want := ms(epoch - time.Hour); got["/restored"] != want {
				t.Errorf("/restored written with created %d ms, want its start %d", got["/restored"], want)
			}
			if held != 0 {
				t.Errorf("held back %d series, want none", held)
			}

			// More points of the same lifetime leave it as settled.
			count(t, tbl, reqs, "/new", 7, epoch+20*time.Millisecond, epoch+2500*time.Millisecond)
			tbl.ScrapeBegan(int64(epoch + 3*time.Second))
			if got, _ := createdScrape(t, tbl, f, epoch+3*time.Second); got["/new"] != ms(epoch+time.Second+guard) {
				t.Errorf("the same lifetime moved to created %d ms", got["/new"])
			}

			// A new lifetime stored while a scrape that began before it
			// runs: that scrape holds it back, the next writes it just
			// after the scrape it began before.
			tbl.ScrapeBegan(int64(epoch + 4*time.Second))
			count(t, tbl, reqs, "/new", 1, epoch+3500*time.Millisecond, epoch+4100*time.Millisecond)
			got, held = createdScrape(t, tbl, f, epoch+4*time.Second)
			if _, ok := got["/new"]; ok || held != 1 {
				t.Errorf("the scrape that began before the new lifetime wrote %v, held %d: want /new held back", got, held)
			}
			tbl.ScrapeBegan(int64(epoch + 5*time.Second))
			got, held = createdScrape(t, tbl, f, epoch+5*time.Second)
			if want := ms(epoch + 4*time.Second + guard); got["/new"] != want || held != 0 {
				t.Errorf("new lifetime written with created %d ms (held %d), want %d", got["/new"], held, want)
			}

			// A lifetime that began after the last scrape (by more than
			// the guard) is written with its own start.
			count(t, tbl, reqs, "/late", 2, epoch+5500*time.Millisecond, epoch+5700*time.Millisecond)
			// One whose start is after the moment it is stored (a source
			// whose clock runs ahead) too: settled, it would be held back
			// until then.
			count(t, tbl, reqs, "/ahead", 3, epoch+time.Hour, epoch+5700*time.Millisecond)
			tbl.ScrapeBegan(int64(epoch + 6*time.Second))
			got, held = createdScrape(t, tbl, f, epoch+6*time.Second)
			if got["/late"] != ms(epoch+5500*time.Millisecond) {
				t.Errorf("/late written with created %d ms, want its start %d", got["/late"], ms(epoch+5500*time.Millisecond))
			}
			if got["/ahead"] != ms(epoch+time.Hour) || held != 0 {
				t.Errorf("/ahead written with created %d ms (held %d), want its start %d", got["/ahead"], held, ms(epoch+time.Hour))
			}
		})
	}
}

// TestCreatedWithoutEpochIsTheStart: a table without an epoch (and a
// scrape without a start) writes every start time as given.
func TestCreatedWithoutEpochIsTheStart(t *testing.T) {
	tbl := New(Options{})
	reqs, _ := tbl.Family("requests_total", "", exposition.TypeCounter)
	tbl.ScrapeBegan(int64(2 * time.Second))
	count(t, tbl, reqs, "/a", 1, time.Second, time.Second)
	if got, held := createdScrape(t, tbl, exposition.FormatOpenMetrics100, 0); got["/a"] != 1000 || held != 0 {
		t.Fatalf("created %v, held %d; want 1000 ms, none held", got, held)
	}
}
