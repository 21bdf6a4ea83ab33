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
// writer's profile on kong10k with every route changed): rendered on one
// goroutine and compressed on the same one, the scrape took 2× the plain
// one. But the fragments of a gzip body (gzip.go) are independent: each is
// compressed from a fresh state and ends on a byte boundary. So with
// Options.GzipWorkers > 0 the scrape's goroutine only renders: it hands each
// fragment (a page that may be kept, or the bytes between such pages, cut
// at flushAt) to a few compression goroutines, and splices the compressed
// fragments into the body in their order as they come back, with the kept
// pages it splices from earlier scrapes between them. Rendering page N+1
// and compressing page N (and N-1, …) then overlap.
//
// Bounds: a scrape starts at most GzipWorkers goroutines (and no more than
// GOMAXPROCS), each with its own compressor, which the Writer (the scrape
// slot) keeps for its next gzip scrape, and all have ended when WriteTo
// returns. At most pipeDepth fragments are in flight; each holds its
// rendered bytes (under flushAt plus a series) and its compressed ones.
// The scrape's goroutine never waits for a compressor while it holds a
// page's lock, and no compressor takes one: a compressed page is kept
// (page.keep, under its lock) by the scrape's goroutine when it splices
// it, and only if the page did not change since it was rendered.
//
// Compression output differs from the one-goroutine path only where the
// bytes between two kept pages are cut (each fragment starts a fresh
// deflate state): a few bytes per family header.

// pipeDepth is how many fragments a scrape may have in flight per worker:
// enough that a worker finding its next fragment ready is the common case,
// few enough that the bytes held stay a few pages.
const pipeDepth = 3

// gzFragment is one fragment of a parallel gzip scrape: rendered bytes to
// compress, or (ready) a kept page spliced as it was.
type gzFragment struct {
	in []byte // the rendered bytes, for a worker
	z  []byte // the compressed fragment
	n  uint64 // len(in), or the kept page's size
	// crc and shift are the CRC-32 of the uncompressed bytes and
	// crcShift(n).
	crc, shift uint32
	ready      bool          // z is a kept page's, copied: no worker
	done       chan struct{} // a worker sends once z is filled
	// keep: when p is not nil, z is its rendering of key at gen by a
	// scrape that began at began, to keep once spliced.
	p     *page
	key   pageKey
	gen   uint64
	began int64
}

// Write appends to z: the fragment is its compressor's sink.
func (f *gzFragment) Write(b []byte) (int, error) {
	f.z = append(f.z, b...)
	return len(b), nil
}

// gzPipe is the Writer's compression pipeline: its workers' compressors,
// kept between scrapes, and the ring of fragments in flight.
type gzPipe struct {
	fws  []*flate.Writer
	ring []gzFragment
	// head is the oldest fragment in flight, n how many are.
	head, n int
	jobs    chan *gzFragment
	wg      sync.WaitGroup
	running int // workers started this scrape
	// abort tells the workers to skip what is left: the scrape failed.
	abort atomic.Bool
}

// pipeWorkers returns how many compression goroutines a gzip scrape of t
// uses: Options.GzipWorkers, at most GOMAXPROCS; 0 when only one
// goroutine can run at a time, where a handoff gains nothing.
func pipeWorkers(t *Table) int {
	n := min(t.opts.GzipWorkers, runtime.GOMAXPROCS(0))
	if n < 1 || runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	return n
}

// beginPipe readies the pipeline for a scrape with n workers (started at
// the first fragment).
func (pp *gzPipe) begin(n int) {
	if len(pp.ring) != pipeDepth*n {
		pp.ring = make([]gzFragment, pipeDepth*n)
		for i := range pp.ring {
			pp.ring[i].done = make(chan struct{}, 1)
		}
		// Room for every fragment and every worker's stop.
		pp.jobs = make(chan *gzFragment, len(pp.ring)+n)
	}
	for len(pp.fws) < n {
		fw, _ := flate.NewWriter(nil, flate.BestSpeed) // a valid level: no error
		pp.fws = append(pp.fws, fw)
	}
	pp.fws = pp.fws[:n]
	pp.head, pp.n, pp.running = 0, 0, 0
	pp.abort.Store(false)
}

// work compresses fragments until it receives nil.
func (pp *gzPipe) work(fw *flate.Writer) {
	defer pp.wg.Done()
	for f := range pp.jobs {
		if f == nil {
			return
		}
		if !pp.abort.Load() {
			f.z = f.z[:0]
			f.n = uint64(len(f.in))
			f.crc = crc32.ChecksumIEEE(f.in)
			f.shift = crcShift(f.n)
			fw.Reset(f)
			_, _ = fw.Write(f.in) // f never fails
			_ = fw.Flush()
		}
		f.done <- struct{}{}
	}
}

// stop ends the scrape's workers; with abort, they skip the fragments
// still queued. The fragments in flight are dropped.
func (pp *gzPipe) stop(abort bool) {
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
	// Every fragment sent was answered; take the answers not received.
	for ; pp.n > 0; pp.n-- {
		f := &pp.ring[pp.head]
		if !f.ready {
			<-f.done
		}
		f.p = nil
		pp.head = (pp.head + 1) % len(pp.ring)
	}
	pp.running = 0
}

// release drops what a huge scrape grew past maxRetained.
func (pp *gzPipe) release() {
	for i := range pp.ring {
		f := &pp.ring[i]
		f.p = nil
		if cap(f.in) > maxRetained {
			f.in = nil
		}
		if cap(f.z) > maxRetained {
			f.z = nil
		}
	}
}

// pipeRoom makes room in the ring for one more fragment, splicing the
// oldest when the ring is full (waiting for its worker if need be). The
// caller holds no page lock.
func (wr *Writer) pipeRoom(t *Table) {
	pp := &wr.gz.pipe
	if pp.n == len(pp.ring) {
		wr.pipeSplice(t, 1)
	}
}

// pipeNext returns the next free fragment; pipeRoom made room.
func (pp *gzPipe) next() *gzFragment {
	f := &pp.ring[(pp.head+pp.n)%len(pp.ring)]
	pp.n++
	return f
}

// pipeSubmit hands buf to a worker as a fragment (a page to keep when p is
// not nil) and takes the fragment's old buffer as buf. The caller holds
// no page lock.
func (wr *Writer) pipeSubmit(t *Table, p *page, key *pageKey, gen uint64, began int64) {
	if len(wr.buf) == 0 {
		return
	}
	wr.pipeRoom(t)
	pp := &wr.gz.pipe
	f := pp.next()
	f.in, wr.buf = wr.buf, f.in[:0]
	f.ready, f.p = false, p
	if p != nil {
		f.key, f.gen, f.began = *key, gen, began
	}
	wr.written += int64(len(f.in))
	if pp.running < len(pp.fws) && (pp.running == 0 || pp.n > pp.running) {
		// One more worker while fragments wait for one.
		pp.wg.Add(1)
		go pp.work(pp.fws[pp.running])
		pp.running++
	}
	pp.jobs <- f // never blocks: the channel holds the whole ring
	wr.pipeSplice(t, 0)
}

// pipeSplice splices the compressed fragments at the ring's head into the
// body, in order, keeping the pages they render: it waits for the first
// wait of them, and takes the ones after as long as they are done.
func (wr *Writer) pipeSplice(t *Table, wait int) {
	g := &wr.gz
	pp := &g.pipe
	for pp.n > 0 {
		f := &pp.ring[pp.head]
		if !f.ready {
			if wait > 0 {
				<-f.done
			} else {
				select {
				case <-f.done:
				default:
					return
				}
			}
		}
		wait--
		start := len(g.out)
		g.out = append(g.out, f.z...)
		g.crc = crcCombine(g.crc, f.crc, f.shift)
		g.size += f.n
		if p := f.p; p != nil {
			p.mu.Lock()
			p.keep(t, &f.key, f.gen, f.began, g.seq, g.out[start:], f.crc, f.shift, f.n)
			p.mu.Unlock()
			f.p = nil
		}
		pp.head = (pp.head + 1) % len(pp.ring)
		pp.n--
	}
}
