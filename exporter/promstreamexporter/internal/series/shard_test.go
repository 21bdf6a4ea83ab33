package series

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// kongBounds are Kong's UPSTREAM_LATENCY_BUCKETS.
var kongBounds = []float64{25, 50, 80, 100, 250, 400, 700, 1000, 2000, 5000, 10000, 30000, 60000}

// fillKong fills a histogram with Kong's 13 bounds and counts.
type fillKong struct{ n uint64 }

func (f fillKong) Fill(d *Dist) {
	d.Bounds = kongBounds
	d.Counts = resizeCounts(d.Counts, len(kongBounds))
	for i := range d.Counts {
		d.Counts[i] = f.n * uint64(i+1)
	}
	d.Count, d.Sum, d.HasSum = f.n*20, float64(f.n)*1234.5, true
}

func resizeCounts(c []uint64, n int) []uint64 {
	if cap(c) >= n {
		return c[:n]
	}
	return make([]uint64, n)
}

// kongSeries is one series of the kong200k workload.
type kongSeries struct {
	family int // index into kongFamilies
	i      int
	labels labelList
}

var kongFamilies = []struct {
	name, help string
	typ        exposition.Type
}{
	{"kong_upstream_target_health", "Health status of targets of upstream.", exposition.TypeGauge},
	{"kong_http_requests_total", "HTTP status codes per consumer/service/route in Kong", exposition.TypeCounter},
	{"kong_request_latency_ms", "Total latency incurred during requests for each service/route in Kong", exposition.TypeHistogram},
}

// kong200kSeries lists 200,000 series shaped like a Kong node's exposition:
// 80,000 upstream-health gauges (5 labels), 100,000 request counters (6
// labels) and 20,000 latency histograms (3 labels, Kong's 13 buckets):
// 500,000 sample lines.
func kong200kSeries() []kongSeries {
	out := make([]kongSeries, 0, 200_000)
	for i := range 80_000 {
		addr := "10." + strconv.Itoa(i/62500) + "." + strconv.Itoa(i/250%250) + "." + strconv.Itoa(i%250) + ":8080"
		out = append(out, kongSeries{0, i, labelList{
			{Name: "address", Value: addr}, {Name: "state", Value: [...]string{"healthy", "unhealthy", "dns_error", "healthchecks_off"}[i%4]},
			{Name: "subsystem", Value: "http"}, {Name: "target", Value: addr}, {Name: "upstream", Value: "upstream-" + strconv.Itoa(i/8)},
		}})
	}
	for i := range 100_000 {
		out = append(out, kongSeries{1, i, labelList{
			{Name: "code", Value: strconv.Itoa(200 + i%3)}, {Name: "consumer", Value: "consumer-" + strconv.Itoa(i%7)},
			{Name: "route", Value: "route-" + strconv.Itoa(i/3)}, {Name: "service", Value: "service-" + strconv.Itoa(i/30)},
			{Name: "source", Value: "service"}, {Name: "workspace", Value: "default"},
		}})
	}
	for i := range 20_000 {
		out = append(out, kongSeries{2, i, labelList{
			{Name: "route", Value: "route-" + strconv.Itoa(i)}, {Name: "service", Value: "service-" + strconv.Itoa(i/10)},
			{Name: "workspace", Value: "default"},
		}})
	}
	return out
}

// kong200k builds a table of the kong200k series, inserted in list order.
func kong200k(tb testing.TB, o Options) *Table {
	tb.Helper()
	return kongTable(tb, o, kong200kSeries())
}

func kongTable(tb testing.TB, o Options, list []kongSeries) *Table {
	tbl := New(o)
	families := make([]*Family, len(kongFamilies))
	for j, kf := range kongFamilies {
		families[j], _ = tbl.Family(kf.name, kf.help, kf.typ)
	}
	ctx := &Context{}
	for _, ks := range list {
		attrs := pcommon.NewMap()
		attrs.PutInt("i", int64(ks.i))
		f := families[ks.family]
		s, err := f.Series(uint64(ks.i), &Key{Context: ctx, Attrs: attrs}, 1, ks.labels)
		if err != nil {
			tb.Fatal(err)
		}
		if f.typ == exposition.TypeHistogram {
			s.UpdateDist(1, fillKong{n: uint64(ks.i % 100)})
		} else {
			s.SetValue(float64(ks.i%2), 1)
		}
	}
	return tbl
}

// BenchmarkShardScrape renders the 200,000-series Kong table whole, then each
// of 4 shards (?shard=I&shards=4), in text 0.0.4 and protobuf, and gzip'd
// text with pages unchanged and changed. Besides
// ns/op (wall) it reports cpu-ns/op, the process's CPU time per scrape
// (getrusage; the benchmark allocates next to nothing, so that is the
// scrape's), and for each shard x-whole-cpu and x-whole, its CPU and wall
// time over the whole scrape's (same format, same run): with 4 shards, a
// scrape that touches only its part is near 0.25.
//
//	go test -run '^$' -bench ShardScrape -count 6 ./exporter/promstreamexporter/internal/series
func BenchmarkShardScrape(b *testing.B) {
	tbl := kong200k(b, Options{})
	var pages []*page
	for _, f := range tbl.families {
		pages = f.appendPages(pages, &Query{})
	}
	// gzip: text gzip'd by the writer (Query.Gzip), every page unchanged
	// since the scrape before (spliced); gzip-changed: every page changed
	// before each scrape (rendered and compressed anew).
	formats := []struct {
		name          string
		f             exposition.Format
		gzip, changed bool
	}{{"text", exposition.FormatText004, false, false}, {"proto", exposition.FormatProtoDelim, false, false},
		{"gzip", exposition.FormatText004, true, false}, {"gzip-changed", exposition.FormatText004, true, true}}
	for _, fm := range formats {
		// One scrape first: the first of each format fills lazy caches
		// (le texts, protobuf label pairs).
		var warm Writer
		if _, err := warm.WriteTo(context.Background(), tbl, &countingWriter{}, &Query{Format: fm.f}); err != nil {
			b.Fatal(err)
		}
		var whole, wholeCPU time.Duration
		run := func(name string, q *Query) {
			b.Run(fm.name+"/"+name, func(b *testing.B) {
				var w Writer
				var sink countingWriter
				ctx := context.Background()
				if fm.gzip { // the pages this query keeps
					if _, err := w.WriteTo(ctx, tbl, &sink, q); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportAllocs()
				cpu := processCPU()
				for b.Loop() {
					if fm.changed {
						for _, p := range pages {
							p.touch()
						}
					}
					sink.n = 0
					if _, err := w.WriteTo(ctx, tbl, &sink, q); err != nil {
						b.Fatal(err)
					}
				}
				cpu = (processCPU() - cpu) / time.Duration(b.N)
				b.SetBytes(sink.n)
				perOp := b.Elapsed() / time.Duration(b.N)
				if cpu > 0 {
					b.ReportMetric(float64(cpu), "cpu-ns/op")
				}
				switch {
				case q.Shards == 0:
					whole, wholeCPU = perOp, cpu
				case whole > 0:
					b.ReportMetric(float64(perOp)/float64(whole), "x-whole")
					if wholeCPU > 0 {
						b.ReportMetric(float64(cpu)/float64(wholeCPU), "x-whole-cpu")
					}
				}
			})
		}
		run("whole", &Query{Format: fm.f, Gzip: fm.gzip})
		for i := range uint64(4) {
			run("shard"+strconv.FormatUint(i, 10)+"of4", &Query{Format: fm.f, Shard: i, Shards: 4, Gzip: fm.gzip})
		}
	}
}

// shardOf returns the shard (of n) a scrape of tbl puts the series whose
// sample line starts with prefix in, or -1.
func shardOf(t *testing.T, tbl *Table, prefix string, n uint64) int {
	t.Helper()
	found := -1
	for i := range n {
		body := renderQuery(t, tbl, &Query{Shard: i, Shards: n})
		for line := range strings.SplitSeq(body, "\n") {
			if strings.HasPrefix(line, prefix) {
				if found >= 0 {
					t.Fatalf("%s is in shards %d and %d", prefix, found, i)
				}
				found = int(i)
			}
		}
	}
	return found
}

// TestShardHashIsCanonical: the shard of a series depends on its label set
// only. Two collectors with label_order as_received that first saw a
// series' attributes in different orders, and a collector with sorted
// labels, put it in the same shard, the one xxhash of its sorted rendering
// gives.
func TestShardHashIsCanonical(t *testing.T) {
	a, b, c := New(Options{Unsorted: true}), New(Options{Unsorted: true}), New(Options{})
	const n = 7
	for i := range 200 {
		route := "/r" + strconv.Itoa(i)
		asc := labelList{{Name: "code", Value: "200"}, {Name: "route", Value: route}, {Name: "service", Value: "s"}}
		desc := labelList{asc[2], asc[0], asc[1]}
		for _, x := range []struct {
			tbl    *Table
			labels labelList
		}{{a, asc}, {b, desc}, {c, asc}} {
			f, _ := x.tbl.Family("requests_total", "", exposition.TypeCounter)
			key := Key{Context: kong, Attrs: pcommon.NewMap()}
			key.Attrs.PutStr("route", route)
			s, err := f.Series(uint64(i), &key, 1, x.labels)
			if err != nil {
				t.Fatal(err)
			}
			s.SetValue(1, 1)
		}
		want := int(xxhash.Sum64String(`code="200",route="`+route+`",service="s"`) % n)
		// b writes the labels in the order they arrived: service first.
		if got := shardOf(t, b, `requests_total{service="s",code="200",route="`+route+`"}`, n); got != want {
			t.Fatalf("%s: as_received (arrived service, code, route) puts it in shard %d, want %d", route, got, want)
		}
		if i%50 != 0 {
			continue // the other two tables, on a few routes (each costs n scrapes)
		}
		if got := shardOf(t, a, `requests_total{code="200",route="`+route+`"`, n); got != want {
			t.Fatalf("%s: as_received (arrived sorted) puts it in shard %d, want %d", route, got, want)
		}
		if got := shardOf(t, c, `requests_total{code="200",route="`+route+`"`, n); got != want {
			t.Fatalf("%s: sorted puts it in shard %d, want %d", route, got, want)
		}
	}
}

// TestShardsAfterRemovalAndExpiry: the hash column and the buckets follow
// their series through Remove and Expire, so the shards still partition the
// family and each series stays in the shard of its own hash, whether its
// scrape reads buckets (N dividing NumBuckets) or the hash column.
func TestShardsAfterRemovalAndExpiry(t *testing.T) {
	// 2,000 series: the head (1,024) and the rest in buckets.
	tbl, f, keys := healthFamily(t, 2000)
	gone := map[int]bool{}
	for _, i := range removed(2000, 300) {
		if !f.Remove(uint64(i), &keys[i]) {
			t.Fatalf("series %d not found", i)
		}
		gone[i] = true
	}
	for i := range 2000 {
		if i%3 == 0 && !gone[i] {
			create(t, f, keys, i, 5) // a hit: stamps it at 5
		}
	}
	tbl.Expire(5) // everything not updated at 5: two thirds of what is left
	whole := sampleSet(renderQuery(t, tbl, &Query{}))
	if len(whole) == 0 || int64(len(whole)) != tbl.Len() {
		t.Fatalf("%d lines for %d series", len(whole), tbl.Len())
	}
	for _, n := range []uint64{2, 3, 4, 8, 64, 128} {
		seen := 0
		for i := range n {
			for line := range sampleSet(renderQuery(t, tbl, &Query{Shard: i, Shards: n})) {
				if !whole[line] {
					t.Fatalf("shard %d/%d: %q is not in the whole scrape", i, n, line)
				}
				labels := line[strings.IndexByte(line, '{')+1 : strings.LastIndexByte(line, '}')]
				if h := xxhash.Sum64String(labels) % n; h != i {
					t.Fatalf("shard %d/%d holds %q, whose hash is in shard %d", i, n, line, h)
				}
				seen++
			}
		}
		if seen != len(whole) {
			t.Fatalf("%d shards hold %d lines, the whole scrape %d", n, seen, len(whole))
		}
	}
}

func sampleSet(body string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			out[line] = true
		}
	}
	return out
}
