package series

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/otelgateway/otelgateway/exporter/promstreamexporter/internal/exposition"
)

// twoProcs lets the test's gzip scrapes use the pipeline (gzippipe.go)
// with two workers: it takes GOMAXPROCS − 1.
func twoProcs(t testing.TB) {
	if prev := runtime.GOMAXPROCS(0); prev < 3 {
		runtime.GOMAXPROCS(3)
		t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	}
}

// TestGzipWorkersLeaveAProcToTheScrape: the pipeline takes at most
// GOMAXPROCS − 1 workers, none with one proc.
func TestGzipWorkersLeaveAProcToTheScrape(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	tbl := New(Options{GzipWorkers: 2})
	for _, c := range [][2]int{{1, 0}, {2, 1}, {3, 2}, {8, 2}} {
		runtime.GOMAXPROCS(c[0])
		if got := pipeWorkers(tbl); got != c[1] {
			t.Errorf("GOMAXPROCS %d: %d workers, want %d", c[0], got, c[1])
		}
	}
}

// checkPipe fails unless wr's last gzip scrape compressed on workers
// goroutines (0: on its own), and they all ended with it.
func checkPipe(t testing.TB, wr *Writer, workers int) {
	t.Helper()
	pp := &wr.gz.pipe
	if wr.gz.workers != workers || (workers > 0 && len(pp.fws) != workers) {
		t.Fatalf("the scrape compressed with %d workers (%d compressors), want %d", wr.gz.workers, len(pp.fws), workers)
	}
	if pp.running != 0 || pp.n != 0 || pp.open != nil {
		t.Fatalf("after the scrape %d workers run, %d fragments are in flight", pp.running, pp.n)
	}
}

// cancelWriter cancels its scrape's context at its nth write.
type cancelWriter struct {
	n      int
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	if w.n--; w.n <= 0 {
		w.cancel()
	}
	return len(p), nil
}

// TestGzipPipelineAbort: a gzip scrape whose connection fails, or whose
// client leaves, part-way stops its compression goroutines before WriteTo
// returns (goleak checks none is left), and the writer's next scrape is
// exact, splicing what was kept.
func TestGzipPipelineAbort(t *testing.T) {
	twoProcs(t)
	z := newGzTable(t, Options{GzipWorkers: 2})
	q := Query{Format: exposition.FormatText004}
	for after := range 3 {
		wr := &Writer{flushLimit: 8 << 10} // writes often; some pages too big to keep
		gq := q
		gq.Gzip = true
		if _, err := wr.WriteTo(context.Background(), z.tbl, &failingWriter{after: after}, &gq); err == nil {
			t.Fatalf("a scrape whose write %d failed returned no error", after+1)
		}
		checkPipe(t, wr, 2)
		ctx, cancel := context.WithCancel(context.Background())
		if _, err := wr.WriteTo(ctx, z.tbl, &cancelWriter{n: after + 1, cancel: cancel}, &gq); !errors.Is(err, context.Canceled) {
			t.Fatalf("a scrape whose client left at write %d returned %v", after+1, err)
		}
		checkPipe(t, wr, 2)
		scrapeBoth(t, z.tbl, wr, q)
		checkPipe(t, wr, 2)
		z.counter(t, after, float64(after*10), gzCreated)
		scrapeBoth(t, z.tbl, wr, q)
		if wr.gz.spliced == 0 {
			t.Fatal("nothing spliced after an aborted scrape")
		}
	}
}

// TestGzipPipelineMatchesOneGoroutine: a scrape compressed by the pipeline
// is, decompressed, the one-goroutine scrape's body, and compresses about
// as well (its extra cuts cost a few bytes a family).
func TestGzipPipelineMatchesOneGoroutine(t *testing.T) {
	twoProcs(t)
	z := newGzTable(t, Options{})
	q := Query{Format: exposition.FormatText004, Gzip: true}
	var one, par bytes.Buffer
	if _, err := (&Writer{}).WriteTo(context.Background(), z.tbl, &one, &q); err != nil {
		t.Fatal(err)
	}
	z.tbl.opts.GzipWorkers = 2
	wr := &Writer{}
	if _, err := wr.WriteTo(context.Background(), z.tbl, &par, &q); err != nil {
		t.Fatal(err)
	}
	checkPipe(t, wr, 2)
	if wr.gz.pipe.handed == 0 {
		t.Fatal("the scrape handed no batch to a worker")
	}
	if !bytes.Equal(gunzip(t, par.Bytes()), gunzip(t, one.Bytes())) {
		t.Fatal("the pipeline's body is not the one-goroutine body")
	}
	if par.Len() > one.Len()+one.Len()/50 {
		t.Fatalf("the pipeline's body is %d bytes, the one-goroutine body %d", par.Len(), one.Len())
	}
}
