package receiver

import (
	"sync"
	"testing"
)

var workload = sync.OnceValue(NewWorkload)

// BenchmarkExport is one export of 512 Kong spans through each contender,
// after a warm-up round over every body (the cached path). One op is one
// export; ns/span is the figure the targets are about.
//
//	go test -run '^$' -bench Export -count 6 . | tee new.txt && go run golang.org/x/perf/cmd/benchstat@latest new.txt
func BenchmarkExport(b *testing.B) {
	w := workload()
	for _, key := range Keys {
		b.Run(key, func(b *testing.B) {
			p, err := Start(key)
			if err != nil {
				b.Fatal(err)
			}
			defer func() {
				if err := p.Close(); err != nil {
					b.Error(err)
				}
			}()
			for _, body := range w.Bodies {
				if err := p.Export(body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(w.Bytes / len(w.Bodies)))
			i := 0
			for b.Loop() {
				if err := p.Export(w.Bodies[i]); err != nil {
					b.Fatal(err)
				}
				if i++; i == len(w.Bodies) {
					i = 0
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*SpansPerExport), "ns/span")
		})
	}
}
