package series

import (
	"bytes"
	sflate "compress/flate"
	"context"
	"io"
	"testing"
	"time"

	kflate "github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkGzipScrape scrapes the 200,000-series Kong table (500,000
// sample lines, text 0.0.4) plain, gzip'd as the handler did before kept
// pages (klauspost gzip at BestSpeed around the plain writer: "stream"),
// zstd'd as the handler does (SpeedFastest), and gzip'd by the writer with
// kept pages (Query.Gzip) when no page, one page in 8, or every page
// changed since the scrape before, compressed on the scrape's goroutine
// or (pipe) on compression goroutines (Options.GzipWorkers 2, the
// exporter's default: GOMAXPROCS − 1 of them at most, 1 on 2 cores). Besides ns/op (wall) it reports cpu-ns/op, the
// process's CPU across the scrape (getrusage: the compression goroutines'
// too), x-plain-cpu, that over the plain scrape's in the same run, out-B (the body's bytes) and, for kept pages,
// kept-B (their memory, KeptBytes) and kept/plain (over the plain body's
// bytes).
//
//	go test -run '^$' -bench GzipScrape -count 6 ./exporter/promstreamexporter/internal/series
func BenchmarkGzipScrape(b *testing.B) {
	tbl := kong200k(b, Options{})
	var pages []*page
	for _, f := range tbl.families {
		pages = f.appendPages(pages, &Query{})
	}
	gz, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	zs, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	var plainCPU time.Duration
	var plainBytes int64
	run := func(name string, scrape func(w *Writer, sink io.Writer) error, changeEvery, workers int) {
		b.Run(name, func(b *testing.B) {
			tbl.opts.GzipWorkers = workers
			defer func() { tbl.opts.GzipWorkers = 0 }()
			var w Writer
			var sink countingWriter
			// Two scrapes first: lazy caches, and the pages the first keeps.
			for range 2 {
				if err := scrape(&w, &sink); err != nil {
					b.Fatal(err)
				}
			}
			var cpu time.Duration
			for b.Loop() {
				if changeEvery > 0 {
					for i := 0; i < len(pages); i += changeEvery {
						pages[i].touch()
					}
				}
				sink.n = 0
				c := processCPU()
				if err := scrape(&w, &sink); err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c
			}
			cpu /= time.Duration(b.N)
			if cpu > 0 {
				b.ReportMetric(float64(cpu), "cpu-ns/op")
			}
			b.ReportMetric(float64(sink.n), "out-B")
			if name == "plain" {
				plainCPU, plainBytes = cpu, sink.n
			} else if plainCPU > 0 && cpu > 0 {
				b.ReportMetric(float64(cpu)/float64(plainCPU), "x-plain-cpu")
			}
			if kept := tbl.KeptBytes(); kept > 0 && plainBytes > 0 {
				b.ReportMetric(float64(kept), "kept-B")
				b.ReportMetric(float64(kept)/float64(plainBytes), "kept/plain")
			}
		})
	}
	ctx := context.Background()
	run("plain", func(w *Writer, sink io.Writer) error {
		_, err := w.WriteTo(ctx, tbl, sink, &Query{})
		return err
	}, 0, 0)
	run("gzip/stream", func(w *Writer, sink io.Writer) error {
		gz.Reset(sink)
		_, err := w.WriteTo(ctx, tbl, gz, &Query{})
		if err != nil {
			return err
		}
		return gz.Close()
	}, 0, 0)
	run("zstd/stream", func(w *Writer, sink io.Writer) error {
		zs.Reset(sink)
		_, err := w.WriteTo(ctx, tbl, zs, &Query{})
		if err != nil {
			return err
		}
		return zs.Close()
	}, 0, 0)
	kept := func(w *Writer, sink io.Writer) error {
		_, err := w.WriteTo(ctx, tbl, sink, &Query{Gzip: true})
		return err
	}
	run("gzip/kept/unchanged", kept, 0, 0)
	run("gzip/kept/changed-1in8", kept, 8, 0)
	run("gzip/kept/changed-all", kept, 1, 0)
	run("gzip/pipe/unchanged", kept, 0, 2)
	run("gzip/pipe/changed-1in8", kept, 8, 2)
	run("gzip/pipe/changed-all", kept, 1, 2)
}

// BenchmarkFragmentCompressors compresses the kong200k text exposition
// (60 MB) in fragments of one page's size, each from a fresh state and
// sync-flushed, as a gzip scrape does (gzip.go), with each candidate
// compressor: klauspost/compress flate at levels 1 (BestSpeed, what the
// writer uses), 2 and 3 and Huffman-only, and the standard library's
// compress/flate at BestSpeed. It reports MB/s (uncompressed), cpu-ns/op
// (the process's CPU: the machine's other tenants do not count) and out/in,
// the compressed size over the text's: the scrape's CPU and the bytes on
// the wire, side by side.
//
//	go test -run '^$' -bench FragmentCompressors -count 6 ./exporter/promstreamexporter/internal/series
func BenchmarkFragmentCompressors(b *testing.B) {
	tbl := kong200k(b, Options{})
	var body bytes.Buffer
	if _, err := (&Writer{}).WriteTo(context.Background(), tbl, &body, &Query{}); err != nil {
		b.Fatal(err)
	}
	text := body.Bytes()
	const fragment = 40 << 10 // a page of 256 gauges, 32 histograms: 30–50 KB
	type resetter interface {
		io.Writer
		Flush() error
		Reset(io.Writer)
	}
	kl := func(level int) func(io.Writer) resetter {
		return func(w io.Writer) resetter { fw, _ := kflate.NewWriter(w, level); return fw }
	}
	for _, c := range []struct {
		name string
		make func(io.Writer) resetter
	}{
		{"klauspost/level1", kl(kflate.BestSpeed)},
		{"klauspost/level2", kl(2)},
		{"klauspost/level3", kl(3)},
		{"klauspost/huffman-only", kl(kflate.HuffmanOnly)},
		{"stdlib/level1", func(w io.Writer) resetter { fw, _ := sflate.NewWriter(w, sflate.BestSpeed); return fw }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var sink countingWriter
			fw := c.make(&sink)
			b.SetBytes(int64(len(text)))
			cpu := processCPU()
			for b.Loop() {
				sink.n = 0
				for off := 0; off < len(text); off += fragment {
					fw.Reset(&sink)
					_, _ = fw.Write(text[off:min(off+fragment, len(text))])
					_ = fw.Flush()
				}
			}
			b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(sink.n)/float64(len(text)), "out/in")
		})
	}
}
