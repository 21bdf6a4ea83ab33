package series

import (
	"hash/crc32"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/flate"
)

// Parallel compression of a gzip scrape (issue 28 item 4).
//
// Deflate is most of a gzip scrape whose pages changed (69 % of the
// writer's profile on kong10k with every route changed): rendered and
// compressed on one goroutine, the scrape took 2× the plain one. But the
// fragments of a gzip body (gzip.go) are independent: each is compressed
// from a fresh state and ends on a byte boundary. So with
// Options.GzipWorkers > 0 the scrape's goroutine renders, and hands the
// fragments to compress (a page that may be kept, the bytes between such
// pages) to a few compression goroutines in batches of about batchBytes,
// the kept pages it splices from earlier scrapes in their places between
// them; it splices the batches back into the body in order as they come
// back. Rendering the next pages and compressing the last ones then
// overlap.
//
// Batches, not fragments: a handoff costs a goroutine's wake-up and park
// (futex calls, the scheduler's spinning), and a page is some 40 KB, a
// fraction of a millisecond to compress: handed over one by one, pages
// cost 50 % more CPU on kong200k with one page in 8 changed
// (BenchmarkGzipScrape). For the same reason a small fragment (a family's
// header) while nothing is in flight is compressed on the scrape's
// goroutine, and a kept page is spliced into the body directly then, as
// without workers: an unchanged table's scrape never hands anything over.
//
// Bounds: a scrape starts at most GzipWorkers goroutines (no more than
// GOMAXPROCS − 1), each with its own compressor, which the Writer (the scrape
// slot) keeps for its next gzip scrape; all have ended when WriteTo
// returns. At most pipeDepth batches per worker are in flight, each some
// batchBytes of rendered text (plus one fragment) and its compressed bytes.
// The scrape's goroutine never waits for a worker while it holds a page's
// lock, and no worker takes one: a compressed page is kept (page.keep,
// under its lock, a copy) by the scrape's goroutine when it splices it, and
// only if the page did not change since it was rendered.

const (
	// pipeDepth is how many batches a scrape may have in flight per
	// worker: a worker finds its next batch ready, and the bytes held stay
	// a few batches.
	pipeDepth = 2
	// batchBytes is the rendered bytes (and spliced compressed ones) after
	// which a batch is handed to a worker.
	batchBytes = 256 << 10
	// inlineBytes is the fragment the scrape's goroutine compresses itself
	// when no batch is in flight.
	inlineBytes = 16 << 10
)

// gzSeg is one fragment of a batch: rendered bytes to compress (buf), or
// a kept page's compressed bytes (ready, in the batch's pre).
type gzSeg struct {
	buf   []byte
	ready bool
	// off, zn: a ready fragment's place in pre.
	off, zn int
	// n is the uncompressed size; crc and shift its CRC-32 and
	// crcShift(n) (a worker fills them in for a fragment it compresses).
	n          uint64
	crc, shift uint32
	zs, ze     int // a compressed fragment's bytes in the batch's z
	// keep: when p is not nil, the fragment is its rendering of key at gen
	// by a scrape that began at began, to keep once spliced.
	p     *page
	key   pageKey
	gen   uint64
	began int64
}

// gzBatch is fragments handed to a worker together.
type gzBatch struct {
	segs []gzSeg // reused with their buffers: segs[:cap] hold them
	pre  []byte  // ready fragments' bytes
	z    []byte  // the compressed fragments' bytes (not the ready ones')
	// n, crc and shift are the batch's uncompressed size, CRC-32 and
	// crcShift(n).
	n          uint64
	crc, shift uint32
	weight     int           // bytes added, against batchBytes
	done       chan struct{} // a worker sends once z is filled
}

// Write appends to z: the batch is its compressor's sink.
func (b *gzBatch) Write(p []byte) (int, error) {
	b.z = append(b.z, p...)
	return len(p), nil
}

// addSeg returns a new fragment at the end of b, its buffer kept from the
// batch's earlier use.
func (b *gzBatch) addSeg() *gzSeg {
	if len(b.segs) < cap(b.segs) {
		b.segs = b.segs[:len(b.segs)+1]
	} else {
		b.segs = append(b.segs, gzSeg{})
	}
	s := &b.segs[len(b.segs)-1]
	buf := s.buf[:0]
	*s = gzSeg{buf: buf}
	return s
}

// gzPipe is the Writer's compression pipeline: its workers' compressors,
// kept between scrapes, and the ring of batches.
type gzPipe struct {
	fws  []*flate.Writer
	ring []gzBatch
	// head is the oldest batch in flight, n how many are; open is the one
	// being filled (the ring's next), or nil.
	head, n int
	open    *gzBatch
	jobs    chan *gzBatch
	wg      sync.WaitGroup
	running int // workers started this scrape
	handed  int // batches handed to workers this scrape
	// abort tells the workers to skip what is left: the scrape failed.
	abort atomic.Bool
}

// pipeWorkers returns how many compression goroutines a gzip scrape of t
// uses: Options.GzipWorkers, at most GOMAXPROCS − 1, since the scrape's
// own goroutine renders meanwhile (0 with one proc, where a handoff gains
// nothing). On bench/promstream's 2 cores, 2 workers beside the renderer
// cost more CPU than 1 and were no faster (issue 28 item 4).
func pipeWorkers(t *Table) int {
	return max(0, min(t.opts.GzipWorkers, runtime.GOMAXPROCS(0)-1))
}

// begin readies the pipeline for a scrape with n workers (started as
// batches come).
func (pp *gzPipe) begin(n int) {
	if len(pp.ring) != pipeDepth*n {
		pp.ring = make([]gzBatch, pipeDepth*n)
		for i := range pp.ring {
			pp.ring[i].done = make(chan struct{}, 1)
		}
		// Room for every batch and every worker's stop.
		pp.jobs = make(chan *gzBatch, len(pp.ring)+n)
	}
	for len(pp.fws) < n {
		fw, _ := flate.NewWriter(nil, flate.BestSpeed) // a valid level: no error
		pp.fws = append(pp.fws, fw)
	}
	pp.fws = pp.fws[:n]
	pp.head, pp.n, pp.open, pp.running, pp.handed = 0, 0, nil, 0, 0
	pp.abort.Store(false)
}

// busy reports whether fragments wait in the pipeline: a fragment must
// then follow them into it.
func (pp *gzPipe) busy() bool { return pp.n > 0 || pp.open != nil }

// work compresses batches until it receives nil.
func (pp *gzPipe) work(fw *flate.Writer) {
	defer pp.wg.Done()
	for b := range pp.jobs {
		if b == nil {
			return
		}
		if !pp.abort.Load() {
			compressBatch(fw, b)
		}
		b.done <- struct{}{}
	}
}

// compressBatch fills in b's compressed bytes, each fragment compressed
// from a fresh state and sync-flushed, and its CRC.
func compressBatch(fw *flate.Writer, b *gzBatch) {
	b.z = b.z[:0]
	var crc uint32
	var n uint64
	for i := range b.segs {
		s := &b.segs[i]
		if !s.ready { // a ready one is spliced from pre
			s.zs = len(b.z)
			s.n = uint64(len(s.buf))
			s.crc = crc32.ChecksumIEEE(s.buf)
			s.shift = crcShift(s.n)
			fw.Reset(b)
			_, _ = fw.Write(s.buf) // b never fails
			_ = fw.Flush()
			s.ze = len(b.z)
		}
		crc = crcCombine(crc, s.crc, s.shift)
		n += s.n
	}
	b.crc, b.n, b.shift = crc, n, crcShift(n)
}

// stop ends the scrape's workers; with abort, they skip the batches still
// queued. The batches in flight are dropped.
func (pp *gzPipe) stop(abort bool) {
	if pp.open != nil {
		pp.open.dropKeeps()
		pp.open = nil
	}
	if pp.running == 0 {
		return
	}
	if abort {
		pp.abort.Store(true)
	}
	for range pp.running {
		pp.jobs <- nil
	}
	pp.wg.Wait()
	// Every batch sent was answered; take the answers not received.
	for ; pp.n > 0; pp.n-- {
		b := &pp.ring[pp.head]
		<-b.done
		b.dropKeeps()
		pp.head = (pp.head + 1) % len(pp.ring)
	}
	pp.running = 0
}

// dropKeeps drops the batch's references to pages.
func (b *gzBatch) dropKeeps() {
	for i := range b.segs {
		b.segs[i].p = nil
	}
}

// release drops what a huge scrape grew past maxRetained.
func (pp *gzPipe) release() {
	for i := range pp.ring {
		b := &pp.ring[i]
		b.dropKeeps()
		for j := range b.segs[:cap(b.segs)] {
			if s := &b.segs[:cap(b.segs)][j]; cap(s.buf) > maxRetained {
				s.buf = nil
			}
		}
		if cap(b.pre) > maxRetained {
			b.pre = nil
		}
		if cap(b.z) > maxRetained {
			b.z = nil
		}
	}
}

// pipeOpen makes sure a batch is open, splicing the oldest in flight (and
// waiting for its worker) when the ring is full. The caller holds no page
// lock.
func (wr *Writer) pipeOpen(t *Table) *gzBatch {
	pp := &wr.gz.pipe
	if pp.open != nil {
		return pp.open
	}
	if pp.n == len(pp.ring) {
		wr.pipeSplice(t, 1)
	}
	b := &pp.ring[(pp.head+pp.n)%len(pp.ring)]
	b.segs, b.pre, b.weight = b.segs[:0], b.pre[:0], 0
	pp.open = b
	return b
}

// pipeReady adds kept page k to the open batch, which the caller opened
// (pipeOpen) before it took the page's lock, which it holds: a copy of its
// bytes, since the page may replace them once unlocked.
func (pp *gzPipe) pipeReady(k *keptPage) {
	b := pp.open
	s := b.addSeg()
	s.ready, s.off, s.zn = true, len(b.pre), len(k.z)
	s.n, s.crc, s.shift = k.n, k.crc, k.shift
	b.pre = append(b.pre, k.z...)
	b.weight += len(k.z)
}

// pipeCompress compresses the rendered bytes in buf as one fragment: page
// p's rendering of key at gen, to keep, when p is not nil. Behind
// fragments in flight, or when it is large, it goes to a worker in the
// open batch (buf then takes the buffer the fragment's slot had);
// otherwise it is compressed here. The caller holds no page lock.
func (wr *Writer) pipeCompress(t *Table, p *page, key *pageKey, gen uint64, began int64) {
	if len(wr.buf) == 0 {
		return
	}
	g := &wr.gz
	pp := &g.pipe
	if !pp.busy() && len(wr.buf) < inlineBytes {
		wr.inlineFragment(t, p, key, gen, began)
		return
	}
	b := wr.pipeOpen(t)
	s := b.addSeg()
	s.buf, wr.buf = wr.buf, s.buf
	s.p = p
	if p != nil {
		s.key, s.gen, s.began = *key, gen, began
	}
	b.weight += len(s.buf)
	wr.written += int64(len(s.buf))
	wr.pipeSubmit(t, false)
}

// pipeSubmit hands the open batch to a worker once it holds batchBytes, or
// with all, whatever it holds; then splices what came back.
func (wr *Writer) pipeSubmit(t *Table, all bool) {
	pp := &wr.gz.pipe
	if b := pp.open; b != nil && (b.weight >= batchBytes || (all && len(b.segs) > 0)) {
		pp.open = nil
		pp.n++
		pp.handed++
		if pp.running < len(pp.fws) && (pp.running == 0 || pp.n > pp.running) {
			// One more worker while batches wait for one.
			pp.wg.Add(1)
			go pp.work(pp.fws[pp.running])
			pp.running++
		}
		pp.jobs <- b // never blocks: the channel holds the whole ring
	}
	wr.pipeSplice(t, 0)
}

// pipeSplice splices the compressed batches at the ring's head into the
// body, in order, keeping the pages they render: it waits for the first
// wait of them, and takes the ones after as long as they are done.
func (wr *Writer) pipeSplice(t *Table, wait int) {
	g := &wr.gz
	pp := &g.pipe
	for pp.n > 0 {
		b := &pp.ring[pp.head]
		if wait > 0 {
			<-b.done
		} else {
			select {
			case <-b.done:
			default:
				return
			}
		}
		wait--
		for i := range b.segs {
			s := &b.segs[i]
			start := len(g.out)
			if s.ready {
				g.out = append(g.out, b.pre[s.off:s.off+s.zn]...)
			} else {
				g.out = append(g.out, b.z[s.zs:s.ze]...)
			}
			if p := s.p; p != nil {
				p.mu.Lock()
				p.keep(t, &s.key, s.gen, s.began, g.seq, g.out[start:], s.crc, s.shift, s.n)
				p.mu.Unlock()
				s.p = nil
			}
		}
		g.crc = crcCombine(g.crc, b.crc, b.shift)
		g.size += b.n
		pp.head = (pp.head + 1) % len(pp.ring)
		pp.n--
	}
}

// pipeEnd compresses what is left and splices every batch.
func (wr *Writer) pipeEnd(t *Table) {
	wr.pipeSubmit(t, true)
	wr.pipeSplice(t, wr.gz.pipe.n)
	wr.gz.pipe.stop(false)
}
