package receiver

import (
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/otelgateway/otelgateway/internal/gateway"
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

// BenchmarkMap is the receiver's span mapping alone (gateway.SpanCounter
// over the unmarshalled workload), without HTTP, unmarshalling or
// aggregation. One op is one export.
//
//	go test -run '^$' -bench Map -count 6 . | tee map.txt
func BenchmarkMap(b *testing.B) {
	w := workload()
	reqs := make([]ptraceotlp.ExportRequest, len(w.Bodies))
	for i, body := range w.Bodies {
		reqs[i] = ptraceotlp.NewExportRequest()
		if err := reqs[i].UnmarshalProto(body); err != nil {
			b.Fatal(err)
		}
	}
	var c gateway.SpanCounter
	n := 0
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_, counted := c.Count(reqs[i].Traces(), func(*gateway.Event) {})
		n += counted
		if i++; i == len(reqs) {
			i = 0
		}
	}
	if n != b.N*RequestsPerExport {
		b.Fatalf("counted %d requests, want %d", n, b.N*RequestsPerExport)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*SpansPerExport), "ns/span")
}
