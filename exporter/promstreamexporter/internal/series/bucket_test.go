package series

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// TestShardScrapeReadsOnlyItsBuckets: for every N dividing NumBuckets, the
// pages a shard scrape reads beyond the head hold only that shard's series,
// and the shards' pages together hold every bucketed series once. For
// other N, a shard scrape reads every page (and picks by the hash column).
func TestShardScrapeReadsOnlyItsBuckets(t *testing.T) {
	_, f, _ := healthFamily(t, 6000)
	inBuckets := 0
	for _, p := range f.appendPages(nil, &Query{}) {
		if p.bucket != headBucket {
			inBuckets += len(p.series)
		}
	}
	if head := 6000 - inBuckets; head != headPages*PageSize {
		t.Fatalf("head holds %d series, want %d", head, headPages*PageSize)
	}
	for _, n := range []uint64{2, 4, 8, 16, 32, 64} {
		seen := 0
		for i := range n {
			for _, p := range f.appendPages(nil, &Query{Shard: i, Shards: n}) {
				if p.bucket == headBucket {
					continue
				}
				for j, h := range p.hashes {
					if h%n != i || p.series[j].page != p {
						t.Fatalf("shard %d/%d reads bucket %d, holding a series of shard %d", i, n, p.bucket, h%n)
					}
				}
				seen += len(p.series)
			}
		}
		if seen != inBuckets {
			t.Fatalf("%d shards read %d bucketed series, want %d", n, seen, inBuckets)
		}
	}
	all := len(f.appendPages(nil, &Query{}))
	for _, n := range []uint64{3, 128} {
		if got := len(f.appendPages(nil, &Query{Shard: 1, Shards: n})); got != all {
			t.Fatalf("shards=%d reads %d pages, want all %d", n, got, all)
		}
	}
}

// TestWholeScrapeOrderBeyondTheHead: the head is written in insertion
// order, then bucket 0, 1, ... each in insertion order; a removal keeps
// the order of the rest.
func TestWholeScrapeOrderBeyondTheHead(t *testing.T) {
	const n = headPages*PageSize + 700
	tbl, f, keys := healthFamily(t, n)
	for _, i := range []int{3, headPages * PageSize, n - 1} {
		if !f.Remove(uint64(i), &keys[i]) {
			t.Fatalf("series %d not found", i)
		}
	}
	var lines []string
	for line := range strings.SplitSeq(render(t, tbl), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			lines = append(lines, line)
		}
	}
	if len(lines) != n-3 {
		t.Fatalf("%d lines, want %d", len(lines), n-3)
	}
	// target i's address is 10.0.<i/250>.<i%250>: recover i from the line.
	index := func(line string) int {
		a := line[strings.Index(line, `address="10.0.`)+len(`address="10.0.`):]
		var hi, lo int
		for _, c := range a[:strings.IndexByte(a, '.')] {
			hi = hi*10 + int(c-'0')
		}
		a = a[strings.IndexByte(a, '.')+1:]
		for _, c := range a[:strings.IndexByte(a, ':')] {
			lo = lo*10 + int(c-'0')
		}
		return hi*250 + lo
	}
	prevI, prevB := -1, -1
	for k, line := range lines {
		i := index(line)
		labels := line[strings.IndexByte(line, '{')+1 : strings.LastIndexByte(line, '}')]
		b := int(xxhash.Sum64String(labels) % NumBuckets)
		if k < headPages*PageSize-1 { // the head, one of its series removed
			b = -1
		}
		if b < prevB || (b == prevB && i <= prevI) {
			t.Fatalf("line %d (series %d, bucket %d) after series %d of bucket %d", k, i, b, prevI, prevB)
		}
		prevI, prevB = i, b
	}
}

type fillBounds []float64

func (b fillBounds) Fill(d *Dist) {
	d.Bounds = b
	d.Counts = resizeCounts(d.Counts, len(b))
	d.Count = 1
}

// TestSharedBoundTexts: series whose bounds equal the family's first ones
// share its le texts; others (-0 is not 0) keep their own.
func TestSharedBoundTexts(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("h", "", exposition.TypeHistogram)
	for i, b := range []fillBounds{{0, 1}, {0, 1}, {math.Copysign(0, -1), 2}} {
		k := Key{Context: kong, Attrs: pcommon.NewMap()}
		k.Attrs.PutInt("i", int64(i))
		s, _ := f.Series(uint64(i), &k, 1, labelList{{Name: "i", Value: strconv.Itoa(i)}})
		s.UpdateDist(1, b)
	}
	var les []string
	for line := range strings.SplitSeq(render(t, tbl), "\n") {
		if strings.HasPrefix(line, "h_bucket") {
			les = append(les, line[strings.Index(line, "le="):strings.IndexByte(line, '}')])
		}
	}
	want := `le="0.0" le="1.0" le="+Inf" le="0.0" le="1.0" le="+Inf" le="-0.0" le="2.0" le="+Inf"`
	if got := strings.Join(les, " "); got != want {
		t.Fatalf("le texts:\n%s\nwant:\n%s", got, want)
	}
}

// fillSeq fills a histogram with n bounds (1, 2, ...) and counts seed,
// seed+1, ...
type fillSeq struct{ n, seed int }

func (f fillSeq) Fill(d *Dist) {
	d.Bounds = make([]float64, f.n)
	for i := range d.Bounds {
		d.Bounds[i] = float64(i + 1)
	}
	d.Counts = resizeCounts(d.Counts, f.n)
	for i := range d.Counts {
		d.Counts[i] = uint64(f.seed + i)
	}
	d.Count = uint64(f.seed + f.n)
}

// TestBucketHistogramCounts: histograms beyond the head get room for their
// family's bounds from their bucket's counts arena; one with more bounds
// (or other bounds) than that room grows its own, never into a
// neighbour's, and every series renders its own counts.
func TestBucketHistogramCounts(t *testing.T) {
	tbl := New(Options{})
	f, _ := tbl.Family("h", "", exposition.TypeHistogram)
	const n = headPages*distPageSize + 2000
	want := make(map[string]fillSeq, n)
	var all []*Series
	for i := range n {
		k := Key{Context: kong, Attrs: pcommon.NewMap()}
		k.Attrs.PutInt("i", int64(i))
		s, err := f.Series(uint64(i), &k, 1, labelList{{Name: "i", Value: strconv.Itoa(i)}})
		if err != nil {
			t.Fatal(err)
		}
		fill := fillSeq{n: 3, seed: i * 100}
		if i%7 == 3 {
			fill.n = maxInline + 5 // more than any room given
		}
		s.UpdateDist(1, fill)
		want[`i="`+strconv.Itoa(i)+`"`] = fill
		all = append(all, s)
		if i == 0 {
			render(t, tbl) // the family's bounds are known from here on
		}
	}
	for i, s := range all { // a second update: written in place
		fill := want[s.labels()]
		if s.page.bucket != headBucket && fill.n == 3 && cap(s.dist.Counts) != 3 {
			t.Fatalf("series %d: room for %d counts, want its family's 3", i, cap(s.dist.Counts))
		}
		fill.seed++
		s.UpdateDist(2, fill)
		want[s.labels()] = fill
	}
	got := make(map[string][]string, n)
	for line := range strings.SplitSeq(render(t, tbl), "\n") {
		if !strings.HasPrefix(line, "h_bucket{") {
			continue
		}
		labels := line[len("h_bucket{"):strings.Index(line, `,le=`)]
		got[labels] = append(got[labels], line[strings.LastIndexByte(line, ' ')+1:])
	}
	if len(got) != n {
		t.Fatalf("%d histograms rendered, want %d", len(got), n)
	}
	for labels, fill := range want {
		var w []string
		for j := range fill.n {
			w = append(w, strconv.Itoa(fill.seed+j))
		}
		w = append(w, strconv.Itoa(fill.seed+fill.n))
		if g := strings.Join(got[labels], " "); g != strings.Join(w, " ") {
			t.Fatalf("%s: counts %s, want %s", labels, g, strings.Join(w, " "))
		}
	}
}

// TestSeriesSizes: what every series pays. A Series of 112 bytes fills its
// size class (a head series is allocated on its own), a bucket's histogram
// (distSeries) is 192 bytes; a field more costs every one of them (see
// TestMemoryPerSeries in the exporter for the whole cost).
func TestSeriesSizes(t *testing.T) {
	if s, d := unsafe.Sizeof(Series{}), unsafe.Sizeof(distSeries{}); s > 112 || d > 192 {
		t.Fatalf("Series is %d bytes, distSeries %d; want at most 112 and 192", s, d)
	}
}

// TestFamiliesShareLabelText: a series whose labels equal those of its
// sibling's series for the same key (the family created before, a request
// counter before its duration histogram) takes that label text instead of a
// copy, in the head and in the buckets alike; a series with other labels
// keeps its own, and every series renders with exactly its labels.
func TestFamiliesShareLabelText(t *testing.T) {
	tbl := New(Options{})
	req, _ := tbl.Family("req", "", exposition.TypeCounter)
	dur, _ := tbl.Family("dur", "", exposition.TypeHistogram)
	size, _ := tbl.Family("size", "", exposition.TypeCounter)
	const n = 2000 // past the head pages of both kinds
	shared, own := 0, 0
	for i := range n {
		k := Key{Context: kong, Attrs: pcommon.NewMap()}
		route := "/r/" + strconv.Itoa(i)
		k.Attrs.PutStr("route", route)
		labels := labelList{{Name: "job", Value: "kong"}, {Name: "route", Value: route}}
		r, _ := req.Series(uint64(i), &k, 1, labels)
		r.SetValue(1, 1)
		d, _ := dur.Series(uint64(i), &k, 1, labels)
		d.UpdateDist(1, fillBounds{1})
		s, _ := size.Series(uint64(i), &k, 1, append(labels, exposition.Label{Name: "dir", Value: "in"}))
		s.SetValue(1, 1)
		if unsafe.StringData(d.labels()) == unsafe.StringData(r.labels()) {
			shared++
		}
		if unsafe.StringData(s.labels()) != unsafe.StringData(d.labels()) {
			own++
		}
	}
	if shared != n || own != n {
		t.Errorf("%d of %d histogram series share their counter's label text (want all); %d of %d with other labels have their own (want all)", shared, n, own, n)
	}
	out := render(t, tbl)
	for _, want := range []string{`req{job="kong",route="/r/1999"} 1`, `dur_count{job="kong",route="/r/1999"} 1`, `size{dir="in",job="kong",route="/r/1999"} 1`} {
		if !strings.Contains(out, want+"\n") && !strings.Contains(out, want+" ") {
			t.Errorf("exposition lacks %s", want)
		}
	}
}
