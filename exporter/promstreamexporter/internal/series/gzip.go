package series

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"unsafe"

	"github.com/klauspost/compress/flate"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// Gzip scrapes (Query.Gzip) and the compressed pages they keep (issue 28).
//
// Prometheus asks for gzip on every scrape, and compressing a 35 MB
// exposition costs about twice what rendering it does. But between two
// scrapes most pages do not change (upstream health, idle routes): a gzip
// scrape keeps each page it compressed, and the next one splices those
// bytes in again when the page has not changed, rather than rendering and
// compressing it anew.
//
// Splicing: the body is one gzip member whose deflate stream is a sequence
// of fragments, each a run of deflate blocks compressed from a fresh state
// (no match reaches back into an earlier fragment) and ended by a sync
// flush (an empty stored block), so it ends on a byte boundary and any
// fragment may follow it. A kept page is one such fragment; the bytes
// between kept pages (family headers, pages that cannot be kept) are
// compressed as a stream and cut into a fragment wherever a kept page
// follows. An empty final stored block ends the stream; the trailer's CRC
// is combined from the fragments' CRCs (crc.go), so a spliced page is never
// read again. Every fragment is compressed at BestSpeed (klauspost/compress
// level 1): per page-sized fragment of the kong200k exposition it took the
// least CPU and gave the smallest body of the compressors measured
// (BenchmarkFragmentCompressors, 3 runs: level 1 88–100 ms CPU for 60 MB,
// 0.0795 of the text; level 2 102–146 ms, 0.0823; level 3 133–147 ms,
// 0.0799; Huffman-only 93–102 ms but 0.611; the standard library's level
// 1 175–184 ms, 0.0823).
//
// Freshness: a page's gen is made odd by every change to what it renders
// (Series.touch on a value, timestamp, start time, distribution or
// exemplar; an insert or removal), and made even (settled) by a scrape
// before it renders the page; a kept rendering records the gen it was
// rendered at, and is spliced only while the page's gen is still that one.
// Any change after the render reads its series makes gen odd, and odd
// never equals a kept gen; gen only grows, so no older rendering becomes
// fresh again. A scalar update stores its value before touch reads gen,
// and a scrape settles gen before it reads the values: one of the two
// sees the other (Go's atomics are sequentially consistent), so either the
// render read the new value or gen moved on.
//
// What else a page's bytes depend on is its key (pageKey): the format, the
// escaping, the family's _created name (which another family can take
// away), and the shard when a shard scrape picks part of the page. A
// kept page holds no series that its scrape left out as created too
// recently (Series.createdFor; such a page is not kept), so it serves any
// scrape that began no earlier than its own. Not kept: protobuf pages
// (their message framing follows the writer's buffer, so the bytes
// would differ from the plain body's), families whose series may render
// alike under the scrape's escaping (Writer.unique), pages holding a big
// series or whose rendering may pass flushAt (written as before, in
// pieces, into the stream).
//
// Memory: a page keeps at most keptPerPage renderings, each about a
// fifteenth of its text (KeptBytes; bench/promstream reports it per
// series). They go with their page.

// keptPerPage bounds the renderings a page keeps: one per (format,
// escaping) a scraper uses, and, for a page a shard scrape picks from
// (the head, or any page for a shards value that does not divide
// NumBuckets), one per shard. The least recently spliced is replaced.
const keptPerPage = 4

// keptPerHeadPage bounds the renderings a head page keeps. Every shard
// scrape picks from the head pages (headPages of each family), so a
// Prometheus splitting a job in 4 shards beside a whole scrape keeps 5
// renderings of each: with keptPerPage the least recently spliced was
// always the next one wanted, and every shard scrape compressed the heads
// of all families anew, a fixed cost that made a gzip shard of an
// unchanged table 0.35–0.44 of the whole one (bench/promstream, issue 28
// item 7). A shard's rendering is about 1/shards of the page.
const keptPerHeadPage = 12

// pageKey is what a page's rendering depends on besides its series.
type pageKey struct {
	// created is the family's _created name as the scrape writes it (""
	// for none).
	created       string
	shard, shards uint64 // the shard picked; 0, 0 for the whole page
	format        exposition.Format
	escaping      exposition.Escaping
}

// keptPage is one compressed rendering of a page.
type keptPage struct {
	key pageKey
	gen uint64 // page.gen when it was rendered (even)
	// began is the Began of the scrape that rendered it: a scrape that
	// began earlier may have to leave out a series it wrote.
	began int64
	used  uint64 // Table.gzipScrapes when last spliced
	n     uint64 // uncompressed size
	// crc and shift are the CRC-32 of the uncompressed bytes and
	// crcShift(n).
	crc, shift uint32
	z          []byte // the fragment
}

// touch records that something the page renders changed: gen is made odd,
// unless it is already. An update calls it after storing its value; it is
// a load when the page is already marked, the common case under steady
// ingest.
func (p *page) touch() {
	if p.gen.Load()&1 == 0 {
		p.markChanged()
	}
}

func (p *page) markChanged() {
	for {
		g := p.gen.Load()
		// A failed swap means a scrape settled gen, or another update
		// marked it: look again.
		if g&1 != 0 || p.gen.CompareAndSwap(g, g+1) {
			return
		}
	}
}

// settle returns the gen a scrape renders the page at, making it even
// first when something changed. The caller holds p.mu and reads the
// page's series only after.
func (p *page) settle() uint64 {
	for {
		g := p.gen.Load()
		if g&1 == 0 || p.gen.CompareAndSwap(g, g+1) {
			return g + g&1
		}
	}
}

// fresh returns the kept rendering of key that a scrape of q may splice,
// or nil. The caller holds p.mu.
func (p *page) fresh(key *pageKey, q *Query) *keptPage {
	for i := range p.kept {
		k := &p.kept[i]
		if k.key != *key {
			continue
		}
		if k.gen != p.gen.Load() || (q.Began != 0 && (k.began == 0 || k.began > q.Began)) {
			return nil
		}
		return k
	}
	return nil
}

// keep stores a rendering of key made at gen by a scrape that began at
// began: its fragment z, the CRC of its n uncompressed bytes and their
// crcShift. It replaces the page's rendering of key unless that one is more
// recent, else takes a free slot, else replaces the least recently
// spliced. A page that changed since (its renderings would never be
// spliced) or was emptied (it is leaving its list) keeps nothing, and
// neither does a page whose rendering would take the table's kept bytes
// past Options.MaxKeptBytes: it drops its stale rendering of key instead.
// The caller holds p.mu.
func (p *page) keep(t *Table, key *pageKey, gen uint64, began int64, used uint64, z []byte, crc, shift uint32, n uint64) {
	if len(p.series) == 0 || p.gen.Load() != gen {
		return
	}
	slot := -1
	for i := range p.kept {
		if p.kept[i].key == *key {
			if p.kept[i].gen > gen {
				return
			}
			slot = i
			break
		}
	}
	added := false
	if slot < 0 {
		limit := keptPerPage
		if p.bucket == headBucket {
			limit = keptPerHeadPage
		}
		if len(p.kept) < limit {
			p.kept = append(p.kept, keptPage{})
			slot, added = len(p.kept)-1, true
		} else {
			slot = 0
			for i := range p.kept {
				if p.kept[i].used < p.kept[slot].used {
					slot = i
				}
			}
		}
	}
	k := &p.kept[slot]
	buf := k.z[:0]
	var grow int64
	if cap(buf) < len(z) || cap(buf) > 2*len(z) {
		// Exact size: a page keeps it until it changes again, and
		// append's slack (or what an earlier, larger rendering left)
		// would be kept with it.
		grow = int64(len(z)) - int64(cap(buf))
		buf = nil
	}
	if added {
		grow += int64(keptPageSize)
	}
	if max := t.opts.MaxKeptBytes; max > 0 && grow > 0 && t.keptBytes.Load()+grow > max {
		// Over the bound: the slot's rendering (stale, or none) goes.
		if added {
			p.kept = p.kept[:slot]
		} else {
			p.dropKept(t, slot)
		}
		return
	}
	t.keptBytes.Add(grow)
	if buf == nil {
		buf = make([]byte, 0, len(z))
	}
	*k = keptPage{key: *key, gen: gen, began: began, used: used, n: n, crc: crc, shift: shift, z: append(buf, z...)}
}

// dropKept frees the page's kept rendering i. The caller holds p.mu.
func (p *page) dropKept(t *Table, i int) {
	t.keptBytes.Add(-int64(cap(p.kept[i].z)) - int64(keptPageSize))
	p.kept = slices.Delete(p.kept, i, i+1)
}

// dropAllKept frees every kept rendering of a page leaving its list. The
// caller holds p.mu.
func (p *page) dropAllKept(t *Table) {
	for i := len(p.kept) - 1; i >= 0; i-- {
		p.dropKept(t, i)
	}
	p.kept = nil
}

// KeptBytes returns the memory the table's pages hold in kept compressed
// renderings: their bytes and their bookkeeping (bounded by
// Options.MaxKeptBytes).
func (t *Table) KeptBytes() int64 { return t.keptBytes.Load() }

// gzipWriter is a Writer's gzip state: the compressor, the compressed bytes
// not yet written to the scrape's sink, and the running trailer.
type gzipWriter struct {
	on bool
	fw *flate.Writer
	// out holds the compressed body not yet written; fw appends to it.
	out  []byte
	sink outSink
	// open: fw has compressed bytes since its last reset, so it must be
	// sync-flushed before a kept page is spliced.
	open bool
	crc  uint32
	size uint64
	seq  uint64 // Table.gzipScrapes of this scrape
	// spliced counts the kept pages this scrape spliced, compressed the
	// pages it rendered and compressed to keep.
	spliced, compressed int
	// workers > 0: fragments are compressed by the pipe's workers
	// (gzippipe.go), not by fw; t is the scrape's table.
	workers int
	pipe    gzPipe
	t       *Table
}

// GzipWarm reports whether the writer holds a gzip compressor, made by its
// first gzip scrape and kept for the next: the exporter's tests check that
// sequential scrapes reuse one slot's.
func (wr *Writer) GzipWarm() bool { return wr.gz.fw != nil }

// outSink appends what fw writes to the gzipWriter's out.
type outSink struct{ g *gzipWriter }

func (s outSink) Write(p []byte) (int, error) {
	s.g.out = append(s.g.out, p...)
	return len(p), nil
}

// gzipHeader is a gzip member header: deflate, no name, no time, unknown
// OS (RFC 1952).
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}

// gzipEnd ends a deflate stream: an empty final stored block.
var gzipEnd = []byte{1, 0, 0, 0xff, 0xff}

// beginGzip starts a gzip body in out.
func (wr *Writer) beginGzip(t *Table) {
	g := &wr.gz
	g.workers, g.t = pipeWorkers(t), t
	if g.workers > 0 {
		g.pipe.begin(g.workers)
	}
	// fw: the scrape's own compressor, for small fragments with workers.
	if g.fw == nil {
		g.sink = outSink{g}
		g.fw, _ = flate.NewWriter(g.sink, flate.BestSpeed) // a valid level: no error
	} else {
		g.fw.Reset(g.sink)
	}
	g.on, g.open, g.crc, g.size, g.spliced, g.compressed = true, false, 0, 0, 0, 0
	g.seq = t.gzipScrapes.Add(1)
	g.out = append(g.out[:0], gzipHeader...)
}

// compressBuf compresses the rendered bytes in buf into the open fragment.
func (wr *Writer) compressBuf() {
	if len(wr.buf) == 0 {
		return
	}
	g := &wr.gz
	if g.workers > 0 {
		wr.pipeCompress(g.t, nil, nil, 0, 0)
		return
	}
	g.crc = crc32.Update(g.crc, crc32.IEEETable, wr.buf)
	g.size += uint64(len(wr.buf))
	wr.written += int64(len(wr.buf))
	_, _ = g.fw.Write(wr.buf) // g.sink never fails
	g.open = true
	wr.buf = wr.buf[:0]
}

// cut compresses buf and ends the open fragment, so that a fragment
// compressed from a fresh state (a kept page) may follow.
func (wr *Writer) cut() {
	wr.compressBuf()
	g := &wr.gz
	if g.open {
		_ = g.fw.Flush()
		g.fw.Reset(g.sink)
		g.open = false
	}
}

// writeOut writes the compressed bytes held once they pass flushAt, or all
// of them when all is set.
func (wr *Writer) writeOut(all bool) error {
	g := &wr.gz
	if len(g.out) == 0 || (!all && len(g.out) < wr.flushSize()) {
		return nil
	}
	_, err := wr.w.Write(g.out)
	g.out = g.out[:0]
	return err
}

// endGzip ends the body: the open fragment, the final block and the
// trailer, and writes what is held.
func (wr *Writer) endGzip() error {
	wr.cut()
	g := &wr.gz
	if g.workers > 0 {
		wr.pipeEnd(g.t)
	}
	g.out = append(g.out, gzipEnd...)
	g.out = binary.LittleEndian.AppendUint32(g.out, g.crc)
	g.out = binary.LittleEndian.AppendUint32(g.out, uint32(g.size)) // ISIZE: the size modulo 2^32
	return wr.writeOut(true)
}

// keepable reports whether the pages of the family being written may be
// spliced and kept (see the package's gzip notes).
func (wr *Writer) keepable(proto bool) bool {
	return wr.gz.on && !proto && !wr.dedupe
}

// writeKeptPage writes page p of a gzip scrape through the page's kept
// renderings: splices a fresh one, or renders and compresses the page as
// a fragment of its own and keeps it. It returns false, having written
// nothing, for a page that is not to be kept (a big series, a rendering
// that may pass flushAt), which writePage then writes into the stream.
func (wr *Writer) writeKeptPage(t *Table, f *Family, p *page, q *Query) (bool, error) {
	key := pageKey{created: wr.created, format: q.Format, escaping: q.Escaping}
	if q.Shards > 1 && (p.bucket == headBucket || !bucketsFor(q.Shards)) {
		key.shard, key.shards = q.Shard, q.Shards // pageSeries picks
	}
	// The stream's bytes before the page, compressed outside the page's
	// lock.
	wr.cut()
	g := &wr.gz
	par := g.workers > 0
	if par && g.pipe.busy() {
		// A kept page follows the fragments in flight: a batch for it,
		// opened before the lock since the ring may have to wait for a
		// worker.
		wr.pipeOpen(t)
	}
	p.mu.Lock()
	if k := p.fresh(&key, q); k != nil {
		if par && g.pipe.open != nil {
			g.pipe.pipeReady(k)
		} else {
			g.out = append(g.out, k.z...)
			g.crc = crcCombine(g.crc, k.crc, k.shift)
			g.size += k.n
		}
		wr.written += int64(k.n)
		k.used = g.seq
		p.mu.Unlock()
		g.spliced++
		if par {
			wr.pipeSubmit(t, false)
		}
		return true, wr.writeOut(false)
	}
	list := wr.pageSeries(p, q)
	limit, big := uint64(wr.flushSize()), wr.bigSize()
	var estimate uint64
	for _, s := range list {
		e := s.sizeEstimate(f.typ)
		estimate += e
		if e > big || estimate > limit {
			p.mu.Unlock()
			return false, nil
		}
	}
	gen := p.settle()
	held := wr.held
	for _, s := range list {
		created, ok := s.createdFor(q)
		if !ok {
			wr.held++
			continue
		}
		wr.buf = wr.appendSeries(wr.buf, f, s, q, created)
	}
	p.mu.Unlock()
	if len(wr.buf) == 0 {
		return true, nil
	}
	g.compressed++
	keep := p
	if wr.held != held {
		keep = nil // it left a series out: no later scrape may splice it
	}
	if par {
		wr.pipeCompress(t, keep, &key, gen, q.Began)
	} else {
		wr.inlineFragment(t, keep, &key, gen, q.Began)
	}
	return true, wr.writeOut(false)
}

// inlineFragment compresses the rendered bytes in buf as a fragment of its
// own into out, and keeps it as page p's rendering of key at gen when p is
// not nil. The open fragment was cut; the caller holds no page lock.
func (wr *Writer) inlineFragment(t *Table, p *page, key *pageKey, gen uint64, began int64) {
	g := &wr.gz
	n := uint64(len(wr.buf))
	crc := crc32.ChecksumIEEE(wr.buf)
	start := len(g.out)
	_, _ = g.fw.Write(wr.buf)
	_ = g.fw.Flush()
	g.fw.Reset(g.sink)
	wr.buf = wr.buf[:0]
	shift := crcShift(n) // once: the page keeps it
	g.crc = crcCombine(g.crc, crc, shift)
	g.size += n
	wr.written += int64(n)
	if p != nil {
		p.mu.Lock()
		p.keep(t, key, gen, began, g.seq, g.out[start:], crc, shift, n)
		p.mu.Unlock()
	}
}

// keptPageSize is what a kept rendering costs besides its bytes.
const keptPageSize = unsafe.Sizeof(keptPage{})
