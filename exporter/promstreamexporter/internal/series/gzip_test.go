package series

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// gzTable is a table of every kind of series, past the head of its family
// (so shard scrapes read buckets) and within it, with the keys that find
// them again.
type gzTable struct {
	tbl          *Table
	g, c, h, s   *Family
	gKeys, cKeys []Key
	hKeys, sKeys []Key
	ctx          *Context
	withTS       bool
	nextGauge    int
}

const gzCreated = 1_700_000_000_000_000_000

func newGzTable(t testing.TB, o Options) *gzTable {
	t.Helper()
	z := &gzTable{tbl: New(o), ctx: &Context{Labels: []exposition.Label{{Name: "job", Value: "kong"}}}, withTS: o.Timestamps}
	z.g, _ = z.tbl.Family("g", "Gauges.", exposition.TypeGauge)
	z.c, _ = z.tbl.Family("c_total", "Counters.", exposition.TypeCounter)
	z.h, _ = z.tbl.Family("h", "Histograms.", exposition.TypeHistogram)
	z.s, _ = z.tbl.Family("s", "Summaries.", exposition.TypeSummary)
	for range 1500 { // the head (1,024) and buckets
		z.addGauge(t)
	}
	for i := range 300 {
		z.cKeys = append(z.cKeys, z.key(i))
		z.counter(t, i, float64(i), gzCreated+int64(i))
		if i%3 == 0 {
			z.series(t, z.c, z.cKeys[i]).SetExemplars([]Exemplar{{TraceID: [16]byte{1, byte(i)}, Value: 1, Time: gzCreated + 5e8}})
		}
	}
	for i := range 200 { // the head (128) and buckets; one big
		z.hKeys = append(z.hKeys, z.key(i))
		z.histogram(t, i, uint64(i+1))
	}
	for i := range 10 {
		z.sKeys = append(z.sKeys, z.key(i))
		z.series(t, z.s, z.sKeys[i]).UpdateHistogram(1, PointTimes{Created: gzCreated}, distFill{n: 3, v: uint64(i), summary: true}, nil)
	}
	return z
}

func (z *gzTable) key(i int) Key {
	k := Key{Context: z.ctx, Attrs: pcommon.NewMap()}
	k.Attrs.PutInt("i", int64(i))
	return k
}

// series finds or creates the series of key k in f.
func (z *gzTable) series(t testing.TB, f *Family, k Key) *Series {
	t.Helper()
	i, _ := k.Attrs.Get("i")
	s, err := f.Series(uint64(i.Int()), &k, 1, labelList{{Name: "job", Value: "kong"},
		{Name: "route", Value: "/route/" + strconv.FormatInt(i.Int(), 10), Attr: true, Key: "i"}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (z *gzTable) addGauge(t testing.TB) {
	i := z.nextGauge
	z.nextGauge++
	z.gKeys = append(z.gKeys, z.key(i))
	s := z.series(t, z.g, z.gKeys[i])
	s.SetValue(float64(i)/3, 1)
	if z.withTS {
		s.SetTimestamp(gzCreated + int64(i)*1e6)
	}
}

func (z *gzTable) counter(t testing.TB, i int, v float64, created int64) {
	z.series(t, z.c, z.cKeys[i]).SetCounter(v, created, gzCreated+1e12)
}

func (z *gzTable) histogram(t testing.TB, i int, v uint64) {
	fill := distFill{n: 5, v: v}
	if i == 150 {
		fill.n = 1000 // past bigSeries: its page is written into the stream
	}
	z.series(t, z.h, z.hKeys[i]).UpdateHistogram(1, PointTimes{Created: gzCreated}, fill, nil)
}

// gzFormats are the formats the gzip tests scrape: every text format (the
// pages gzip scrapes keep) and protobuf (compressed as a stream).
var gzFormats = []Query{
	{Format: exposition.FormatText004},
	{Format: exposition.FormatText100, Escaping: exposition.EscapeNone},
	{Format: exposition.FormatOpenMetrics100, Escaping: exposition.EscapeNone},
	{Format: exposition.FormatOpenMetrics100, Escaping: exposition.EscapeDots},
	{Format: exposition.FormatProtoDelim},
}

// gunzip decompresses body, which must be one gzip member whose CRC and size
// match (compress/gzip checks both).
func gunzip(t testing.TB, body []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the gzip body does not decompress: %v", err)
	}
	if rest, _ := io.ReadAll(bytes.NewReader(body)); len(rest) == 0 {
		t.Fatal("empty body")
	}
	return plain
}

// scrapeBoth renders q plainly with a fresh writer and gzip'd with wr, and
// fails unless the gzip body decompresses to exactly the plain one. It
// returns the plain body.
func scrapeBoth(t testing.TB, tbl *Table, wr *Writer, q Query) []byte {
	t.Helper()
	plainWr := Writer{flushLimit: wr.flushLimit, bigLimit: wr.bigLimit}
	var plain, zipped bytes.Buffer
	if _, err := plainWr.WriteTo(context.Background(), tbl, &plain, &q); err != nil {
		t.Fatal(err)
	}
	q.Gzip = true
	n, err := wr.WriteTo(context.Background(), tbl, &zipped, &q)
	if err != nil {
		t.Fatal(err)
	}
	got := gunzip(t, zipped.Bytes())
	if n != int64(len(got)) {
		t.Fatalf("WriteTo reported %d bytes, the body decompresses to %d", n, len(got))
	}
	if !bytes.Equal(got, plain.Bytes()) {
		t.Fatalf("%s: the gzip body is not the plain body:\n%s", q.Format, firstDiff(lines(string(got)), lines(plain.String())))
	}
	return plain.Bytes()
}

// TestGzipBodyIsThePlainBody: in every format, with the writer's cuts at
// every size, a gzip scrape decompresses to exactly the plain body: the
// first (every page compressed and kept), the second (kept pages
// spliced), and after each kind of change, which must never be served
// from a page kept before it.
func TestGzipBodyIsThePlainBody(t *testing.T) {
	changes := []struct {
		name   string
		change func(t *testing.T, z *gzTable)
	}{
		{"gauge value", func(t *testing.T, z *gzTable) { z.series(t, z.g, z.gKeys[7]).SetValue(-1, 2) }},
		{"gauge in a bucket", func(t *testing.T, z *gzTable) { z.series(t, z.g, z.gKeys[1400]).SetValue(-2, 2) }},
		{"counter value", func(t *testing.T, z *gzTable) { z.counter(t, 5, 1e6, gzCreated+5) }},
		{"counter start", func(t *testing.T, z *gzTable) { z.counter(t, 6, 6, gzCreated+7e9) }},
		{"timestamp", func(t *testing.T, z *gzTable) { z.series(t, z.g, z.gKeys[8]).SetTimestamp(gzCreated + 42) }},
		{"histogram", func(t *testing.T, z *gzTable) { z.histogram(t, 140, 7777) }},
		{"summary", func(t *testing.T, z *gzTable) {
			z.series(t, z.s, z.sKeys[2]).UpdateHistogram(1, PointTimes{Created: gzCreated}, distFill{n: 3, v: 99, summary: true}, nil)
		}},
		{"exemplar", func(t *testing.T, z *gzTable) {
			z.series(t, z.c, z.cKeys[4]).SetExemplars([]Exemplar{{SpanID: [8]byte{9}, Value: 3, Time: gzCreated + 9e8}})
		}},
		{"insert", func(t *testing.T, z *gzTable) {
			// Only the insert: no value yet, so nothing but the insert
			// changes the page.
			z.gKeys = append(z.gKeys, z.key(z.nextGauge))
			z.series(t, z.g, z.gKeys[z.nextGauge])
			z.nextGauge++
		}},
		{"remove", func(t *testing.T, z *gzTable) {
			for _, i := range []int{3, 1200} {
				if !z.g.Remove(uint64(i), &z.gKeys[i]) {
					t.Fatalf("gauge %d not removed", i)
				}
			}
		}},
		{"expire", func(t *testing.T, z *gzTable) {
			// Every gauge but a few looked up (stamped) at 5, and nothing
			// else: only the expiry changes their pages.
			for i, k := range z.gKeys {
				if i%100 != 10 && i != 3 && i != 1200 { // 3, 1200: removed
					if _, err := z.g.Series(uint64(i), &k, 5, nil); err != nil {
						t.Fatal(err)
					}
				}
			}
			z.series(t, z.c, z.cKeys[0])
			if n := z.tbl.Expire(5); n == 0 {
				t.Fatal("nothing expired")
			}
		}},
		{"created name taken", func(t *testing.T, z *gzTable) {
			// A gauge called c_created: the counters' _created lines go.
			f, err := z.tbl.Family("c_created", "", exposition.TypeGauge)
			if err != nil {
				t.Fatal(err)
			}
			z.series(t, f, z.key(0)).SetValue(1, 2)
		}},
	}
	twoProcs(t)
	for _, o := range []Options{{}, {Timestamps: true}, {GzipWorkers: 2}} {
		for _, limits := range [][2]int{{0, 0}, {1, 1}, {4096, 1 << 40}} {
			for i, q := range gzFormats {
				// The writer's cuts at every size in three formats (text,
				// OpenMetrics escaped, protobuf), without timestamps: a
				// lean suite under the race detector.
				if limits[0] != 0 && (o.Timestamps || i == 1 || i == 2) {
					continue
				}
				t.Run(fmt.Sprintf("%s/escaping %d/timestamps=%v/workers %d/flush %d big %d", q.Format, q.Escaping, o.Timestamps, o.GzipWorkers, limits[0], limits[1]), func(t *testing.T) {
					z := newGzTable(t, o)
					wr := &Writer{flushLimit: limits[0], bigLimit: limits[1]}
					scrapeBoth(t, z.tbl, wr, q)
					checkPipe(t, wr, o.GzipWorkers)
					scrapeBoth(t, z.tbl, wr, q)
					keeps := limits[0] == 0 && !q.Format.Spec().Body.Proto
					if keeps && wr.gz.spliced == 0 {
						t.Fatal("the second scrape spliced no kept page")
					}
					for _, c := range changes {
						c.change(t, z)
						scrapeBoth(t, z.tbl, wr, q)
						scrapeBoth(t, z.tbl, wr, q)
					}
				})
			}
		}
	}
}

// TestGzipSplicesWhatDidNotChange: a gzip scrape of an unchanged table
// splices every page the one before kept, and renders only a changed
// page again.
func TestGzipSplicesWhatDidNotChange(t *testing.T) {
	z := newGzTable(t, Options{})
	wr := &Writer{}
	q := Query{Format: exposition.FormatText004}
	scrapeBoth(t, z.tbl, wr, q)
	if wr.gz.spliced != 0 {
		t.Fatalf("the first scrape spliced %d pages", wr.gz.spliced)
	}
	scrapeBoth(t, z.tbl, wr, q)
	all := wr.gz.spliced
	// Every page but the big histogram's.
	want := 0
	for _, f := range []*Family{z.g, z.c, z.h, z.s} {
		want += len(f.appendPages(nil, &Query{}))
	}
	if all != want-1 {
		t.Fatalf("the second scrape spliced %d pages, want %d", all, want-1)
	}
	z.series(t, z.g, z.gKeys[0]).SetValue(5, 2)
	scrapeBoth(t, z.tbl, wr, q)
	if wr.gz.spliced != all-1 {
		t.Fatalf("after one gauge changed %d pages were spliced, want %d", wr.gz.spliced, all-1)
	}
	if kept := z.tbl.KeptBytes(); kept <= 0 {
		t.Fatalf("KeptBytes = %d after gzip scrapes", kept)
	}
}

// TestGzipKeptPagesAreBounded: scrapes in more formats than a page keeps
// renderings leave at most keptPerPage on each page, every scrape still
// exact.
func TestGzipKeptPagesAreBounded(t *testing.T) {
	z := newGzTable(t, Options{})
	wr := &Writer{}
	for range 2 {
		for _, e := range []exposition.Escaping{exposition.EscapeNone, exposition.EscapeUnderscores, exposition.EscapeDots, exposition.EscapeValues} {
			for _, f := range []exposition.Format{exposition.FormatText100, exposition.FormatOpenMetrics100} {
				scrapeBoth(t, z.tbl, wr, Query{Format: f, Escaping: e})
			}
		}
	}
	for _, f := range []*Family{z.g, z.c, z.h, z.s} {
		for _, p := range f.appendPages(nil, &Query{}) {
			if bound := keptPerPage; len(p.kept) > bound && (p.bucket != headBucket || len(p.kept) > keptPerHeadPage) {
				t.Fatalf("%s: a page keeps %d renderings, bound %d", f.name, len(p.kept), bound)
			}
		}
	}
}

// TestGzipShards: gzip shard scrapes, for shard counts that read buckets
// and for one that picks from every page, are their plain bodies, between
// whole scrapes that keep the same pages and after a change.
func TestGzipShards(t *testing.T) {
	z := newGzTable(t, Options{})
	wr := &Writer{}
	for round := range 3 {
		whole := scrapeBoth(t, z.tbl, wr, Query{})
		var total int64
		for _, n := range []uint64{2, 3, 4, 64} {
			var sum int64
			for i := range n {
				sum += sampleLines(string(scrapeBoth(t, z.tbl, wr, Query{Shard: i, Shards: n})))
			}
			if total == 0 {
				total = sum
			}
			if sum != total || sum != sampleLines(string(whole)) {
				t.Fatalf("round %d: %d shards hold %d lines, the whole scrape %d", round, n, sum, sampleLines(string(whole)))
			}
		}
		z.series(t, z.g, z.gKeys[round*500]).SetValue(float64(-round), 2)
		z.histogram(t, round*60, 5)
	}
}

// TestGzipShardsSpliceTheHead: a whole gzip scrape and the 4 shard scrapes
// of a Prometheus that splits its job, taking turns on an unchanged table,
// splice every page from the second round on: the head pages, which every
// shard scrape picks from, keep a rendering for each.
func TestGzipShardsSpliceTheHead(t *testing.T) {
	for _, workers := range []int{0, 2} {
		twoProcs(t)
		z := newGzTable(t, Options{GzipWorkers: workers})
		wr := &Writer{}
		for round := range 3 {
			for shard := range 5 {
				q := Query{Shard: uint64(shard), Shards: 4}
				if shard == 4 {
					q = Query{}
				}
				scrapeBoth(t, z.tbl, wr, q)
				if round > 0 && (wr.gz.compressed != 0 || wr.gz.spliced == 0) {
					t.Fatalf("workers %d, round %d, %+v: %d pages compressed anew, %d spliced", workers, round, q, wr.gz.compressed, wr.gz.spliced)
				}
			}
		}
		checkKeptBytes(t, z.tbl)
	}
}

// TestGzipHoldsWhatAnEarlierScrapeMust: a page kept by a scrape that began
// after a series' start time is not spliced into a scrape that began
// before it, which must leave that series out (Series.createdFor).
func TestGzipHoldsWhatAnEarlierScrapeMust(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("requests_total", "", exposition.TypeCounter)
	const base = int64(10_000e9)
	for i := range 10 {
		key := Key{Context: kong, Attrs: pcommon.NewMap()}
		key.Attrs.PutInt("i", int64(i))
		s, err := f.Series(uint64(i), &key, base, labelList{{Name: "route", Value: strconv.Itoa(i)}})
		if err != nil {
			t.Fatal(err)
		}
		start := base - 3600e9
		if i == 4 {
			start = base - 1 // created just before it was stored, at base
		}
		s.SetCounter(1, start, base)
	}
	wr := &Writer{}
	late := Query{Format: exposition.FormatOpenMetrics100, Began: base + 1e9}
	scrapeBoth(t, tbl, wr, late)
	scrapeBoth(t, tbl, wr, late)
	if wr.gz.spliced != 1 {
		t.Fatalf("the second scrape spliced %d pages, want the one", wr.gz.spliced)
	}
	early := Query{Format: exposition.FormatOpenMetrics100, Began: base - 1e9}
	body := scrapeBoth(t, tbl, wr, early)
	if strings.Contains(string(body), `route="4"`) || wr.held != 1 {
		t.Fatalf("a scrape that began before route 4 was created wrote it (held %d):\n%s", wr.held, body)
	}
	// The early scrape held a series: its rendering is not kept, and the
	// late one's still serves late scrapes.
	scrapeBoth(t, tbl, wr, late)
	if wr.gz.spliced != 1 {
		t.Fatalf("a late scrape after the early one spliced %d pages, want 1", wr.gz.spliced)
	}
}

// TestGzipUnderConcurrentUpdates: while every series is updated round
// after round, each gzip scrape decompresses (its CRC and size check out)
// and shows every series at least at the round completed before the
// scrape began, never a kept page from before it; once updates stop, gzip
// and plain bodies are the same.
func TestGzipUnderConcurrentUpdates(t *testing.T) {
	for _, workers := range []int{0, 2} {
		t.Run("workers "+strconv.Itoa(workers), func(t *testing.T) {
			twoProcs(t)
			gzipUnderConcurrentUpdates(t, workers)
		})
	}
}

func gzipUnderConcurrentUpdates(t *testing.T, workers int) {
	tbl, f, keys := healthFamily(t, 3000)
	tbl.opts.GzipWorkers = workers
	h, _ := tbl.Family("h", "", exposition.TypeHistogram)
	hs := make([]*Series, 300)
	for i := range hs {
		key := Key{Context: kong, Attrs: pcommon.NewMap()}
		key.Attrs.PutInt("i", int64(i))
		var err error
		if hs[i], err = h.Series(uint64(i), &key, 1, labelList{{Name: "route", Value: strconv.Itoa(i)}}); err != nil {
			t.Fatal(err)
		}
		hs[i].UpdateDist(1, distFill{n: 4, v: 0})
	}
	gauges := make([]*Series, len(keys))
	for i := range keys {
		gauges[i], _ = f.Series(uint64(i), &keys[i], 1, nil)
	}
	var completed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for round := int64(1); ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			for i, s := range gauges {
				s.SetValue(float64(round), 2)
				if i%10 == 0 {
					hs[i/10].UpdateDist(2, distFill{n: 4, v: uint64(round)})
				}
			}
			completed.Store(round)
		}
	})
	wr := &Writer{}
	var spliced int
	for scrape := 0; scrape < 40 || completed.Load() < 3; scrape++ {
		floor := completed.Load()
		var zipped bytes.Buffer
		if _, err := wr.WriteTo(context.Background(), tbl, &zipped, &Query{Gzip: true}); err != nil {
			t.Fatal(err)
		}
		spliced += wr.gz.spliced
		for line := range strings.SplitSeq(string(gunzip(t, zipped.Bytes())), "\n") {
			if line == "" || line[0] == '#' {
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if strings.HasPrefix(line, "h_bucket") || strings.HasPrefix(line, "h_count") || strings.HasPrefix(line, "h_sum") || !strings.HasPrefix(line, "h") {
				if v < float64(floor) {
					t.Fatalf("scrape %d, begun after round %d completed, shows %q: a page kept before it", scrape, floor, line)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	scrapeBoth(t, tbl, wr, Query{})
	scrapeBoth(t, tbl, wr, Query{})
	if wr.gz.spliced == 0 {
		t.Fatal("once updates stopped, nothing was spliced")
	}
	t.Logf("%d pages spliced during updates", spliced)
}

// gzOps applies the operations ops encodes to z, two bytes each (what,
// which), scraping with wr between them whenever an op says so and at the
// end, and fails unless every gzip body decompresses to the plain body of
// the same state. Scrapes vary the format, shards and ?name[]= filters, so
// pages are kept under one key and spliced (or not) under another.
func gzOps(t *testing.T, z *gzTable, wr *Writer, ops []byte) {
	t.Helper()
	queries := []Query{
		{},
		{Format: exposition.FormatOpenMetrics100, Escaping: exposition.EscapeNone},
		{Format: exposition.FormatText100, Escaping: exposition.EscapeDots},
		{Shard: 1, Shards: 4},
		{Shard: 2, Shards: 3},
		{Names: map[string]struct{}{"c_total": {}, "h": {}}},
		{Format: exposition.FormatOpenMetrics100, Names: map[string]struct{}{"g": {}}, Shard: 0, Shards: 2},
		{Format: exposition.FormatProtoDelim},
	}
	now := int64(10)
	for i := 0; i+1 < len(ops); i += 2 {
		what, which := int(ops[i]), int(ops[i+1])
		now++
		switch what % 10 {
		case 0:
			s := z.series(t, z.g, z.gKeys[which*7%len(z.gKeys)])
			s.SetValue(float64(what), now)
			if z.withTS {
				s.SetTimestamp(gzCreated + now)
			}
		case 1:
			z.series(t, z.c, z.cKeys[which%len(z.cKeys)]).SetCounter(float64(what), gzCreated+int64(which%3), now)
		case 2:
			z.series(t, z.h, z.hKeys[which%len(z.hKeys)]).UpdateHistogram(now, PointTimes{Created: gzCreated}, distFill{n: 5, v: uint64(what)}, nil)
		case 3:
			z.addGauge(t)
		case 4:
			k := which * 13 % len(z.gKeys)
			z.g.Remove(uint64(k), &z.gKeys[k])
		case 5:
			z.series(t, z.c, z.cKeys[which%len(z.cKeys)]).SetExemplars([]Exemplar{{TraceID: [16]byte{byte(what)}, Value: float64(which), Time: gzCreated + now}})
		case 6:
			if z.withTS && which%2 == 0 { // the timestamp alone
				z.series(t, z.g, z.gKeys[which*5%len(z.gKeys)]).SetTimestamp(gzCreated + now)
				continue
			}
			z.series(t, z.s, z.sKeys[which%len(z.sKeys)]).UpdateHistogram(now, PointTimes{Created: gzCreated}, distFill{n: 3, v: uint64(what), summary: true}, nil)
		case 7:
			// Expire what was not updated in the last which%64 ops.
			z.tbl.Expire(now - int64(which%64))
		default:
			scrapeBoth(t, z.tbl, wr, queries[which%len(queries)])
		}
	}
	for _, q := range queries {
		scrapeBoth(t, z.tbl, wr, q)
	}
}

// TestGzipRandomChanges: random changes of every kind (values, start
// times, histograms, summaries, exemplars, timestamps, inserts, removals,
// expiry) between gzip scrapes in every format, shard and name filter:
// each body is its plain body.
func TestGzipRandomChanges(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 28))
			ops := make([]byte, 600)
			for i := range ops {
				ops[i] = byte(rng.Uint32())
			}
			twoProcs(t)
			z := newGzTable(t, Options{Timestamps: seed%2 == 1, GzipWorkers: []int{0, 0, 2, 1}[seed]})
			wr := &Writer{}
			gzOps(t, z, wr, ops)
			if z.tbl.KeptBytes() <= 0 {
				t.Fatal("nothing kept")
			}
			checkKeptBytes(t, z.tbl)
		})
	}
}

// FuzzGzipSplice: any sequence of changes and scrapes (gzOps) gives gzip
// bodies that are their plain bodies.
//
//	go test -run '^$' -fuzz FuzzGzipSplice -fuzztime 1m ./exporter/promstreamexporter/internal/series
func FuzzGzipSplice(f *testing.F) {
	f.Add([]byte{8, 0, 8, 0, 0, 1, 8, 0}, false)
	f.Add([]byte{8, 3, 4, 1, 8, 3, 7, 0, 8, 3, 3, 0, 8, 4}, true)
	f.Add([]byte{8, 1, 5, 2, 8, 1, 1, 2, 8, 1, 2, 150, 8, 1}, false)
	f.Add([]byte{8, 0, 8, 0, 0, 1, 8, 0, 2, 7, 8, 3}, true)
	f.Fuzz(func(t *testing.T, ops []byte, ts bool) {
		if len(ops) > 400 {
			ops = ops[:400]
		}
		// The pipeline (gzippipe.go) for bodies whose ops length is odd.
		twoProcs(t)
		z := newGzTable(t, Options{Timestamps: ts, GzipWorkers: len(ops) % 2 * 2})
		gzOps(t, z, &Writer{}, ops)
		checkKeptBytes(t, z.tbl)
	})
}

// checkKeptBytes fails unless the table's count of kept bytes is what its
// pages hold.
func checkKeptBytes(t *testing.T, tbl *Table) {
	t.Helper()
	var n int64
	for _, f := range tbl.families {
		for _, p := range f.appendPages(nil, &Query{}) {
			for i := range p.kept {
				n += int64(cap(p.kept[i].z)) + int64(keptPageSize)
			}
		}
	}
	if got := tbl.KeptBytes(); got != n {
		t.Fatalf("KeptBytes = %d, the pages hold %d", got, n)
	}
}

// TestGzipKeptBytesBound: with Options.MaxKeptBytes the kept renderings
// stay within it, bodies are still exact, and pages that cannot be kept are
// compressed anew; pages that leave (removal, expiry) free theirs.
func TestGzipKeptBytesBound(t *testing.T) {
	z := newGzTable(t, Options{})
	scrapeBoth(t, z.tbl, &Writer{}, Query{})
	all := z.tbl.KeptBytes()
	checkKeptBytes(t, z.tbl)
	for _, bound := range []int64{1, all / 3} {
		z := newGzTable(t, Options{MaxKeptBytes: bound})
		wr := &Writer{}
		for _, q := range gzFormats {
			scrapeBoth(t, z.tbl, wr, q)
			scrapeBoth(t, z.tbl, wr, q)
			if got := z.tbl.KeptBytes(); got > bound {
				t.Fatalf("bound %d: %d bytes kept", bound, got)
			}
			checkKeptBytes(t, z.tbl)
		}
		if bound == 1 && wr.gz.spliced != 0 {
			t.Fatalf("bound 1: %d pages spliced", wr.gz.spliced)
		}
		if bound > 1 && z.tbl.KeptBytes() == 0 {
			t.Fatalf("bound %d: nothing kept", bound)
		}
	}
	// Half the gauges removed, then everything but the counters (stamped
	// far ahead) expired: their pages leave, with their kept bytes.
	for i, k := range z.gKeys {
		if i%2 == 0 {
			z.g.Remove(uint64(i), &k)
		}
	}
	z.series(t, z.c, z.cKeys[0])
	z.tbl.Expire(2)
	checkKeptBytes(t, z.tbl)
	if got := z.tbl.KeptBytes(); got >= all {
		t.Fatalf("after every gauge left, %d bytes kept, %d before", got, all)
	}
	scrapeBoth(t, z.tbl, &Writer{}, Query{})
}
