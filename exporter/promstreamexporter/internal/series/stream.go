package series

import (
	"context"
	"errors"
	"io"
	"slices"
	"time"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// A scrape's memory is bounded by bytes, never by what the table holds
// (issue 24): it renders into one buffer and writes it to the connection
// whenever it passes flushAt, between two series of a page if need be, and
// writes a series whose rendering would pass bigSeries in pieces, from a
// snapshot of its numbers, flushing as it goes. So a scrape slot holds its
// buffer (flushAt, plus one series under bigSeries or a few lines of a big
// one) and, while a big series is written, a copy of its numbers (8 bytes a
// bucket, against some 100 of text), whatever the series' size: forty
// histograms of 50,000 buckets once grew a slot's buffer past 200 MiB.
const (
	// flushAt is the buffer size at which a scrape writes to the
	// connection. Large writes mean few HTTP chunks (net/http allocates
	// each chunk's header: at 256 KiB a 35 MB scrape paid 122 of them), few
	// syscalls, and a buffer that is still small next to the body; it lives
	// in a scrape slot, so it is allocated once.
	flushAt = 1 << 20
	// bigSeries is the estimated rendering (sizeEstimate) above which a
	// series is written from a snapshot with its page unlocked, in pieces
	// of about flushAt, rather than whole under its page's lock. Ordinary
	// series stay well under it (the estimate of a 15-bucket histogram
	// with 200 bytes of labels is 12 KiB; of an exponential one at the
	// SDKs' default 160 buckets a side, some 210 KiB).
	bigSeries = 256 << 10
	// lineBytes is what sizeEstimate counts per line besides the labels:
	// name, le, value, timestamp, exemplar.
	lineBytes = 128
	// maxRetained bounds what a Writer keeps between scrapes: a buffer or
	// snapshot grown past it by one huge line or series is dropped after
	// the scrape rather than held by the slot.
	maxRetained = 4 * flushAt
)

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
	// Gzip writes the body gzip'd, splicing in the compressed pages
	// earlier gzip scrapes kept when they did not change (gzip.go).
	Gzip bool
}

// ErrDeadline is returned by WriteTo when the query's deadline passed.
var ErrDeadline = errors.New("scrape deadline passed")

// errSize is returned when a big series' protobuf message came out of
// another size than its first pass measured: a bug, and the scrape is
// aborted rather than sent corrupt.
var errSize = errors.New("series: BUG: a protobuf message changed size between its two passes")

// Writer renders the table. It keeps its buffers between scrapes; one Writer
// serves one scrape at a time.
type Writer struct {
	buf      []byte
	families []*Family
	pages    []*page
	scratch  []byte
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

	// The scrape being written: its sink and the bytes written to it.
	w       io.Writer
	written int64
	// rest holds the series of a page still to write once the writer has
	// released the page's lock (the page's own list may change meanwhile).
	rest []*Series
	// group is where the open protobuf MetricFamily message starts in buf
	// (its length prefix reserved), groupN its Metric messages.
	group, groupN int
	// snap is the snapshot of a big series (snapshot.go).
	snap snapshot
	// dedupe: the family being written has series with UTF-8 names and the
	// scrape escapes them, so two of its series may render alike (seen).
	dedupe bool
	seen   seenSet
	// flushLimit and bigLimit replace flushAt and bigSeries when not 0
	// (tests, to cut pages and series at every size).
	flushLimit, bigLimit int
	// held counts the series the scrape left out as created too recently
	// for it (Series.createdFor).
	held int
	// gz is the gzip state of a Query.Gzip scrape (gzip.go).
	gz gzipWriter
}

// Held returns how many series the last WriteTo left out as created too
// recently for it (Series.createdFor): such a scrape did not write all
// that was stored when it began.
func (wr *Writer) Held() int { return wr.held }

func (wr *Writer) flushSize() int {
	if wr.flushLimit > 0 {
		return wr.flushLimit
	}
	return flushAt
}

func (wr *Writer) bigSize() uint64 {
	if wr.bigLimit > 0 {
		return uint64(wr.bigLimit)
	}
	return bigSeries
}

// WriteTo streams the families q selects to w and returns the number of
// bytes written (before compression, with Query.Gzip). It writes to w whenever its buffer passes flushAt (1 MiB),
// and never while it holds a lock; between pages, and between pieces of a
// big series, it checks ctx and q's deadline, so a scrape whose deadline
// passed or whose client left stops at once. When a write fails or ctx
// ends, it returns the error having written a prefix of the exposition: the
// caller must then abort the response, not end it cleanly.
func (wr *Writer) WriteTo(ctx context.Context, t *Table, w io.Writer, q *Query) (int64, error) {
	t.mu.RLock()
	wr.families = append(wr.families[:0], t.families...)
	t.mu.RUnlock()
	wr.w, wr.written, wr.held = w, 0, 0
	defer wr.release()
	wr.buf = wr.buf[:0]
	if q.Gzip {
		wr.beginGzip(t)
	}
	proto := q.Format.Spec().Body.Proto
	for _, f := range wr.families {
		if !q.selects(f) || f.hidden&(1<<q.Escaping) != 0 {
			continue
		}
		f.mu.Lock()
		wr.pages = f.appendPages(wr.pages[:0], q)
		live := f.live
		f.mu.Unlock()
		if live == 0 {
			continue
		}
		wr.beginFamily(f, q, proto)
		keepable := wr.keepable(proto)
		for _, p := range wr.pages {
			if err := checkScrape(ctx, q); err != nil {
				return wr.written, err
			}
			if keepable {
				if done, err := wr.writeKeptPage(t, f, p, q); done || err != nil {
					if err != nil {
						return wr.written, err
					}
					continue
				}
			}
			if err := wr.writePage(ctx, f, p, q, proto); err != nil {
				return wr.written, err
			}
		}
	}
	wr.buf = append(wr.buf, q.Format.Spec().Body.Trailer...)
	if q.Gzip {
		return wr.written, wr.endGzip()
	}
	return wr.written, wr.flush()
}

// release drops the scrape's references, so removed families and series
// can be collected, and what one huge scrape grew past maxRetained.
func (wr *Writer) release() {
	clear(wr.families)
	clear(wr.pages)
	clear(wr.picked[:cap(wr.picked)])
	clear(wr.rest[:cap(wr.rest)])
	wr.w = nil
	wr.snap.release()
	if cap(wr.buf) > maxRetained {
		wr.buf = nil
	}
	if wr.gz.on && wr.gz.workers > 0 {
		wr.gz.pipe.stop(true) // a failed scrape's workers; a no-op after endGzip
	}
	wr.gz.pipe.release()
	wr.gz.on, wr.gz.t = false, nil
	if cap(wr.gz.out) > maxRetained {
		wr.gz.out = nil
	}
	wr.seen.release()
}

// checkScrape reports why the scrape must stop: its client left, or its
// deadline passed.
func checkScrape(ctx context.Context, q *Query) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !q.Deadline.IsZero() && time.Now().After(q.Deadline) {
		return ErrDeadline
	}
	return nil
}

// flush writes the buffer to the scrape's sink; in a gzip scrape, it
// compresses the buffer, and writes once the compressed bytes pass
// flushAt.
func (wr *Writer) flush() error {
	if wr.gz.on {
		wr.compressBuf()
		return wr.writeOut(false)
	}
	if len(wr.buf) == 0 {
		return nil
	}
	n, err := wr.w.Write(wr.buf)
	wr.written += int64(n)
	wr.buf = wr.buf[:0]
	return err
}

// beginFamily writes the family's text header and sets what its series
// write.
func (wr *Writer) beginFamily(f *Family, q *Query, proto bool) {
	// A counter OpenMetrics must call unknown (Options.ExactCounterNames)
	// has the samples of one: its name, no _created, no exemplar.
	unknown := q.Format.Spec().OpenMetrics && f.omUnknown.Load()&(1<<q.Escaping) != 0
	if !proto {
		typ := f.typ
		if unknown {
			typ = exposition.TypeUntyped
		}
		wr.buf = f.appendHeader(wr.buf, q, typ)
	}
	wr.created = ""
	if q.Format.Spec().Body.Created && f.noCreated.Load()&(1<<q.Escaping) == 0 && !unknown {
		wr.created = f.names[q.Escaping].created
	}
	wr.exemplars = q.Format.Spec().Body.Exemplars && f.hasExemplars(f.names[q.Escaping].base) && !unknown
	wr.dedupe = q.Escaping != exposition.EscapeNone && f.utf8.Load()
	if wr.dedupe {
		wr.seen.reset()
	}
}

// writePage writes the series of page p that q selects. It renders them
// under the page's lock while the buffer stays under flushAt; when the
// buffer passes it, or a series is big, it releases the lock (keeping a
// copy of the page's remaining series), writes, and takes the lock again
// for the next series: the lock is never held while writing to the
// connection, and a series is always rendered from one consistent state
// (its own, under the lock, or its snapshot).
func (wr *Writer) writePage(ctx context.Context, f *Family, p *page, q *Query, proto bool) error {
	p.mu.Lock()
	list := wr.pageSeries(p, q)
	// list is the page's own slice for a whole scrape: it must be copied
	// before the lock is released.
	own := len(list) > 0 && unsafe.SliceData(list) == unsafe.SliceData(p.series)
	locked := true
	flushSize, bigSize := wr.flushSize(), wr.bigSize()
	if proto {
		wr.openGroup(f, q)
	}
	for i := 0; i < len(list); i++ {
		s := list[i]
		if !locked {
			p.mu.Lock()
			locked = true
			if s.removed() {
				continue // removed while the page was unlocked
			}
		}
		created, ok := s.createdFor(q)
		if !ok {
			wr.held++ // created too recently for this scrape: the next writes it
			continue
		}
		if wr.dedupe && !wr.unique(f, s, q) {
			continue
		}
		big := s.sizeEstimate(f.typ) > bigSize
		if big {
			wr.takeSnapshot(f, s, q, proto, created)
		} else {
			if proto {
				wr.buf = wr.appendProtoSeries(wr.buf, f, s, q, created)
				wr.groupN++
			} else {
				wr.buf = wr.appendSeries(wr.buf, f, s, q, created)
			}
			if len(wr.buf) < flushSize {
				continue
			}
		}
		if own {
			wr.rest = append(wr.rest[:0], list[i+1:]...)
			list, i, own = wr.rest, -1, false
		}
		p.mu.Unlock()
		locked = false
		if proto {
			wr.closeGroup()
		}
		var err error
		switch {
		case big && proto:
			err = wr.writeProtoSnapshot(ctx, f, q)
		case big:
			err = wr.writeTextSnapshot(ctx, f, q)
		default:
			err = wr.flush()
		}
		if err != nil {
			return err
		}
		if proto {
			wr.openGroup(f, q)
		}
	}
	if locked {
		p.mu.Unlock()
	}
	if proto {
		wr.closeGroup()
	}
	return nil
}

// sizeEstimate estimates, from what the series holds, how many bytes its
// rendering takes in any format, at most: its lines times its labels and
// lineBytes. It reads as little as it can (a scrape reads every series, and
// a field on another cache line is a miss more per series): a gauge's or
// counter's labels (a line, a _created line, an exemplar); a histogram's
// bucket count, its exemplars (one a bucket at most) and native buckets
// (fewer than its classic ones) counted as as many lines again; a
// summary's quantiles. The caller holds the series' page lock.
func (s *Series) sizeEstimate(t exposition.Type) uint64 {
	perLine := uint64(s.ln) + lineBytes
	var d *Dist
	if t == exposition.TypeHistogram || t == exposition.TypeSummary {
		d = s.dist
	}
	switch {
	case d == nil:
		return 3 * perLine
	case t == exposition.TypeHistogram:
		return 2 * (uint64(len(d.Counts)) + 4) * perLine
	default:
		return (uint64(len(d.Values())) + 4) * perLine
	}
}

// openGroup starts a protobuf MetricFamily message in buf: its length
// prefix reserved (closeGroup writes it), its name, help and type.
func (wr *Writer) openGroup(f *Family, q *Query) {
	wr.group, wr.groupN = len(wr.buf), 0
	wr.buf = append(wr.buf, make([]byte, groupPrefix)...)
	wr.buf = appendProtoFamilyHeader(wr.buf, f, q)
}

// groupPrefix is the room reserved for a MetricFamily's length: a group
// stays under flushAt plus one series under bigSeries, and Prometheus's
// parser takes no longer prefix (MaxVarintLen32).
const groupPrefix = 5

// closeGroup ends the open MetricFamily message: its length is written
// before it and the message moved up against it; a message without a
// Metric is taken back.
func (wr *Writer) closeGroup() {
	g := wr.group
	if wr.groupN == 0 {
		wr.buf = wr.buf[:g]
		return
	}
	n := len(wr.buf) - g - groupPrefix
	var prefix [groupPrefix]byte
	p := putUvarint(prefix[:], uint64(n))
	copy(wr.buf[g:], prefix[:p])
	copy(wr.buf[g+p:], wr.buf[g+groupPrefix:])
	wr.buf = wr.buf[:g+p+n]
}

// seenSet holds the identities (canonical renderings under the scrape's
// escaping) of the series of one family written so far, when two may
// render alike: the first is written, the others left out (see unique).
type seenSet struct {
	first map[uint64]string
	more  map[uint64][]string // identities whose hash another one has
}

func (s *seenSet) reset() {
	clear(s.first)
	clear(s.more)
}

// release drops a set grown large, so a slot does not keep it.
func (s *seenSet) release() {
	if len(s.first) > 1<<16 {
		*s = seenSet{}
	}
}

// add records id and reports whether it is new.
func (s *seenSet) add(id string) bool {
	if s.first == nil {
		s.first = make(map[uint64]string)
	}
	h := xxhash.Sum64String(id)
	prev, ok := s.first[h]
	switch {
	case !ok:
		s.first[h] = id
		return true
	case prev == id:
		return false
	}
	for _, o := range s.more[h] {
		if o == id {
			return false
		}
	}
	if s.more == nil {
		s.more = make(map[uint64][]string)
	}
	s.more[h] = append(s.more[h], id)
	return true
}

// unique reports whether s's labels, as q's escaping writes them, differ
// from those of every series of its family written before it in this
// scrape. Under a scheme that escapes names, two series distinct in UTF-8
// ({"a.b"="x"} and {a_b="x"}) can render alike; Prometheus would refuse
// the second as a duplicate sample, so the first written (in the order of
// the family's pages) is the one a scrape of that scheme gets. Only
// families with UTF-8 names pay for it. The caller holds s's page lock.
func (wr *Writer) unique(f *Family, s *Series, q *Query) bool {
	return wr.seen.add(s.identity(q.Escaping, f, &wr.scratch))
}

// identity is the canonical rendering of s's labels under escaping e
// (sorted by their written names, as the table sorts a series' labels):
// equal for two series exactly when they write the same label set. The
// caller holds s's page lock.
func (s *Series) identity(e exposition.Escaping, f *Family, scratch *[]byte) string {
	x := s.extra
	if x == nil || x.utf8 == "" {
		// Legacy names: one rendering under every scheme, sorted unless
		// label_order keeps the source's order (canonical then).
		if x != nil && x.canonical != "" {
			return x.canonical
		}
		return s.labels()
	}
	if e == exposition.EscapeUnderscores {
		// Kept at insert when it differs from the written rendering.
		if x.escapedID != "" {
			return x.escapedID
		}
		return s.labels()
	}
	*scratch = appendPairs((*scratch)[:0], escapedSorted(x.list, e, f.typ), e, f.table.opts.KeepEmptyLabels)
	return string(*scratch)
}

// putUvarint is binary.PutUvarint, which a caller would otherwise import
// for one line.
func putUvarint(buf []byte, x uint64) int {
	i := 0
	for x >= 0x80 {
		buf[i] = byte(x) | 0x80
		x >>= 7
		i++
	}
	buf[i] = byte(x)
	return i + 1
}

// uvarintSize is the size of x as a uvarint.
func uvarintSize(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// escapedSorted is list resolved under e and sorted by written name: the
// canonical form of a label set as e writes it.
func escapedSorted(list []exposition.Label, e exposition.Escaping, t exposition.Type) []exposition.Label {
	res := exposition.Resolve(nil, list, e, t, false)
	slices.SortFunc(res, byName)
	return res
}
