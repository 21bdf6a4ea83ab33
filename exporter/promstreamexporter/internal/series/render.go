package series

import (
	"math"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

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

// appendHeader writes the family's header as type typ (its own, or
// untyped where OpenMetrics must call it unknown).
func (f *Family) appendHeader(dst []byte, q *Query, typ exposition.Type) []byte {
	name := f.names[q.Escaping].base // quoted already when it must be
	return q.Format.Spec().Body.Header(dst, name, f.help, typ)
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

// view is what the rendering of a big series reads: its snapshot
// (snapshot.go), taken under its page lock and read once the lock is
// released.
type view struct {
	// labels are, in the text formats, the label pairs as the scrape's
	// escaping writes them; in protobuf, their LabelPair encoding.
	labels  string
	bits    uint64 // a gauge's or counter's value
	created int64
	ts      int64 // 0 without send_timestamps
	d       *Dist // a histogram's or summary's values
	// les are the texts of d's bounds (text formats).
	les *textList
	// ex are the exemplars the format writes, nil for none.
	ex *exemplars
}

// cursor is how far the rendering of a series has got: the writer renders
// a big series in pieces, each call going on where the last stopped.
type cursor struct {
	phase, i int
	j        int // the exemplar cursor (exemplars.at)
}

// viewOf reads what rendering s needs, for its snapshot; the caller holds
// its page lock.
func (wr *Writer) viewOf(f *Family, s *Series, q *Query, proto bool, created int64) view {
	v := view{bits: s.bits.Load(), created: created, d: s.dist}
	if proto {
		v.labels = s.protoLabels(q.Escaping, &wr.scratch, f)
		v.ex = s.ex
	} else {
		v.labels = s.labelsFor(q.Escaping, &wr.scratch, f)
		if wr.exemplars {
			v.ex = s.ex
		}
		if v.d != nil {
			v.les = boundsFor(v.d, f, q)
		}
	}
	if f.table.opts.Timestamps {
		v.ts = s.ts.Load()
	}
	return v
}

// timestamp sets wr.ts to the text of the timestamp t (unix nanoseconds)
// that ends each of a series' lines, empty for none, and returns it.
func (wr *Writer) timestamp(t int64, q *Query) []byte {
	wr.ts = wr.ts[:0]
	if t > 0 {
		wr.ts = exposition.AppendTimestamp(wr.ts, t, q.Format.Spec().Body.TimestampSeconds)
	}
	return wr.ts
}

// appendSeries writes every line of one series; the caller holds its page
// lock. It reads the series' fields itself (a scrape's hot path: a gauge or
// counter costs a few loads more through a view, a fifth of a scrape);
// appendLines writes a big series' snapshot with the same line functions.
func (wr *Writer) appendSeries(dst []byte, f *Family, s *Series, q *Query, created int64) []byte {
	labels := s.labelsFor(q.Escaping, &wr.scratch, f)
	names := &f.names[q.Escaping]
	var ts []byte
	if f.table.opts.Timestamps {
		ts = wr.timestamp(s.ts.Load(), q)
	}
	var c cursor
	switch f.typ {
	case exposition.TypeHistogram:
		d := s.dist
		if d == nil {
			return dst
		}
		var ex *exemplars
		if wr.exemplars {
			ex = s.ex
		}
		dst, _ = wr.histogramLines(dst, names, labels, boundsFor(d, f, q), d, ex, created, ts, &c, math.MaxInt)
		return dst
	case exposition.TypeSummary:
		d := s.dist
		if d == nil {
			return dst
		}
		dst, _ = wr.summaryLines(dst, names, labels, boundsFor(d, f, q), d, created, ts, &c, math.MaxInt)
		return dst
	case exposition.TypeCounter:
		var ex *exemplars
		if wr.exemplars {
			ex = s.ex
		}
		return wr.counterLines(dst, names, labels, s.bits.Load(), ex, created, ts)
	default:
		dst = appendPrefix(dst, names.base, names.quoted, labels, "", nil)
		return appendSample(dst, math.Float64frombits(s.bits.Load()), ts)
	}
}

// appendLines writes the lines of a big series' snapshot v from where c
// says, and reports whether it wrote the last; it stops once dst passes
// limit after a bucket or quantile line (see histogramLines).
func (wr *Writer) appendLines(dst []byte, f *Family, v *view, q *Query, c *cursor, limit int) ([]byte, bool) {
	names := &f.names[q.Escaping]
	ts := wr.timestamp(v.ts, q)
	switch f.typ {
	case exposition.TypeHistogram:
		if v.d == nil {
			return dst, true
		}
		return wr.histogramLines(dst, names, v.labels, v.les, v.d, v.ex, v.created, ts, c, limit)
	case exposition.TypeSummary:
		if v.d == nil {
			return dst, true
		}
		return wr.summaryLines(dst, names, v.labels, v.les, v.d, v.created, ts, c, limit)
	case exposition.TypeCounter:
		return wr.counterLines(dst, names, v.labels, v.bits, v.ex, v.created, ts), true
	default:
		dst = appendPrefix(dst, names.base, names.quoted, v.labels, "", nil)
		return appendSample(dst, math.Float64frombits(v.bits), ts), true
	}
}

// histogramLines writes a histogram's lines from where c says: a _bucket
// line per bound with its exemplar (ex: nil for none), then +Inf, _sum,
// _count and _created together. It stops once dst passes limit after a
// bucket line, and reports whether it wrote the last line.
func (wr *Writer) histogramLines(dst []byte, names *familyNames, labels string, les *textList, d *Dist, ex *exemplars, created int64, ts []byte, c *cursor, limit int) ([]byte, bool) {
	for c.i < len(d.Counts) {
		i := c.i
		dst = appendPrefix(dst, names.bucket, names.quoted, labels, "le", les.at(i))
		dst = appendUint(dst, d.Counts[i], ts)
		if ex != nil {
			if e := ex.at(i, &c.j); e != nil {
				dst = appendExemplar(dst, e)
			}
		}
		c.i++
		if len(dst) >= limit {
			return dst, false
		}
	}
	dst = appendPrefix(dst, names.bucket, names.quoted, labels, "le", plusInf)
	dst = appendUint(dst, d.Count, ts)
	if ex != nil {
		if e := ex.at(len(d.Counts), &c.j); e != nil {
			dst = appendExemplar(dst, e)
		}
	}
	dst = appendSumCount(dst, names, labels, d, ts)
	return wr.appendCreated(dst, names, labels, created), true
}

// summaryLines writes a summary's lines from where c says: a quantile line
// per quantile, then _sum, _count and _created together; it stops as
// histogramLines does.
func (wr *Writer) summaryLines(dst []byte, names *familyNames, labels string, qs *textList, d *Dist, created int64, ts []byte, c *cursor, limit int) ([]byte, bool) {
	values := d.Values()
	for c.i < len(values) {
		i := c.i
		dst = appendPrefix(dst, names.base, names.quoted, labels, "quantile", qs.at(i))
		dst = appendSample(dst, values[i], ts)
		c.i++
		if len(dst) >= limit {
			return dst, false
		}
	}
	dst = appendSumCount(dst, names, labels, d, ts)
	return wr.appendCreated(dst, names, labels, created), true
}

// counterLines writes a counter's line, its exemplar (ex: nil for none)
// and its _created line.
func (wr *Writer) counterLines(dst []byte, names *familyNames, labels string, bits uint64, ex *exemplars, created int64, ts []byte) []byte {
	dst = appendPrefix(dst, names.base, names.quoted, labels, "", nil)
	dst = appendSample(dst, math.Float64frombits(bits), ts)
	if ex != nil && len(ex.list) > 0 {
		dst = appendExemplar(dst, &ex.list[0].Exemplar)
	}
	return wr.appendCreated(dst, names, labels, created)
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
func (s *Series) labelsFor(e exposition.Escaping, scratch *[]byte, f *Family) string {
	if s.extra == nil || s.extra.utf8 == "" {
		return s.labels()
	}
	switch e {
	case exposition.EscapeNone:
		return s.extra.utf8
	case exposition.EscapeUnderscores:
		return s.labels()
	default:
		list := exposition.Resolve(nil, s.extra.list, e, f.typ, !f.table.opts.Unsorted)
		*scratch = appendPairs((*scratch)[:0], list, e, f.table.opts.KeepEmptyLabels)
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
func boundsFor(d *Dist, f *Family, q *Query) *textList {
	withShort := f.table.opts.ShortestBounds
	short := withShort && !q.Format.Spec().Body.CanonicalBounds
	t := f.bounds.Load()
	if t == nil && len(d.Bounds) > 0 {
		t = newBoundTexts(d.Bounds, withShort)
		if !f.bounds.CompareAndSwap(nil, t) {
			t = f.bounds.Load()
		}
	}
	if t != nil && t.same(d.Bounds) {
		if short {
			return &t.short
		}
		return &t.canonical
	}
	if short {
		return &d.ownTexts(withShort).short
	}
	return &d.ownTexts(withShort).canonical
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
		t = newBoundTexts(values.AsRaw(), f.table.opts.ShortestBounds)
		if !f.bounds.CompareAndSwap(nil, t) {
			t = f.bounds.Load()
		}
	}
	if t != nil && t.sameValues(values) {
		return t.bounds
	}
	return values.AsRaw()
}

// boundTexts are the texts of one list of bounds: canonical, and the
// shortest form when the table writes it (Options.ShortestBounds).
// Immutable.
type boundTexts struct {
	bounds           []float64
	canonical, short textList
}

// newBoundTexts renders the texts of bounds, which it keeps: a Dist's
// bounds are never written once it has them (Dist.Bounds), and
// SharedBounds passes a copy of its own.
func newBoundTexts(bounds []float64, short bool) *boundTexts {
	t := &boundTexts{bounds: bounds}
	t.canonical = newTextList(t.bounds, exposition.AppendCanonical)
	if short {
		t.short = newTextList(t.bounds, exposition.AppendFloat)
	}
	return t
}

// textList holds the texts of a list of numbers in one allocation (and one
// of offsets): text i is b[off[i]:off[i+1]]. A histogram of 50,000 bounds
// once cost 100,000 small allocations, and twice the memory. Immutable.
type textList struct {
	b   []byte
	off []uint32
}

func newTextList(values []float64, render func([]byte, float64) []byte) textList {
	// Measured first, then rendered into an exact allocation: a list is
	// kept as long as its bounds, and append's slack (up to as much
	// again) would be kept with it.
	var scratch [32]byte
	size := 0
	for _, v := range values {
		size += len(render(scratch[:0], v))
	}
	l := textList{b: make([]byte, 0, size), off: make([]uint32, 1, len(values)+1)}
	for _, v := range values {
		l.b = render(l.b, v)
		l.off = append(l.off, uint32(len(l.b)))
	}
	return l
}

// at returns text i.
func (l *textList) at(i int) []byte { return l.b[l.off[i]:l.off[i+1]:l.off[i+1]] }

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
