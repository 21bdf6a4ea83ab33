package series

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// flushAt is the buffer size at which a scrape writes to the connection.
// Large writes mean few HTTP chunks (net/http allocates each chunk's header:
// at 256 KiB a 35 MB scrape paid 122 of them), few syscalls, and a buffer
// that is still small next to the body; it lives in a scrape slot, so it is
// allocated once.
const flushAt = 1 << 20

// Query selects what one scrape writes and how.
type Query struct {
	Format   exposition.Format
	Escaping exposition.Escaping
	// Shards > 1 splits the table: only series whose hash % Shards == Shard
	// are written, so every series is in exactly one shard.
	Shard, Shards uint64
	// Names, when not nil, keeps only the families with these names (or
	// whose sample names, such as x_bucket or x_total, are listed).
	Names map[string]struct{}
	// Deadline, when not zero, ends the scrape with ErrDeadline once passed.
	Deadline time.Time
	// Began is when the scrape began (unix nanoseconds): series created
	// too recently for it are left out (Series.createdFor). 0 writes every
	// series.
	Began int64
}

// ErrDeadline is returned by WriteTo when the query's deadline passed.
var ErrDeadline = errors.New("scrape deadline passed")

// Writer renders the table. It keeps its buffers between scrapes; one Writer
// serves one scrape at a time.
type Writer struct {
	buf       []byte
	protoBody []byte
	families  []*Family
	pages     []*page
	scratch   []byte
	// created is the _created name the family being written writes its
	// start times under; "" for none.
	created string
	// exemplars: the family being written writes its exemplars (a text
	// format that has them, a counter or histogram family).
	exemplars bool
	// picked holds a page's series in a shard scrape's shard.
	picked []*Series
	warmed byte
	// ts is the series being written's timestamp text (" 1700000000500"),
	// ended onto each of its sample lines; empty without send_timestamps.
	ts []byte
	// held counts the series the scrape left out as created too recently
	// for it (Series.createdFor).
	held int
}

// Held returns how many series the last WriteTo left out as created too
// recently for it (Series.createdFor): such a scrape did not write all
// that was stored when it began.
func (wr *Writer) Held() int { return wr.held }

// WriteTo streams the families q selects to w, page by page, and returns the
// number of bytes written. It writes to w whenever its buffer passes flushAt (1 MiB),
// and never while it holds a lock; between pages it checks ctx, so a scrape
// whose deadline passed or whose client left stops at once. When a write
// fails or ctx ends, it returns the error having written a prefix of the
// exposition: the caller must then abort the response, not end it cleanly.
func (wr *Writer) WriteTo(ctx context.Context, t *Table, w io.Writer, q *Query) (int64, error) {
	t.mu.RLock()
	wr.families = append(wr.families[:0], t.families...)
	t.mu.RUnlock()
	defer func() {
		clear(wr.families) // drop references so removed families can be collected
		clear(wr.pages)
		clear(wr.picked[:cap(wr.picked)])
	}()
	var written int64
	wr.buf = wr.buf[:0]
	wr.held = 0
	for _, f := range wr.families {
		if !q.selects(f) {
			continue
		}
		f.mu.Lock()
		wr.pages = f.appendPages(wr.pages[:0], q)
		live := f.live
		f.mu.Unlock()
		if live == 0 {
			continue
		}
		proto := q.Format.Spec().Body.Proto
		if !proto {
			wr.buf = f.appendHeader(wr.buf, q)
		}
		wr.created = ""
		if q.Format.Spec().Body.Created && !f.noCreated.Load() {
			wr.created = f.names[q.Escaping].created
		}
		wr.exemplars = q.Format.Spec().Body.Exemplars && f.hasExemplars(f.names[q.Escaping].base)
		for _, p := range wr.pages {
			if err := ctx.Err(); err != nil {
				return written, err
			}
			if !q.Deadline.IsZero() && time.Now().After(q.Deadline) {
				return written, ErrDeadline
			}
			p.mu.Lock()
			if proto {
				wr.buf = wr.appendProtoPage(wr.buf, f, p, q)
			} else {
				wr.buf = wr.appendPage(wr.buf, f, p, q)
			}
			p.mu.Unlock()
			if len(wr.buf) >= flushAt {
				n, err := w.Write(wr.buf)
				written += int64(n)
				if err != nil {
					return written, err
				}
				wr.buf = wr.buf[:0]
			}
		}
	}
	wr.buf = append(wr.buf, q.Format.Spec().Body.Trailer...)
	n, err := w.Write(wr.buf)
	return written + int64(n), err
}

func (q *Query) selects(f *Family) bool {
	if q.Names == nil {
		return true
	}
	for _, n := range f.sampleNames() {
		if _, ok := q.Names[n]; ok {
			return true
		}
	}
	return false
}

func (f *Family) appendHeader(dst []byte, q *Query) []byte {
	name := f.names[q.Escaping].base // quoted already when it must be
	return q.Format.Spec().Body.Header(dst, name, f.help, f.typ)
}

// appendPage writes the series of one page that q's shard selects; the
// caller holds the page lock.
func (wr *Writer) appendPage(dst []byte, f *Family, p *page, q *Query) []byte {
	for _, s := range wr.pageSeries(p, q) {
		dst = wr.appendSeries(dst, f, s, q)
	}
	return dst
}

// pageSeries returns the series of page p that q selects, in page order; the
// caller holds the page lock. A whole scrape gets the page's own slice. A
// shard scrape reads the page's hash column to pick its series, then loads
// the memory their rendering reads (the series' first bytes, its value, its
// label block, its distribution or protobuf labels) in one pass of
// independent loads before anything is rendered: a shard's series are
// scattered among the others', and loading them one at a time while
// rendering paid a cache (and TLB) miss per series, one after another. The
// pass lets the CPU overlap those misses; it made a 4-shard scrape of
// 200,000 series 25 to 35 % cheaper (BenchmarkShardScrape). A bucket's
// page in a scrape that reads buckets (bucketsFor) holds only the shard's
// series: it is returned whole.
func (wr *Writer) pageSeries(p *page, q *Query) []*Series {
	if q.Shards <= 1 || (p.bucket != headBucket && bucketsFor(q.Shards)) {
		return p.series
	}
	picked := wr.picked[:0]
	mask, shard := q.Shards-1, q.Shard
	if q.Shards&mask == 0 { // a power of two: no division
		for i, h := range p.hashes {
			if h&mask == shard {
				picked = append(picked, p.series[i])
			}
		}
	} else {
		for i, h := range p.hashes {
			if h%q.Shards == shard {
				picked = append(picked, p.series[i])
			}
		}
	}
	wr.picked = picked
	var sum byte
	for _, s := range picked {
		sum += byte(s.bits.Load())
		if l := s.labels(); len(l) > 0 {
			sum += l[0] + l[len(l)-1]
		}
		if d := s.dist; d != nil && len(d.Counts) > 0 {
			sum += byte(d.Counts[0]) + byte(d.Counts[len(d.Counts)-1])
		}
		if x := s.extra; x != nil {
			if p := x.proto.String(); len(p) > 0 {
				sum += p[0] + p[len(p)-1]
			}
		}
	}
	wr.warmed += sum // kept, so the loads are not optimized away
	return picked
}

// appendSeries writes every line of one series; the caller holds its page
// lock.
func (wr *Writer) appendSeries(dst []byte, f *Family, s *Series, q *Query) []byte {
	created, ok := s.createdFor(q)
	if !ok {
		wr.held++
		return dst
	}
	labels := s.labelsFor(q.Escaping, &wr.scratch, f.table.opts.KeepEmptyLabels)
	names := &f.names[q.Escaping]
	wr.ts = wr.ts[:0]
	if f.table.opts.Timestamps {
		if t := s.ts.Load(); t > 0 {
			wr.ts = exposition.AppendTimestamp(wr.ts, t, q.Format.Spec().Body.TimestampSeconds)
		}
	}
	ts := wr.ts
	switch f.typ {
	case exposition.TypeHistogram:
		d := s.dist
		if d == nil {
			return dst
		}
		les := boundsFor(d, f, q)
		ex, j := s.ex, 0
		if !wr.exemplars {
			ex = nil
		}
		for i, c := range d.Counts {
			dst = appendPrefix(dst, names.bucket, names.quoted, labels, "le", les[i])
			dst = appendUint(dst, c, ts)
			if ex != nil {
				if e := ex.at(i, &j); e != nil {
					dst = appendExemplar(dst, e)
				}
			}
		}
		dst = appendPrefix(dst, names.bucket, names.quoted, labels, "le", plusInf)
		dst = appendUint(dst, d.Count, ts)
		if ex != nil {
			if e := ex.at(len(d.Counts), &j); e != nil {
				dst = appendExemplar(dst, e)
			}
		}
		dst = appendSumCount(dst, names, labels, d, ts)
		return wr.appendCreated(dst, names, labels, created)
	case exposition.TypeSummary:
		d := s.dist
		if d == nil {
			return dst
		}
		qs := boundsFor(d, f, q)
		for i, v := range d.Values() {
			dst = appendPrefix(dst, names.base, names.quoted, labels, "quantile", qs[i])
			dst = appendSample(dst, v, ts)
		}
		dst = appendSumCount(dst, names, labels, d, ts)
		return wr.appendCreated(dst, names, labels, created)
	case exposition.TypeCounter:
		dst = appendPrefix(dst, names.base, names.quoted, labels, "", nil)
		dst = appendSample(dst, math.Float64frombits(s.bits.Load()), ts)
		if wr.exemplars && s.ex != nil && len(s.ex.list) > 0 {
			dst = appendExemplar(dst, &s.ex.list[0].Exemplar)
		}
		return wr.appendCreated(dst, names, labels, created)
	default:
		dst = appendPrefix(dst, names.base, names.quoted, labels, "", nil)
		return appendSample(dst, math.Float64frombits(s.bits.Load()), ts)
	}
}

// appendSample writes ` <value><ts>\n`; ts is the series' timestamp text,
// empty without one.
func appendSample(dst []byte, v float64, ts []byte) []byte {
	dst = append(dst, ' ')
	dst = exposition.AppendFloat(dst, v)
	dst = append(dst, ts...)
	return append(dst, '\n')
}

// appendCreated writes the series' _created sample when the format has them
// (OpenMetrics), the family may, and the start time is known: after the
// counter's _total, or the histogram's or summary's _count, as OpenMetrics
// orders a MetricPoint's samples.
func (wr *Writer) appendCreated(dst []byte, names *familyNames, labels string, created int64) []byte {
	if wr.created == "" || created <= 0 {
		return dst
	}
	dst = appendPrefix(dst, wr.created, names.quoted, labels, "", nil)
	return exposition.AppendCreated(dst, created)
}

var plusInf = []byte("+Inf")

// appendSumCount writes _sum (when the point has one) and _count. A
// histogram with negative bucket bounds gets no _sum: OpenMetrics forbids it
// there, and every format writes the same samples.
func appendSumCount(dst []byte, names *familyNames, labels string, d *Dist, ts []byte) []byte {
	if d.HasSum && (len(d.Counts) == 0 || len(d.Bounds) == 0 || d.Bounds[0] >= 0) {
		dst = appendPrefix(dst, names.sum, names.quoted, labels, "", nil)
		dst = appendSample(dst, d.Sum, ts)
	}
	dst = appendPrefix(dst, names.count, names.quoted, labels, "", nil)
	return appendUint(dst, d.Count, ts)
}

// labelsFor returns the label pairs rendered for escaping scheme e. Series
// whose names are all legacy (every series under the default translation
// strategy) have one rendering for every scheme; others render the dots and
// values schemes at scrape time (allocating: a rare path, only for UTF-8
// names under the NoUTF8Escaping strategies and a dots or values scraper).
func (s *Series) labelsFor(e exposition.Escaping, scratch *[]byte, keepEmpty bool) string {
	if s.extra == nil || s.extra.utf8 == "" {
		return s.labels()
	}
	switch e {
	case exposition.EscapeNone:
		return s.extra.utf8
	case exposition.EscapeUnderscores:
		return s.labels()
	default:
		*scratch = appendPairs((*scratch)[:0], s.extra.list, e, keepEmpty)
		return string(*scratch)
	}
}

// appendPrefix writes `name{labels,extra="v"}` or, for a quoted UTF-8 name
// (passed with its quotes), `{"name",labels,extra="v"}`; without labels and
// extra, just `name`.
func appendPrefix(dst []byte, name string, quoted bool, labels string, extra string, extraValue []byte) []byte {
	if quoted {
		dst = append(dst, '{')
		dst = append(dst, name...)
		if len(labels) > 0 || extra != "" {
			dst = append(dst, ',')
		}
	} else {
		dst = append(dst, name...)
		if len(labels) == 0 && extra == "" {
			return dst
		}
		dst = append(dst, '{')
	}
	dst = append(dst, labels...)
	if extra != "" {
		if len(labels) > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, extra...)
		dst = append(dst, '=', '"')
		dst = append(dst, extraValue...)
		dst = append(dst, '"')
	}
	return append(dst, '}')
}

func appendUint(dst []byte, v uint64, ts []byte) []byte {
	dst = append(dst, ' ')
	dst = strconv.AppendUint(dst, v, 10)
	dst = append(dst, ts...)
	return append(dst, '\n')
}

// boundsFor picks the le/quantile texts: canonical, or the shortest form in
// the text formats when the table asks for it. A family's series nearly
// always share their bounds: the texts of the first bounds rendered are
// kept in the family (f.bounds), so that those series read one copy rather
// than each its own, scattered in memory; a series with other bounds keeps
// its own (Dist.boundTexts), as before.
func boundsFor(d *Dist, f *Family, q *Query) [][]byte {
	short := f.table.opts.ShortestBounds && !q.Format.Spec().Body.CanonicalBounds
	t := f.bounds.Load()
	if t == nil && len(d.Bounds) > 0 {
		t = newBoundTexts(d.Bounds)
		if !f.bounds.CompareAndSwap(nil, t) {
			t = f.bounds.Load()
		}
	}
	if t != nil && t.same(d.Bounds) {
		if short {
			return t.short
		}
		return t.canonical
	}
	if short {
		return d.ownTexts().short
	}
	return d.ownTexts().canonical
}

// SharedBounds returns the bounds a Dist should hold for values: the
// family's copy, the one whose texts boundsFor keeps, when values are the
// same, so a family's series share one slice rather than each holding its
// own (14 bounds: 112 bytes a series); else a copy of values. The family's
// copy is taken from the first bounds it sees. The slice is shared:
// callers replace a Dist's Bounds, never write into them.
func (f *Family) SharedBounds(values pcommon.Float64Slice) []float64 {
	t := f.bounds.Load()
	if t == nil && values.Len() > 0 {
		t = newBoundTexts(values.AsRaw())
		if !f.bounds.CompareAndSwap(nil, t) {
			t = f.bounds.Load()
		}
	}
	if t != nil && t.sameValues(values) {
		return t.bounds
	}
	return values.AsRaw()
}

// boundTexts are the texts of one list of bounds. Immutable.
type boundTexts struct {
	bounds           []float64
	canonical, short [][]byte
}

func newBoundTexts(bounds []float64) *boundTexts {
	t := &boundTexts{bounds: slices.Clone(bounds)}
	for _, b := range t.bounds {
		t.canonical = append(t.canonical, exposition.AppendCanonical(nil, b))
		t.short = append(t.short, exposition.AppendFloat(nil, b))
	}
	return t
}

// sameValues is same for a pdata slice.
func (t *boundTexts) sameValues(values pcommon.Float64Slice) bool {
	if values.Len() != len(t.bounds) {
		return false
	}
	for i, b := range t.bounds {
		if v := values.At(i); math.Float64bits(v) != math.Float64bits(b) || v != v {
			return false
		}
	}
	return true
}

// same reports whether bounds are t's, bit for bit (-0 and 0 render
// differently; NaN bounds are never the same, and keep their own texts).
func (t *boundTexts) same(bounds []float64) bool {
	if len(bounds) != len(t.bounds) {
		return false
	}
	if len(bounds) > 0 && &bounds[0] == &t.bounds[0] {
		return true // SharedBounds gave the Dist t's own slice
	}
	for i, b := range bounds {
		if math.Float64bits(b) != math.Float64bits(t.bounds[i]) || b != b {
			return false
		}
	}
	return true
}
