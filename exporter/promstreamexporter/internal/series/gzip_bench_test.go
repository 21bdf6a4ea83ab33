package series

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// BenchmarkGzipScrape scrapes the 200,000-series Kong table (500,000
// sample lines, text 0.0.4) plain, gzip'd as the handler did before kept
// pages (klauspost gzip at BestSpeed around the plain writer: "stream"),
// zstd'd as the handler does (SpeedFastest), and gzip'd by the writer with
// kept pages (Query.Gzip) when no page, one page in 8, or every page
// changed since the scrape before, compressed on the scrape's goroutine
// or (pipe2) on two compression goroutines (Options.GzipWorkers, as the
// exporter's default). Besides ns/op (wall) it reports cpu-ns/op, the
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
	run("gzip/pipe2/unchanged", kept, 0, 2)
	run("gzip/pipe2/changed-1in8", kept, 8, 2)
	run("gzip/pipe2/changed-all", kept, 1, 2)
}
