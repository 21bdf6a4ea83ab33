// Package series is the exporter's series table: Prometheus families in a
// stable order, each family's series in fixed-size pages, every series with
// its label pairs rendered once, at insert.
//
// Layout and ordering: families are written in the order they were first
// seen. A family's first series fill its head, headPages pages (1,024
// gauges or counters, 128 histograms or summaries) written in insertion
// order; once the head is full, new series go to one of NumBuckets shard
// buckets by their shard hash, written after the head, bucket by bucket,
// each in insertion order (bucket.go says why). So a family that never
// outgrew its head is written exactly in insertion order, as the golden
// expositions and the gateways' parity tests expect; every family is
// written in the same order from scrape to scrape. The text formats do not
// require sorting, and sorting per scrape is what makes other exporters
// slow. Removal keeps the order of what remains.
//
// Removal costs one page, whatever the family's size: a series knows its
// page and its index entries (each with its hash), so removing it replaces
// those entries' index slots with tombstones and deletes it from its page (a
// copy of at most PageSize pointers); a page left empty leaves the page
// list. Nothing is rebuilt.
//
// Locking, from outside in:
//   - Table.mu (RWMutex) guards the family list and the names families claim;
//     a scrape holds it only to copy the list.
//   - Family.mu serialises the family's writers: inserts, Remove (for one
//     series), Expire (for one page's stale series, which it finds under
//     the page lock alone), and the page list and indexes they change; a
//     scrape holds it only to copy the page list.
//   - An update of an existing series takes no family lock: the key index
//     (index) is read lock-free, so Remove, Expire and inserts never stall
//     it (issue 11). A series leaving its family is flagged gone first; a
//     lookup that finds a gone series retries under Family.mu.
//   - page.mu guards one page's series slice and the distributions
//     (histogram and summary values) of its series; a scrape holds it while
//     it renders that page into its own buffer, never while it writes to the
//     connection: when the buffer passes flushAt mid-page, or a series is
//     big, it releases the lock first (stream.go). An update of a
//     distribution or an insert waits for at most one page's render (at
//     most flushAt of it), or one page's removals.
//
// Scalar values are atomics: updating a gauge or counter never waits.
//
// Hashes, and their contracts:
//   - the hash a caller passes to find a series is internal/identity's:
//     hash/maphash under a per-process seed, for this process's lookups
//     only; never stored, sent or compared across processes. So is the
//     xxhash of a series' canonical labels that a family indexes to find
//     two attribute orders of one label set (in memory only);
//   - the hash ?shard= selects on (Query.Shard) is xxhash (cespare/xxhash/v2,
//     XXH64 with seed 0) of the series' labels rendered in canonical form:
//     sorted by name, names escaped with underscores, values escaped, empty
//     values left out unless Options.KeepEmptyLabels (`a="x",b="y"`, no
//     braces). It must be stable, so that collectors and restarts agree on
//     which shard a series belongs to, and it is: it depends on the label
//     set alone, never on the order attributes arrived in (with
//     Options.Unsorted the written rendering follows that order, but the
//     shard hash is still taken over the sorted one) nor on anything of the
//     process. With sorted labels (the default) it is the hash of exactly
//     the label block a scrape writes.
//
// Shards: the shard hash is computed once, when a series is created, and
// kept in its page beside the series pointer (page.hashes, a column parallel
// to page.series), and it picks the series' bucket once the head is full. A
// shard scrape (?shard=I&shards=N) writes exactly the series whose
// hash % N == I, for every N. When N divides NumBuckets (powers of two up
// to 64) it reads the head through the hash column and only its own
// buckets, whose series, labels and distributions were allocated together
// (bucket.go), so it costs about its share of a whole scrape (0.25 to 0.3
// for one of 4 shards; BenchmarkShardScrape). For any other N it visits
// every page, reading each series' 8-byte hash from the column and touching
// the Series only when it is in the shard (Writer.pageSeries): exact, but
// about 0.45 of a whole scrape for N = 4, the cost of a shard's series
// scattered among the others'.

package series // import "github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/series"

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// PageSize is the number of gauge or counter series per page: small enough
// that a page renders in microseconds (the longest an insert can wait),
// large enough that locking costs nothing next to rendering. Histogram and
// summary series write a dozen lines or more each, so their pages hold
// distPageSize: about as many lines per page, and a render buffer that never
// has to grow past a few hundred KiB.
const (
	PageSize     = 256
	distPageSize = 32
)

var (
	// ErrTypeConflict: the family name is in use with another type, or one of
	// the sample names the family would write is already written by another
	// family. Writing both would make an invalid exposition.
	ErrTypeConflict = errors.New("name already in use by a family of another type")
	// ErrLimit: the table holds max_series series already.
	ErrLimit = errors.New("series limit reached")
)

// Context is the part of a series' labels shared by all points of one
// resource and scope (job, instance, scope labels, constant labels). The
// exporter interns contexts, so comparing two keys' contexts is a pointer
// comparison. Immutable once created.
type Context struct {
	Labels []exposition.Label
}

// Key identifies a series inside its family: its context and the data
// point's attributes. A Key passed to the table is borrowed; the table keeps
// a packed copy of the attributes.
type Key struct {
	Context *Context
	Attrs   pcommon.Map
}

// Dist holds the values of a histogram or summary series. It is read and
// written only under its page's lock, so _bucket, _sum and _count always come
// from one consistent snapshot (with the start time and timestamp, which
// UpdateHistogram stores in the Series under the same lock).
//
// Memory: 80 bytes. Every histogram series has one, so what only some need
// (a summary's values, an exponential histogram's native form, the texts of
// bounds that are not the family's) hangs off rare, allocated by the first
// distribution that needs it.
type Dist struct {
	Count  uint64
	Sum    float64
	HasSum bool
	// Bounds are a histogram's upper bounds (ascending, without +Inf) or a
	// summary's quantiles (ascending). Callers replace the slice when the
	// bounds change; never mutate it in place.
	Bounds []float64
	// Counts are a histogram's cumulative bucket counts, one per bound.
	Counts []uint64

	rare *distRare
}

// distRare holds the fields of a Dist that most distributions never need.
type distRare struct {
	// values are a summary's quantile values, one per bound.
	values []float64
	// native is set for exponential histograms: the protobuf format writes
	// them as native histograms (besides the classic buckets).
	native *Native
	// own holds the texts of Bounds that are not the family's (boundsFor),
	// built on first use; ownOf is the &Bounds[0] they were built from.
	own   *boundTexts
	ownOf *float64
}

// rareFields returns d.rare, allocating it on first use.
func (d *Dist) rareFields() *distRare {
	if d.rare == nil {
		d.rare = new(distRare)
	}
	return d.rare
}

// Values returns a summary's quantile values, one per bound (nil for a
// histogram).
func (d *Dist) Values() []float64 {
	if d.rare == nil {
		return nil
	}
	return d.rare.values
}

// ResizeValues makes the summary's values n long, reusing their array when
// it is large enough, and returns them for the caller to fill.
func (d *Dist) ResizeValues(n int) []float64 {
	r := d.rareFields()
	if cap(r.values) >= n {
		r.values = r.values[:n]
	} else {
		r.values = make([]float64, n)
	}
	return r.values
}

// Native returns the native form of an exponential histogram; nil for
// others.
func (d *Dist) Native() *Native {
	if d.rare == nil {
		return nil
	}
	return d.rare.native
}

// SetNative sets (or, with nil, clears) the native form of an exponential
// histogram: the protobuf format writes it as a native histogram.
func (d *Dist) SetNative(n *Native) {
	if n == nil && d.rare == nil {
		return
	}
	d.rareFields().native = n
}

// noBounds are the texts of no bounds. Never written.
var noBounds boundTexts

// ownTexts returns the texts of the Dist's own bounds, rendering them again
// only when the bounds changed (identity of the slice).
func (d *Dist) ownTexts(short bool) *boundTexts {
	if len(d.Bounds) == 0 {
		return &noBounds // a scrape must not allocate per series
	}
	r := d.rareFields()
	if r.own == nil || r.ownOf != &d.Bounds[0] || len(r.own.bounds) != len(d.Bounds) {
		r.own, r.ownOf = newBoundTexts(d.Bounds, short), &d.Bounds[0]
	}
	return r.own
}

// Series is one exposed time series (one sample line, or the lines of one
// histogram or summary).
//
// Memory: a counter series costs this struct (112 bytes, its first key's
// index entry included), its rendered label pairs and packed attributes
// (texts), and an index slot; a histogram's values hang off dist,
// everything rarer off extra.
//
// What a scrape reads (labels, bits, extra) comes first, so it shares a
// cache line or two with nothing else. gone is among it (it fills ln's
// 8 bytes): an update, which reads it, reads or writes bits or dist there
// anyway.
type Series struct {
	// lp and ln are the series' label pairs, escaped with underscores, no
	// braces (labels): a pointer and a 32-bit length beside gone, 8 bytes
	// less than a string header. A scrape reads them for every series, so
	// they are not a text (whose length would be decoded each time).
	lp *byte
	ln uint32 // a series' labels come from a request, far below 4 GiB
	// gone is set when the series leaves its family (Remove, Expire): a
	// lookup that found it in the index without the family lock checks it
	// after stamping updated (see Family.Series).
	gone atomic.Bool
	bits atomic.Uint64
	// created is a counter's, histogram's or summary's start time (unix
	// nanoseconds; 0: unknown), written as OpenMetrics' _created and
	// protobuf's created_timestamp; negated when the start was after the
	// moment its point was stored (a source whose clock runs ahead), which
	// createdFor never holds back. A histogram's or summary's is written
	// under page.mu with its Dist (UpdateHistogram), so that a scrape
	// reads the two together; a counter's is written lock-free.
	created atomic.Int64
	// ts is the point timestamp (unix nanoseconds; 0: unknown), written
	// with Options.Timestamps; a histogram's or summary's is written as
	// created is.
	ts atomic.Int64
	// dist holds a histogram's or summary's values (guarded by page.mu);
	// nil for a gauge or counter. A field of its own rather than one of
	// extra's: every histogram has one, and extra's other fields are rare,
	// so a histogram needs no seriesExtra (104 bytes).
	dist  *Dist
	extra *seriesExtra
	// ex holds the series' latest exemplars (exemplar.go); nil until its
	// first. Guarded by page.mu.
	ex      *exemplars
	page    *page // in the head or its bucket (bucket.go)
	updated atomic.Int64
	first   entry // the index entry of the series' first key
}

// labels returns the series' label pairs (lp, ln), sharing their bytes:
// they are never written once the series has them (a bucket's arena only
// grows past them), so the string is immutable, as Go requires.
func (s *Series) labels() string { return unsafe.String(s.lp, s.ln) }

// setLabels makes labels the series' label pairs; the caller gives up
// labels' bytes, which must never be written again.
func (s *Series) setLabels(labels string) {
	if uint64(len(labels)) > math.MaxUint32 {
		panic("series: labels longer than 4 GiB") // never from a request
	}
	s.lp, s.ln = unsafe.StringData(labels), uint32(len(labels))
}

// removed reports whether the series left its family.
func (s *Series) removed() bool { return s.gone.Load() }

// seriesExtra holds what most series never need.
type seriesExtra struct {
	// utf8 and list exist only for series with a name outside the legacy
	// grammar (possible with the NoUTF8Escaping translation strategies):
	// utf8 is the allow-utf-8 rendering, list renders the other schemes.
	utf8 string
	list []exposition.Label
	// proto and protoUTF8 cache the LabelPair encoding, built on the first
	// protobuf scrape (guarded by page.mu).
	proto, protoUTF8 text
	// canonical is the sorted rendering that identifies a series whose
	// labels are written in their source's order (Options.Unsorted), when it
	// differs from the written one.
	canonical string
	// escapedID is the series' identity under underscore escaping (its
	// labels resolved, sorted by written name: Series.identity), when it
	// differs from labels(); only for series with UTF-8 names.
	escapedID string
}

func (s *Series) utf8() string {
	if s.extra == nil {
		return ""
	}
	return s.extra.utf8
}

// SetValue stores the value of a gauge or counter series.
func (s *Series) SetValue(v float64, now int64) {
	s.bits.Store(math.Float64bits(v))
	s.page.touch()
	s.updated.Store(now)
}

// SetCounter stores the value of a counter series and its start time
// (unix nanoseconds; 0: unknown). A scrape racing a restart may pair the
// new value with the old start time or the reverse, for that one scrape:
// either way the value went down, which Prometheus reads as a reset.
func (s *Series) SetCounter(v float64, created, now int64) {
	s.setCreated(created, now)
	s.bits.Store(math.Float64bits(v))
	s.page.touch()
	s.updated.Store(now)
}

// setCreated keeps a point's start time (stored at now) as the series'
// created time. Only a change is written: an atomic store is a locked
// instruction, and a stream's start time does not change.
func (s *Series) setCreated(start, now int64) {
	switch {
	case start < 0:
		start = 0 // no time at all: unknown
	case start > now:
		start = -start // ahead of this clock: see created
	}
	if s.created.Load() != start {
		s.created.Store(start)
	}
}

// createdFor returns the created time a scrape (q) writes for s, and false
// when the scrape must leave s out: it began before s's created time, so
// the sample Prometheus takes from it is dated before that. With
// created-timestamp zero ingestion Prometheus then skips the zero sample at
// that scrape and adds it at the next one, after the sample it took: a
// reset that never happened. That is a scrape in flight when a series is
// stored whose start is the moment of its flush (the first window after a
// restart without storage); left out once, the series is written by the
// next scrape. A created time ahead of the clock (setCreated) is written as
// given. A query without Began (tests, direct writers) writes every series.
// (Prometheus dates a scrape when it sends it, a little before it reaches
// us; within that little, and the hosts' clock skew, the order is not
// known.)
func (s *Series) createdFor(q *Query) (int64, bool) {
	c := s.created.Load()
	if c < 0 {
		return -c, true
	}
	if q.Began != 0 && c > q.Began {
		return 0, false
	}
	return c, true
}

// SetTimestamp stores the point timestamp of a gauge or counter series
// (unix nanoseconds; 0: unknown), written with Options.Timestamps. A scrape
// racing an update may pair the new value with the previous timestamp, for
// that one scrape.
func (s *Series) SetTimestamp(unixNano int64) {
	s.ts.Store(unixNano)
	s.page.touch()
}

// DistFiller writes a distribution's new values. An interface rather than a
// closure, so updating a histogram allocates nothing.
type DistFiller interface {
	Fill(*Dist)
}

// PointTimes are a distribution point's start time (written as
// OpenMetrics' _created and protobuf's created_timestamp) and timestamp
// (written with Options.Timestamps, so a caller without it may pass 0), in
// unix nanoseconds; 0: unknown.
type PointTimes struct {
	Created, Timestamp int64
}

// UpdateDist has fill write the series' distribution under its page lock, so
// a scrape never sees a half-written histogram. Its times are unknown.
func (s *Series) UpdateDist(now int64, fill DistFiller) {
	s.UpdateHistogram(now, PointTimes{}, fill, nil)
}

// UpdateHistogram is UpdateDist for a point with times t, whose exemplars
// ex each replace the one held for the bucket its value falls in, all
// under the same lock. The times are kept in the Series (created, ts),
// which a histogram's values do not use, rather than in every Dist.
func (s *Series) UpdateHistogram(now int64, t PointTimes, fill DistFiller, ex []Exemplar) {
	s.page.mu.Lock()
	if s.dist == nil {
		s.dist = new(Dist) // a head series' (a bucket's comes with its own)
	}
	fill.Fill(s.dist)
	// Stored only when they change: an atomic store is a locked
	// instruction, and a stream's start time (and its timestamp without
	// send_timestamps, which callers then pass as 0) does not change.
	// Under the page lock, no other writer can come between.
	s.setCreated(t.Created, now)
	if s.ts.Load() != t.Timestamp {
		s.ts.Store(t.Timestamp)
	}
	s.histogramExemplars(s.dist, ex)
	s.page.touch()
	s.page.mu.Unlock()
	s.updated.Store(now)
}

// Table holds every family the exporter serves.
type Table struct {
	mu       sync.RWMutex
	families []*Family
	byName   map[string]*Family
	// claimed maps, per escaping scheme, every sample name a family writes
	// under it (x, x_total, x_bucket, x_sum, x_count) to that family, so
	// two families never write one name in one exposition. Under
	// EscapeNone these are the families' own names.
	claimed [exposition.NumEscapings]map[string]*Family
	// createdBy maps, per escaping scheme, the _created name of every
	// counter, histogram and summary family to it. It is not claimed (a
	// gauge may be called x_created, as before created lines existed); when
	// another family writes that name, the family leaves its _created lines
	// out under that scheme.
	createdBy [exposition.NumEscapings]map[string]*Family
	// omCounter maps, per escaping scheme, the OpenMetrics family name x of
	// every counter family x_total to it, with Options.ExactCounterNames
	// only (nil otherwise): such a counter does not claim x, so when
	// another family writes x, the counter is written unknown in
	// OpenMetrics (Family.omUnknown).
	omCounter [exposition.NumEscapings]map[string]*Family
	count     atomic.Int64
	max       int64
	opts      Options
	// gzipScrapes counts gzip scrapes: which of a page's kept renderings
	// was spliced least recently (gzip.go).
	gzipScrapes atomic.Uint64
	// keptBytes is what the pages' kept renderings hold (gzip.go),
	// bounded by opts.MaxKeptBytes.
	keptBytes atomic.Int64
}

// Options shape a table's rendering; the zero value is the default.
type Options struct {
	// MaxSeries bounds the series held (0: no limit).
	MaxSeries int64
	// KeepEmptyLabels writes labels whose value is empty (`consumer=""`)
	// instead of leaving them out.
	KeepEmptyLabels bool
	// Unsorted says label lists come in their sources' order rather than
	// sorted by name: the table then compares series by their labels in
	// sorted order, so one label set is one series whatever its order.
	Unsorted bool
	// ShortestBounds writes le and quantile in the text formats the way
	// client_golang and the gateways' own exporters do ("5", "0.25"),
	// instead of OpenMetrics' canonical "5.0". OpenMetrics always gets the
	// canonical form.
	ShortestBounds bool
	// Timestamps writes each sample's point timestamp (SetTimestamp,
	// PointTimes.Timestamp) after its value: milliseconds in the Prometheus text
	// formats and protobuf (timestamp_ms), seconds in OpenMetrics. Samples
	// without one (0) are written without.
	Timestamps bool
	// ExactCounterNames makes a counter's name its only name: a counter
	// x_total does not claim x, the family name OpenMetrics gives it, so a
	// counter (or any family) x and a counter x_total are two families, as
	// Envoy's /stats/prometheus writes envoy_cluster_upstream_rq and
	// envoy_cluster_upstream_rq_total. The Prometheus text formats and
	// protobuf write both as they are. In OpenMetrics, where the two would
	// share the family name x, the counter x_total is written as what it
	// then is, an unknown family of its own name (`# TYPE x_total
	// unknown`, no _created line, no exemplar): the exposition stays
	// valid, every sample is kept. Without it (the default), a counter
	// x_total and a family x refuse each other (ErrTypeConflict) in every
	// format.
	ExactCounterNames bool
	// MaxKeptBytes bounds the memory of the compressed pages gzip scrapes
	// keep to splice into the next one (gzip.go): past it, pages are
	// compressed anew on every gzip scrape. 0: no limit.
	MaxKeptBytes int64
	// GzipWorkers is how many goroutines compress a gzip scrape's pages
	// while its own goroutine renders the next ones (gzippipe.go), at most
	// GOMAXPROCS − 1. 0: the scrape's goroutine compresses.
	GzipWorkers int
}

// New returns an empty table.
func New(o Options) *Table {
	t := &Table{byName: make(map[string]*Family), max: o.MaxSeries, opts: o}
	for e := range exposition.NumEscapings {
		t.claimed[e], t.createdBy[e] = make(map[string]*Family), make(map[string]*Family)
		if o.ExactCounterNames {
			t.omCounter[e] = make(map[string]*Family)
		}
	}
	return t
}

// Len returns the number of series in the table.
func (t *Table) Len() int64 { return t.count.Load() }

// Families returns the number of families.
func (t *Table) Families() int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return int64(len(t.families))
}

// Family returns the family called name, creating it with help and typ if it
// does not exist. It returns ErrTypeConflict if name exists with another type
// or collides with a sample name of another family.
func (t *Table) Family(name, help string, typ exposition.Type) (*Family, error) {
	t.mu.RLock()
	f := t.byName[name]
	t.mu.RUnlock()
	if f == nil {
		var err error
		if f, err = t.create(name, help, typ); err != nil {
			return nil, err
		}
	}
	if f.typ != typ {
		return nil, ErrTypeConflict
	}
	return f, nil
}

func (t *Table) create(name, help string, typ exposition.Type) (*Family, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// Re-check: another writer may have created it between the locks.
	if f := t.byName[name]; f != nil {
		return f, nil
	}
	f := newFamily(t, name, help, typ)
	// A name another family writes refuses the family: its own names
	// (EscapeNone) are what a type conflict is. Under a scheme that escapes
	// names, two distinct names may escape alike (UTF-8 names under the
	// NoUTF8Escaping strategies: "a.b" and "a_b" under underscores): the
	// family created first is written, the other is left out of scrapes
	// that ask for that scheme (hidden).
	for _, n := range f.sampleNames() {
		if t.claimed[exposition.EscapeNone][n] != nil {
			return nil, ErrTypeConflict
		}
	}
	for e := range exposition.NumEscapings {
		claims := f.writtenNames(e)
		if e != exposition.EscapeNone && slices.ContainsFunc(claims, func(n string) bool { return t.claimed[e][n] != nil }) {
			f.hidden |= 1 << e
			continue
		}
		for _, n := range claims {
			t.claimed[e][n] = f
			if g := t.createdBy[e][n]; g != nil {
				g.noCreated.Or(1 << e)
			}
		}
		if c := createdNameOf(f.escapedName(e), typ); c != "" {
			if t.claimed[e][c] != nil {
				f.noCreated.Or(1 << e)
			}
			t.createdBy[e][c] = f
		}
		if t.opts.ExactCounterNames {
			t.markOpenMetricsUnknown(f, e, claims)
		}
	}
	if n := len(t.families); n > 0 {
		f.share = weak.Make(t.families[n-1])
	}
	t.byName[name] = f
	t.families = append(t.families, f)
	return f, nil
}

// markOpenMetricsUnknown records, for a table with ExactCounterNames, which
// counters OpenMetrics must write as unknown under scheme e once f exists:
// f itself when it is a counter x_total and another family writes x, and
// the counter x_total when f writes x. The caller holds t.mu and has filed
// f's claims.
func (t *Table) markOpenMetricsUnknown(f *Family, e exposition.Escaping, claims []string) {
	for _, n := range claims {
		if g := t.omCounter[e][n]; g != nil && g != f {
			g.omUnknown.Or(1 << e)
		}
	}
	if f.typ != exposition.TypeCounter || f.names[e].created == "" {
		return // not an OpenMetrics counter (no _total): unknown already
	}
	base, _ := trimTotal(f.escapedName(e))
	if g := t.claimed[e][base]; g != nil && g != f {
		f.omUnknown.Or(1 << e)
	}
	t.omCounter[e][base] = f
}

// Family is one metric family: a name, a type, and its series.
type Family struct {
	table *Table
	name  string
	help  string
	typ   exposition.Type
	// share is the family created just before this one, whose series often
	// carry the same labels (a request counter, then its duration
	// histogram): a new series takes the label text of its sibling there
	// instead of a copy (sharedLabels). Weak: a family's removal is not
	// held up by the one created after it.
	share weak.Pointer[Family]
	// names holds, per escaping scheme, the family name and its suffixed
	// sample names as they are written; quoted says whether the name must
	// go inside the braces (UTF-8 names under allow-utf-8).
	names  [exposition.NumEscapings]familyNames
	legacy bool
	// noCreated has bit e set when another family writes this family's
	// _created name under escaping scheme e: OpenMetrics scrapes with that
	// scheme leave its _created lines out.
	noCreated atomic.Uint32
	// omUnknown has bit e set when this counter x_total is written as an
	// unknown family x_total in OpenMetrics scrapes with escaping scheme e,
	// because another family writes x there (Options.ExactCounterNames).
	omUnknown atomic.Uint32
	// hidden has bit e set when another family, created before this one,
	// writes one of this family's names under escaping scheme e (two UTF-8
	// names that escape alike): scrapes with that scheme leave this family
	// out. Set at creation.
	hidden uint8

	// mu serialises the family's writers: inserts, removals, expiry, and
	// the changes they make to the page list and the indexes. An update of
	// an existing series does not take it (index.find is lock-free).
	mu    sync.Mutex
	pages []*page
	// buckets hold the series beyond the head (pages, the first headPages
	// pages), by shard hash (bucket.go); nil until the head is full.
	buckets *[NumBuckets]*bucket
	// bounds caches the le or quantile texts of the first bounds a scrape
	// rendered, for every series that has the same (render.go boundsFor).
	// Immutable once stored.
	bounds atomic.Pointer[boundTexts]
	// index finds a series by key hash, without mu (see index).
	index index
	// locked counts the calls of Series that took mu: those that inserted,
	// or found their series only under the lock. A test hook for issue 11's
	// contract (an update of an existing series never waits for mu), and a
	// cheap figure to log.
	locked atomic.Int64
	// byLabels finds a series by the hash of its rendered labels, so two keys
	// that render alike share one series; the rare series whose labels
	// collide with another's under that hash go to labelCollisions.
	byLabels        map[uint64]*Series
	labelCollisions map[uint64][]*Series
	// aliases holds the index entries of a series' keys after its first
	// (two OTel series that translate to one Prometheus series; the first
	// lives in the series), so removal finds them without a walk of the
	// index.
	aliases map[*Series][]*entry
	live    int
	// scratch renders labels and packs attributes of a new series (under
	// mu); raw and resolved hold its labels, sorted and as written.
	scratch       []byte
	raw, resolved []exposition.Label
	// utf8 is set once a series of the family has names outside the legacy
	// grammar: escaped scrapes then check its series for renderings that
	// escape alike (Writer.unique).
	utf8 atomic.Bool
	// schemas interns the attribute key sequences of the family's keys.
	schemas schemas
}

type familyNames struct {
	base, bucket, sum, count string
	// created is the name of the OpenMetrics _created samples; "" for a
	// family that has none (gauges, and a counter whose name lacks _total,
	// which OpenMetrics calls unknown).
	created string
	quoted  bool
}

// entry is one key of a series in Family.index. Immutable once filed: the
// index's readers hold no lock.
type entry struct {
	ctx   *Context
	attrs text // packedAttrs
	s     *Series
	hash  uint64 // the key hash it is filed under
}

func (e *entry) matches(sc *schemas, key *Key) bool {
	return e.ctx == key.Context && e.attrs.equalAttrs(sc, key.Attrs)
}

type page struct {
	mu     sync.Mutex
	series []*Series
	// hashes[i] is the shard hash of series[i] (see the package doc): the
	// column a shard scrape scans, so it touches only its own series.
	hashes []uint64
	// bucket is the bucket whose page list holds the page, or headBucket
	// (bucket.go); fixed at creation.
	bucket int
	// gen versions what the page renders, for the compressed renderings
	// gzip scrapes keep (gzip.go): odd once anything it renders changed
	// (touch), made even again by the next scrape that renders it
	// (settle). It only grows.
	gen atomic.Uint64
	// kept are the page's kept compressed renderings (gzip.go), at most
	// keptPerPage; guarded by mu.
	kept []keptPage
}

// remove deletes the series at i, keeping the order of the others; the
// caller holds p.mu.
func (p *page) remove(i int) {
	p.series = slices.Delete(p.series, i, i+1)
	p.hashes = slices.Delete(p.hashes, i, i+1)
	p.touch()
}

func newFamily(t *Table, name, help string, typ exposition.Type) *Family {
	f := &Family{
		table: t, name: name, help: help, typ: typ,
		legacy:   exposition.IsLegacyName(name),
		byLabels: make(map[uint64]*Series),
	}
	created := f.createdName()
	for e := range exposition.NumEscapings {
		n := exposition.EscapeName(name, e)
		f.names[e] = familyNames{
			base: n, bucket: n + "_bucket", sum: n + "_sum", count: n + "_count",
			quoted: e == exposition.EscapeNone && !f.legacy,
		}
		// The escaped name plus the suffix, as the other sample names:
		// escaping the whole name would escape its underscore too under
		// the dots scheme (x_dot_y__created beside x_dot_y_bucket).
		f.names[e].created = createdNameOf(n, typ)
		if f.names[e].quoted {
			// A UTF-8 name is written quoted and escaped, inside the braces;
			// the suffixes are part of the quoted string.
			q := func(n string) string { return string(exposition.AppendLabelValue(nil, n)) }
			f.names[e] = familyNames{base: q(name), bucket: q(name + "_bucket"), sum: q(name + "_sum"), count: q(name + "_count"), quoted: true}
			if created != "" {
				f.names[e].created = q(created)
			}
		}
	}
	return f
}

// escapedName is the family's name as scheme e writes it, unquoted.
func (f *Family) escapedName(e exposition.Escaping) string {
	if e == exposition.EscapeNone {
		return f.name
	}
	return f.names[e].base
}

// writtenNames lists the names the family writes under scheme e (see
// sampleNames), unquoted.
func (f *Family) writtenNames(e exposition.Escaping) []string {
	return sampleNamesOf(f.escapedName(e), f.typ, f.table.opts.ExactCounterNames)
}

// sampleNames lists every name the family's samples and metadata use, in any
// format: a counter x_total is family x in OpenMetrics (unless the table has
// ExactCounterNames); a histogram writes x_bucket, x_sum and x_count.
func (f *Family) sampleNames() []string {
	return sampleNamesOf(f.name, f.typ, f.table.opts.ExactCounterNames)
}

func sampleNamesOf(n string, typ exposition.Type, exactCounters bool) []string {
	switch typ {
	case exposition.TypeCounter:
		if base, ok := trimTotal(n); ok && !exactCounters {
			return []string{n, base}
		}
		return []string{n}
	case exposition.TypeHistogram:
		return []string{n, n + "_bucket", n + "_sum", n + "_count"}
	case exposition.TypeSummary:
		return []string{n, n + "_sum", n + "_count"}
	default:
		return []string{n}
	}
}

// createdName is the name of the family's OpenMetrics _created samples: the
// counter's name without _total, or the histogram's or summary's name, with
// _created; "" when the family has none.
func (f *Family) createdName() string { return createdNameOf(f.name, f.typ) }

func createdNameOf(n string, typ exposition.Type) string {
	switch typ {
	case exposition.TypeCounter:
		if base, ok := trimTotal(n); ok {
			return base + "_created"
		}
	case exposition.TypeHistogram, exposition.TypeSummary:
		return n + "_created"
	}
	return ""
}

func trimTotal(n string) (string, bool) {
	const suffix = "_total"
	if len(n) > len(suffix) && n[len(n)-len(suffix):] == suffix {
		return n[:len(n)-len(suffix)], true
	}
	return n, false
}

// Name returns the family's Prometheus name.
func (f *Family) Name() string { return f.name }

// Type returns the family's type.
func (f *Family) Type() exposition.Type { return f.typ }

// LabelSource gives the labels of a series about to be created, its
// context's included: translated names, in any order (the table sorts them
// unless Options.Unsorted), possibly sharing names or using reserved ones
// (the table resolves them, exposition.Resolve). An interface rather than a
// closure, so the hit path allocates nothing.
type LabelSource interface {
	Labels() []exposition.Label
}

// Series returns the series with this hash and key, creating it when it does
// not exist: labels is asked only then. It stamps the series as updated at
// now before returning it, in a way that a concurrent expiry sees (below),
// so expiry never removes a series that is being written.
//
// Concurrency: safe for concurrent use. An existing series is found without
// the family lock (index.find) and stamped; then its gone flag is read. The
// stamp (a store) comes before that read, and Expire sets gone before it
// reads the stamp again, so at least one of the two sees the other: either
// this call sees gone and retries under the lock, or expiry sees the fresh
// stamp and keeps the series. Only a miss, or a series found gone, takes
// the family lock (Family.locked counts those), where the lookup is
// repeated before anything is inserted.
//
// Return values:
//   - the existing series whose key equals key (a hash hit is confirmed by
//     comparing keys, so colliding label sets stay distinct);
//   - a new series;
//   - an existing series whose rendered labels equal the new key's: two OTel
//     series that translate to one Prometheus series share it (last write
//     wins), so the exposition never holds a duplicate;
//   - nil and ErrLimit when the table is full.
//
// A series returned may be removed by a concurrent Remove before the caller
// writes it: that write is lost, as if it came before the removal.
func (f *Family) Series(hash uint64, key *Key, now int64, labels LabelSource) (*Series, error) {
	if e := f.index.find(&f.schemas, hash, key); e != nil {
		e.s.updated.Store(now)
		if !e.s.gone.Load() {
			return e.s, nil
		}
	}
	return f.seriesLocked(hash, key, now, labels)
}

// seriesLocked is Series' slow path: the lookup again, under the family
// lock, then the insert.
func (f *Family) seriesLocked(hash uint64, key *Key, now int64, labels LabelSource) (*Series, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.locked.Add(1)
	// Under mu, gone is stable and a gone series is out of the index.
	if e := f.index.find(&f.schemas, hash, key); e != nil {
		e.s.updated.Store(now)
		return e.s, nil
	}
	// The labels as the series writes them (exposition.Resolve): sorted by
	// name unless the table keeps its sources' order, one label per name,
	// none reserved, per escaping scheme.
	list := labels.Labels()
	o := &f.table.opts
	// The scratch lists may point into a request's buffers: emptied after.
	defer func() { clear(f.raw); clear(f.resolved) }()
	if !o.Unsorted {
		f.raw = append(f.raw[:0], list...)
		list = f.raw
		slices.SortStableFunc(list, byName)
	}
	// Render into the family's scratch and keep exact-size copies: a series
	// keeps its labels for life, so append's slack would be paid forever.
	f.resolved = exposition.Resolve(f.resolved[:0], list, exposition.EscapeUnderscores, f.typ, !f.table.opts.Unsorted)
	f.scratch = appendPairs(f.scratch[:0], f.resolved, exposition.EscapeUnderscores, o.KeepEmptyLabels)
	rendered := f.scratch
	var utf8 []byte
	if !allLegacy(list) {
		utf8 = appendPairs(nil, exposition.Resolve(nil, list, exposition.EscapeNone, f.typ, !f.table.opts.Unsorted), exposition.EscapeNone, o.KeepEmptyLabels)
	}
	dedupe := rendered
	if utf8 != nil {
		dedupe = utf8
	}
	var canonical []byte
	var sorted []exposition.Label
	if o.Unsorted {
		// Compare series by their sorted labels: two orders of one set
		// must not become two series of one exposition.
		sorted = sortedLabels(list)
		canonical = appendPairs(nil, exposition.Resolve(nil, sorted, exposition.EscapeNone, f.typ, true), exposition.EscapeNone, o.KeepEmptyLabels)
		if string(canonical) != string(dedupe) {
			dedupe = canonical
		} else {
			canonical = nil
		}
	}
	lh := xxhash.Sum64(dedupe)
	s := f.sameLabels(lh, dedupe)
	if s == nil {
		if max := f.table.max; max > 0 && f.table.count.Load() >= max {
			return nil, ErrLimit
		}
		shard := xxhash.Sum64(rendered)
		if sorted != nil {
			// The shard hash is over the canonical (sorted) rendering, so
			// it does not depend on the order attributes arrived in.
			shard = xxhash.Sum64(appendPairs(nil, exposition.Resolve(nil, sorted, exposition.EscapeUnderscores, f.typ, true), exposition.EscapeUnderscores, o.KeepEmptyLabels))
		}
		var shared string
		if utf8 == nil && canonical == nil {
			shared = f.sharedLabels(hash, key, rendered)
		}
		s = f.newSeries(rendered, shared, shard)
		if utf8 != nil || canonical != nil {
			if s.extra == nil {
				s.extra = new(seriesExtra)
			}
			s.extra.canonical = string(canonical)
			if utf8 != nil {
				// The source labels, for the dots and values schemes
				// (labelsFor): copies, as the series keeps them.
				s.extra.utf8, s.extra.list = string(utf8), cloneLabels(list)
				id := appendPairs(nil, escapedSorted(list, exposition.EscapeUnderscores, f.typ), exposition.EscapeUnderscores, o.KeepEmptyLabels)
				if string(id) != string(rendered) {
					s.extra.escapedID = string(id)
				}
				f.utf8.Store(true)
			}
		}
		if f.byLabels[lh] == nil {
			f.byLabels[lh] = s
		} else {
			if f.labelCollisions == nil {
				f.labelCollisions = make(map[uint64][]*Series)
			}
			f.labelCollisions[lh] = append(f.labelCollisions[lh], s)
		}
		f.insertLocked(s, shard)
		f.live++
		f.table.count.Add(1)
	}
	e := &s.first // most series have one key: its entry lives in the series
	if e.s != nil {
		// A second key of s: its own entry, kept in aliases for removal.
		e = new(entry)
		if f.aliases == nil {
			f.aliases = make(map[*Series][]*entry)
		}
		f.aliases[s] = append(f.aliases[s], e)
	}
	var schema int
	schema, f.scratch = f.schemas.of(key.Attrs, f.scratch)
	f.scratch = pack(f.scratch, schema, key.Attrs)
	// The packed attributes in an allocation of their own, not in the
	// bucket's arena with the labels: a lookup reads them, and the
	// allocator places them in insertion order, the order points come in;
	// in the arena, in bucket order, updates took 1.2 times as long
	// (BenchmarkConsumeShapes/update).
	*e = entry{ctx: key.Context, attrs: newText(f.scratch), s: s, hash: hash}
	f.index.add(e) // publishes e: it does not change after this
	s.updated.Store(now)
	return s, nil
}

// sameLabels returns the series whose rendered labels are exactly rendered.
func (f *Family) sameLabels(lh uint64, rendered []byte) *Series {
	if s := f.byLabels[lh]; s != nil && s.hasLabels(rendered) {
		return s
	}
	for _, s := range f.labelCollisions[lh] {
		if s.hasLabels(rendered) {
			return s
		}
	}
	return nil
}

// hasLabels reports whether s is identified by rendered. It takes the page
// lock: ownLabels reads s.extra, which a scrape (the protobuf cache) may be
// setting under that lock.
func (s *Series) hasLabels(rendered []byte) bool {
	s.page.mu.Lock()
	defer s.page.mu.Unlock()
	return s.ownLabels() == string(rendered)
}

// ownLabels is the rendering that identifies the series: the UTF-8 one when
// it has one. The caller holds the series' page lock.
func (s *Series) ownLabels() string {
	if s.extra != nil && s.extra.canonical != "" {
		return s.extra.canonical
	}
	if u := s.utf8(); u != "" {
		return u
	}
	return s.labels()
}

// sortedLabels returns a copy of list sorted by name (stable: labels of one
// name keep their order, which exposition.Resolve may join them in).
func sortedLabels(list []exposition.Label) []exposition.Label {
	sorted := slices.Clone(list)
	slices.SortStableFunc(sorted, byName)
	return sorted
}

func byName(a, b exposition.Label) int { return strings.Compare(a.Name, b.Name) }

// cloneLabels copies list and its strings, which may point into a request's
// buffer.
func cloneLabels(list []exposition.Label) []exposition.Label {
	out := make([]exposition.Label, len(list))
	for i, l := range list {
		out[i] = exposition.Label{Name: strings.Clone(l.Name), Value: strings.Clone(l.Value), Attr: l.Attr, Key: strings.Clone(l.Key)}
	}
	return out
}

func appendPairs(dst []byte, list []exposition.Label, e exposition.Escaping, keepEmpty bool) []byte {
	if keepEmpty {
		return exposition.AppendAllLabelPairs(dst, list, e)
	}
	return exposition.AppendLabelPairs(dst, list, e)
}

func allLegacy(list []exposition.Label) bool {
	for _, l := range list {
		if !exposition.IsLegacyName(l.Name) {
			return false
		}
	}
	return true
}

// pageSize is the number of series a page of the family holds.
func (f *Family) pageSize() int {
	if f.typ == exposition.TypeHistogram || f.typ == exposition.TypeSummary {
		return distPageSize
	}
	return PageSize
}

// newSeries allocates a series with shared as its labels, or a copy of
// rendered when shared is empty: from its bucket's chunks once the head is
// full (bucket.go), on its own before. The caller holds f.mu and inserts it (insertLocked) next.
func (f *Family) newSeries(rendered []byte, shared string, shard uint64) *Series {
	if size := f.pageSize(); f.headFull(size) {
		return f.bucket(shard).newSeries(rendered, shared, f.inlineCounts())
	}
	s := new(Series)
	if shared == "" {
		shared = string(rendered)
	}
	s.setLabels(shared)
	return s
}

// sharedLabels returns the label text of the series of (hash, key) in the
// family f.share names, when that text is exactly rendered; "" otherwise.
// A series' label text never changes once it is in an index, so it is read
// without the sibling's locks (as Series reads that index), and sharing it
// is as safe as sharing a string. One lock-free probe per new series.
func (f *Family) sharedLabels(hash uint64, key *Key, rendered []byte) string {
	sib := f.share.Value()
	if sib == nil || len(rendered) == 0 {
		return ""
	}
	e := sib.index.find(&sib.schemas, hash, key)
	if e == nil {
		return ""
	}
	if l := e.s.labels(); l == string(rendered) {
		return l
	}
	return ""
}

// inlineCounts is the room for bucket counts a new histogram of the family
// is given: as many as the family's bounds (SharedBounds, boundsFor), up
// to maxInline; distInline before they are known; none for a summary.
func (f *Family) inlineCounts() int {
	if f.typ != exposition.TypeHistogram {
		return 0
	}
	if t := f.bounds.Load(); t != nil {
		return min(len(t.bounds), maxInline)
	}
	return distInline
}

// insertLocked appends s, whose shard hash is shard, to the last page of
// the head, or of its bucket once the head is full (as it was when s was
// allocated), starting a new page when that one is full.
func (f *Family) insertLocked(s *Series, shard uint64) {
	size := f.pageSize()
	list, where := &f.pages, headBucket
	if f.headFull(size) {
		list, where = &f.bucket(shard).pages, int(shard&(NumBuckets-1))
	}
	var p *page
	if n := len(*list); n > 0 && len((*list)[n-1].series) < size {
		p = (*list)[n-1]
	} else {
		p = newPage(size, where)
		*list = append(*list, p)
	}
	p.mu.Lock()
	s.page = p
	p.series = append(growColumn(p.series, size), s)
	p.hashes = append(growColumn(p.hashes, size), shard)
	p.touch()
	p.mu.Unlock()
}

// growColumn returns a page column with room for one more element: c
// itself, or, when it is full, a copy with room for half as many again (up
// to size, the page's). A bucket page starts small and grows as series
// come; append would double it, and the unused half of the last page of
// each of 64 buckets cost a counter family 10 bytes per series at 11,000
// series, 5 growing this way.
func growColumn[T any](c []T, size int) []T {
	if len(c) < cap(c) {
		return c
	}
	return append(newChunk[T](min(size, cap(c)+max(8, cap(c)/2))), c...)
}

// newPage returns an empty page of the head (bucket headBucket) or of a
// bucket. A head page is allocated at its full size; a bucket page grows
// as series come, so that the 64 buckets of a family just past its head
// cost a few pointers each.
func newPage(size, bucket int) *page {
	if bucket != headBucket {
		size = min(size, 8)
	}
	return &page{series: make([]*Series, 0, size), hashes: make([]uint64, 0, size), bucket: bucket}
}

// Remove deletes the series with this key, as a point flagged "no recorded
// value" asks, with every key that shares it. It reports whether a series was
// removed.
//
// Cost and locking: O(1) whatever the family's size (one index probe per key
// of the series, one page's copy of at most PageSize pointers, a scan of the
// page list only when the page empties). It holds the family lock, which
// inserts and other removals take, but which an update of an existing
// series never takes: that finds its series in the lock-free index, in
// which Remove replaces only the removed series' slots. A gauge or counter
// update waits for nothing; a distribution update waits only when it is on
// the same page, for that page's copy.
func (f *Family) Remove(hash uint64, key *Key) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := f.index.find(&f.schemas, hash, key)
	if e == nil {
		return false
	}
	s := e.s
	s.gone.Store(true) // before unindexing: a lock-free lookup that still finds s retries under mu
	p := s.page
	p.mu.Lock()
	if i := slices.Index(p.series, s); i >= 0 {
		p.remove(i)
	}
	f.unindexLocked(s)
	empty := len(p.series) == 0
	p.mu.Unlock()
	if empty {
		f.dropPageLocked(p)
	}
	f.table.count.Add(-1)
	return true
}

// Expire removes every series not updated since cutoff (unix nanos) and
// returns how many it removed. Pages left empty are released.
//
// It never holds a family lock for more than one page: it looks for stale
// series under each page's lock alone, as a scrape does, and takes the
// family lock (which updates of existing series do not take) only for a
// page that has some, to remove them. A series found stale is marked gone,
// then its stamp is read again: Series stamps before it reads gone, so
// either that lookup sees gone (and retries under the family lock, which
// waits for this page) or this second read sees the fresh stamp, and the
// series is kept (gone cleared). A series being written is never removed.
func (t *Table) Expire(cutoff int64) int {
	t.mu.RLock()
	families := slices.Clone(t.families)
	t.mu.RUnlock()
	stale := func(s *Series) bool { return s.updated.Load() < cutoff }
	var pages []*page
	var gone []*Series
	removed := 0
	for _, f := range families {
		f.mu.Lock()
		pages = f.appendPages(pages[:0], &Query{})
		f.mu.Unlock()
		for _, p := range pages {
			p.mu.Lock()
			found := slices.ContainsFunc(p.series, stale)
			p.mu.Unlock()
			if !found {
				continue
			}
			f.mu.Lock()
			p.mu.Lock()
			gone = gone[:0]
			kept := 0
			for i, s := range p.series {
				if stale(s) {
					s.gone.Store(true)
					if stale(s) { // still: no lookup stamped it before seeing gone
						gone = append(gone, s)
						continue
					}
					s.gone.Store(false)
				}
				p.series[kept], p.hashes[kept] = s, p.hashes[i]
				kept++
			}
			clear(p.series[kept:])
			p.series, p.hashes = p.series[:kept], p.hashes[:kept]
			p.touch()
			for _, s := range gone {
				f.unindexLocked(s)
			}
			empty := len(p.series) == 0
			p.mu.Unlock()
			if empty {
				f.dropPageLocked(p)
			}
			f.mu.Unlock()
			f.table.count.Add(-int64(len(gone)))
			removed += len(gone)
		}
	}
	clear(pages)
	clear(gone)
	return removed
}

// unindexLocked takes s, already out of its page and marked gone, out of
// the family's indexes; the caller holds f.mu and s.page.mu (which guards
// s.extra). It costs one index probe per key of s (one, barring aliases)
// and its label hash's collision list (empty, barring collisions), never a
// walk of the family.
func (f *Family) unindexLocked(s *Series) {
	f.index.remove(&s.first)
	if len(f.aliases) > 0 {
		for _, e := range f.aliases[s] {
			f.index.remove(e)
		}
		delete(f.aliases, s)
	}
	// The label index: the hash Series filed s under is that of ownLabels.
	lh := xxhash.Sum64String(s.ownLabels())
	list := f.labelCollisions[lh]
	switch {
	case f.byLabels[lh] != s:
		list = slices.DeleteFunc(list, func(o *Series) bool { return o == s })
	case len(list) > 0:
		f.byLabels[lh] = list[0] // promote a colliding series
		list = slices.Delete(list, 0, 1)
	default:
		delete(f.byLabels, lh)
	}
	if len(list) == 0 {
		delete(f.labelCollisions, lh)
	} else {
		f.labelCollisions[lh] = list
	}
	f.live--
}

// dropPageLocked takes an empty page out of its page list, the head's or
// its bucket's (a scan of the page pointers, PageSize times fewer than the
// series); the caller holds f.mu.
func (f *Family) dropPageLocked(p *page) {
	p.mu.Lock()
	p.dropAllKept(f.table)
	p.mu.Unlock()
	list := f.pageList(p)
	if i := slices.Index(*list, p); i >= 0 {
		*list = slices.Delete(*list, i, i+1)
	}
}
